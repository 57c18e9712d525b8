/**
 * How heavy the core is, as one command prints it: code and comment lines
 * per package (tests excluded), the names each package's entry exports, and
 * the largest functions. `pnpm core-size` prints a table; `--json` prints
 * JSON; `--at <rev>` measures a commit of this repository instead of the
 * working tree (read through `git show`, nothing checked out).
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
/** The packages the engine contract, the worker and restore live in, and the CLI. */
const CORE = ['source-sqlite', 'backup-worker', 'restore'];
const PRODUCT_DIRECTORIES = [
  ...readdirSync(join(ROOT, 'packages'), { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .map((entry) => `packages/${entry.name}`),
  'apps/backupd',
];
const NOT_PRODUCT = new Set([
  'packages/integration-tests',
  'packages/test-faults',
  'packages/test-servers',
]);

interface SourceFile {
  readonly path: string;
  readonly text: string;
}

/** The product's TypeScript sources under `directory/src`, tests excluded. */
function sourcesOf(directory: string, at: string | undefined): SourceFile[] {
  const isSource = (path: string): boolean =>
    path.endsWith('.ts') && !path.endsWith('.test.ts') && !path.endsWith('.d.ts');
  if (at !== undefined) {
    const listing = execFileSync('git', ['ls-tree', '-r', '--name-only', at, `${directory}/src`], {
      cwd: ROOT,
      encoding: 'utf8',
    });
    return listing
      .split('\n')
      .filter(isSource)
      .map((path) => ({
        path,
        text: execFileSync('git', ['show', `${at}:${path}`], { cwd: ROOT, encoding: 'utf8' }),
      }));
  }
  const files: SourceFile[] = [];
  const walk = (folder: string): void => {
    for (const entry of readdirSync(join(ROOT, folder), { withFileTypes: true })) {
      const path = `${folder}/${entry.name}`;
      if (entry.isDirectory()) walk(path);
      else if (isSource(path)) files.push({ path, text: readFileSync(join(ROOT, path), 'utf8') });
    }
  };
  try {
    walk(`${directory}/src`);
  } catch {
    return [];
  }
  return files;
}

interface LineCount {
  code: number;
  comment: number;
}

/** Lines holding code, and lines holding only comments (blank lines count as neither). */
function countLines(text: string): LineCount {
  const source = ts.createSourceFile('counted.ts', text, ts.ScriptTarget.Latest, true);
  const lineOf = (position: number): number => source.getLineAndCharacterOfPosition(position).line;
  const codeLines = new Set<number>();
  const commentLines = new Set<number>();
  const mark = (lines: Set<number>, start: number, end: number): void => {
    for (let line = lineOf(start); line <= lineOf(Math.max(start, end - 1)); line += 1)
      lines.add(line);
  };
  const comments = (ranges: ts.CommentRange[] | undefined): void => {
    for (const range of ranges ?? []) mark(commentLines, range.pos, range.end);
  };
  const visit = (node: ts.Node): void => {
    if (node.kind >= ts.SyntaxKind.FirstJSDocNode && node.kind <= ts.SyntaxKind.LastJSDocNode) {
      mark(commentLines, node.getStart(source), node.getEnd());
      return;
    }
    const children = node.getChildren(source);
    if (children.length > 0) {
      for (const child of children) visit(child);
      return;
    }
    comments(ts.getLeadingCommentRanges(text, node.getFullStart()));
    comments(ts.getTrailingCommentRanges(text, node.getEnd()));
    if (node.kind !== ts.SyntaxKind.EndOfFileToken)
      mark(codeLines, node.getStart(source), node.getEnd());
  };
  visit(source);
  for (const line of codeLines) commentLines.delete(line);
  return { code: codeLines.size, comment: commentLines.size };
}

/** The names `src/index.ts` exports (values and types), read without resolving re-exports' files. */
function exportedNames(files: readonly SourceFile[], directory: string): string[] {
  const entries = files.filter((file) => /\/src\/(index|testing|adapter)\.ts$/.test(file.path));
  const names = new Set<string>();
  for (const entry of entries) {
    const source = ts.createSourceFile(entry.path, entry.text, ts.ScriptTarget.Latest, true);
    const subpath = entry.path.slice(`${directory}/src/`.length).replace(/\.ts$/, '');
    const qualify = (name: string): string => (subpath === 'index' ? name : `${subpath}:${name}`);
    for (const statement of source.statements) {
      if (
        ts.isExportDeclaration(statement) &&
        statement.exportClause &&
        ts.isNamedExports(statement.exportClause)
      )
        for (const element of statement.exportClause.elements)
          names.add(qualify(element.name.text));
      else if (ts.isExportDeclaration(statement))
        names.add(qualify(`* from ${statement.moduleSpecifier?.getText()}`));
      else if (
        ts.canHaveModifiers(statement) &&
        ts
          .getModifiers(statement)
          ?.some((modifier) => modifier.kind === ts.SyntaxKind.ExportKeyword)
      ) {
        if (ts.isVariableStatement(statement))
          for (const declaration of statement.declarationList.declarations)
            names.add(qualify(declaration.name.getText()));
        else if ('name' in statement && statement.name)
          names.add(qualify((statement.name as ts.Identifier).text));
      }
    }
  }
  return [...names].sort();
}

interface FunctionSize {
  readonly name: string;
  readonly file: string;
  readonly lines: number;
}

/** Every function, method and accessor with its code lines (comments and blank lines excluded). */
function functionSizes(file: SourceFile): FunctionSize[] {
  const source = ts.createSourceFile(file.path, file.text, ts.ScriptTarget.Latest, true);
  const sizes: FunctionSize[] = [];
  const visit = (node: ts.Node, owner: string): void => {
    let name: string | undefined;
    if (ts.isFunctionDeclaration(node) || ts.isMethodDeclaration(node) || ts.isGetAccessor(node))
      name = node.name?.getText() ?? '(anonymous)';
    else if (ts.isConstructorDeclaration(node)) name = 'constructor';
    else if (
      (ts.isArrowFunction(node) || ts.isFunctionExpression(node)) &&
      ts.isVariableDeclaration(node.parent)
    )
      name = node.parent.name.getText();
    if (name !== undefined && 'body' in node && node.body) {
      const body = (node.body as ts.Node).getText();
      sizes.push({
        name: owner ? `${owner}.${name}` : name,
        file: file.path,
        lines: countLines(body).code,
      });
    }
    const nextOwner = ts.isClassDeclaration(node) && node.name ? node.name.text : owner;
    ts.forEachChild(node, (child) => visit(child, nextOwner));
  };
  visit(source, '');
  return sizes;
}

function main(): void {
  const json = process.argv.includes('--json');
  const atIndex = process.argv.indexOf('--at');
  const at = atIndex === -1 ? undefined : process.argv[atIndex + 1];
  const packages = [];
  const functions: FunctionSize[] = [];
  for (const directory of PRODUCT_DIRECTORIES) {
    if (NOT_PRODUCT.has(directory)) continue;
    const files = sourcesOf(directory, at);
    if (files.length === 0) continue;
    const lines = files
      .map((file) => countLines(file.text))
      .reduce(
        (sum, count) => ({ code: sum.code + count.code, comment: sum.comment + count.comment }),
        { code: 0, comment: 0 },
      );
    const exported = exportedNames(files, directory);
    const main = exported.filter((name) => !name.includes(':')).length;
    packages.push({
      package: directory,
      files: files.length,
      ...lines,
      exported: main,
      exportedBySubpaths: exported.length - main,
      names: exported,
    });
    if (CORE.some((name) => directory === `packages/${name}`))
      for (const file of files) functions.push(...functionSizes(file));
  }
  const core = packages.filter((entry) =>
    CORE.some((name) => entry.package === `packages/${name}`),
  );
  const coreTotal = {
    code: core.reduce((sum, entry) => sum + entry.code, 0),
    comment: core.reduce((sum, entry) => sum + entry.comment, 0),
  };
  const largest = functions.sort((a, b) => b.lines - a.lines).slice(0, 10);
  if (json) {
    process.stdout.write(
      `${JSON.stringify({ at: at ?? 'working tree', packages, core: coreTotal, largest }, null, 2)}\n`,
    );
    return;
  }
  console.log(`core size (${at ?? 'working tree'}): code and comment lines, tests excluded`);
  console.log('| package | files | code | comment | exported (main) | exported (subpaths) |');
  console.log('| --- | ---: | ---: | ---: | ---: | ---: |');
  for (const entry of packages)
    console.log(
      `| ${entry.package} | ${entry.files} | ${entry.code} | ${entry.comment} | ${entry.exported} | ${entry.exportedBySubpaths} |`,
    );
  console.log(`| core (${CORE.join(', ')}) | | ${coreTotal.code} | ${coreTotal.comment} | | |`);
  console.log('\nten largest functions of the core (code lines)');
  for (const entry of largest)
    console.log(`${String(entry.lines).padStart(5)}  ${entry.name}  ${relative('.', entry.file)}`);
}

main();
