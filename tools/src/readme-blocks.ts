/**
 * The README rules of CONTRIBUTING.md: every fenced ts/js block of a package
 * README is either the exact text of a file in that package's `examples/`
 * (which the package's tests run) or marked `<!-- fragment -->` on the last
 * non-blank line before its fence; a published package's README opens with
 * how to install it and which Node it needs.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/** Fence languages whose blocks are code that must run or be marked. */
export const CODE_LANGUAGES: ReadonlySet<string> = new Set([
  'ts',
  'typescript',
  'js',
  'javascript',
  'mjs',
]);

export const FRAGMENT_MARK = '<!-- fragment -->';

export interface CodeBlock {
  /** 1-based line of the opening fence. */
  readonly line: number;
  readonly language: string;
  /** The block's lines without the fence's indentation, each ending in '\n'. */
  readonly code: string;
  readonly fragment: boolean;
}

/** The fenced ts/js blocks of `markdown`; throws on a fence that never closes. */
export function codeBlocks(markdown: string): CodeBlock[] {
  const lines = markdown.split('\n');
  const blocks: CodeBlock[] = [];
  for (let index = 0; index < lines.length; index++) {
    const open = /^(\s*)```(\w*)\s*$/.exec(lines[index]!);
    if (!open) continue;
    const indent = open[1]!.length;
    const end = lines.findIndex((line, at) => at > index && /^\s*```\s*$/.test(line));
    if (end < 0) throw new Error(`line ${index + 1}: unclosed fence`);
    const language = open[2]!;
    if (CODE_LANGUAGES.has(language)) {
      const previous = lines
        .slice(0, index)
        .reverse()
        .find((line) => line.trim() !== '');
      blocks.push({
        line: index + 1,
        language,
        code: `${lines
          .slice(index + 1, end)
          .map((line) => line.slice(indent))
          .join('\n')}\n`,
        fragment: previous?.trim() === FRAGMENT_MARK,
      });
    }
    index = end;
  }
  return blocks;
}

/** The texts of the example files (`.mjs`, `.js`, `.ts`) directly in `directory`, or none. */
export function exampleTexts(directory: string): string[] {
  if (!existsSync(directory)) return [];
  return readdirSync(directory)
    .filter((file) => /\.(mjs|js|ts)$/.test(file))
    .sort()
    .map((file) => readFileSync(join(directory, file), 'utf8'));
}

/**
 * One message per ts/js block of `markdown` that is neither one of
 * `examples` verbatim nor marked as a fragment, naming `name` and the line.
 */
export function strayBlocks(name: string, markdown: string, examples: readonly string[]): string[] {
  return codeBlocks(markdown)
    .filter((block) => !block.fragment && !examples.includes(block.code))
    .map(
      (block) =>
        `${name}:${block.line}: \`\`\`${block.language} block is neither a file of examples/ nor marked ${FRAGMENT_MARK}`,
    );
}

/** What is wrong with how a published package's README opens (first `## ` section). */
export function installProblems(name: string, markdown: string): string[] {
  const firstSection = markdown.split(/\n## /)[1] ?? '';
  const problems: string[] = [];
  if (!/^Install/.test(firstSection)) problems.push(`${name}: first section is not Install`);
  if (!/Node 22(?:\.\d+)* or newer/.test(firstSection)) {
    problems.push(`${name}: Install section does not say "Node 22 or newer"`);
  }
  return problems;
}

export type ReadmeKind = 'package' | 'app';

/**
 * Every problem of the README of the package or app in `directory` (named
 * `name` in the messages, e.g. `packages/store`): stray blocks; for a package
 * whose package.json is not private, the Install section; for an app, that
 * it names Node 22.
 */
export function readmeProblems(directory: string, name: string, kind: ReadmeKind): string[] {
  const readmeName = `${name}/README.md`;
  let markdown: string;
  try {
    markdown = readFileSync(join(directory, 'README.md'), 'utf8');
  } catch {
    return [`${readmeName}: missing`];
  }
  const problems = strayBlocks(readmeName, markdown, exampleTexts(join(directory, 'examples')));
  if (kind === 'app') {
    if (!/Node\s*(?:≥|>=)?\s*22\b/.test(markdown))
      problems.push(`${readmeName}: never names Node 22`);
  } else {
    const manifest = JSON.parse(readFileSync(join(directory, 'package.json'), 'utf8')) as {
      private?: boolean;
    };
    if (manifest.private !== true) problems.push(...installProblems(readmeName, markdown));
  }
  return problems;
}
