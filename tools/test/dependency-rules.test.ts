/**
 * The dependency rules of `.dependency-cruiser.cjs` report what they forbid.
 * `pnpm deps:check` passing on the repository proves nothing if a rule never
 * matches (a path typo, a resolution that never lands where the rule looks):
 * here the same configuration runs, with the same command line, on a tiny
 * tree that breaks each rule once and also holds the allowed counterparts
 * (an import by package name, an adapter in a worker's integration test).
 */
import { spawnSync } from 'node:child_process';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const repositoryRoot = fileURLToPath(new URL('../..', import.meta.url));
const config = join(repositoryRoot, '.dependency-cruiser.cjs');
const depcruise = join(
  repositoryRoot,
  'node_modules',
  'dependency-cruiser',
  'bin',
  'dependency-cruiser.mjs',
);

/** The fixture: path -> contents. Package names resolve through node_modules links. */
const FILES: Record<string, string> = {
  'packages/store/package.json': JSON.stringify({
    name: '@x/store',
    type: 'module',
    exports: {
      '.': { '@x/source': './src/index.ts' },
      './keys': { '@x/source': './src/keys.ts' },
    },
  }),
  'packages/store/src/index.ts': "export const store = 'store';\n",
  'packages/store/src/keys.ts': 'export const keyProblem = (key: string) => key;\n',
  // Allowed: a format package uses the store's key rules (pure) through @x/store/keys.
  'packages/manifest/src/uses-key-rules.ts':
    "import { keyProblem } from '@x/store/keys';\nexport const rules = keyProblem;\n",
  'packages/store-s3/package.json': JSON.stringify({
    name: '@x/store-s3',
    type: 'module',
    exports: { '.': { '@x/source': './src/index.ts' } },
  }),
  'packages/store-s3/src/index.ts': "export const s3 = 's3';\n",
  'packages/backup-worker/package.json': JSON.stringify({
    name: '@x/backup-worker',
    type: 'module',
    exports: {
      '.': { '@x/source': './src/index.ts' },
      './testing': { '@x/source': './src/testing.ts' },
    },
  }),
  'packages/backup-worker/src/testing.ts': "export const hooks = 'hooks';\n",
  // Forbidden: product code of an engine imports the worker's test hooks.
  'packages/source-sqlite/src/uses-testing.ts':
    "import { hooks } from '@x/backup-worker/testing';\nexport const used = hooks;\n",
  // Allowed: a test of the same package does.
  'packages/source-sqlite/src/uses-testing.test.ts':
    "import { hooks } from '@x/backup-worker/testing';\nexport const used = hooks;\n",
  'packages/restore/package.json': JSON.stringify({
    name: '@x/restore',
    type: 'module',
    exports: { '.': { '@x/source': './src/index.ts' } },
  }),
  'packages/source-sqlite/package.json': JSON.stringify({
    name: '@x/source-sqlite',
    type: 'module',
    exports: { '.': { '@x/source': './src/index.ts' } },
  }),
  'packages/engine/package.json': JSON.stringify({
    name: '@x/engine',
    type: 'module',
    exports: { '.': { '@x/source': './src/index.ts' } },
  }),
  // Allowed: the contract uses the formats.
  'packages/engine/src/index.ts':
    "import { manifest } from '@x/manifest';\nexport const contract = manifest;\n",
  // Forbidden: the contract imports a store.
  'packages/engine/src/uses-store.ts':
    "import { store } from '@x/store';\nexport const contractStore = store;\n",
  'packages/manifest/package.json': JSON.stringify({
    name: '@x/manifest',
    type: 'module',
    exports: { '.': { '@x/source': './src/index.ts' } },
  }),
  'packages/manifest/src/index.ts': "export const manifest = 'manifest';\n",
  'node_modules/@aws-sdk/client-s3/package.json': JSON.stringify({
    name: '@aws-sdk/client-s3',
    main: 'index.js',
  }),
  'node_modules/@aws-sdk/client-s3/index.js': 'exports.S3Client = class {};\n',

  // Allowed: the lease imports @x/store by name.
  'packages/lease/src/index.ts': "import { store } from '@x/store';\nexport const lease = store;\n",
  // Forbidden: the lease imports another workspace package.
  'packages/lease/src/uses-manifest.ts':
    "import { manifest } from '@x/manifest';\nexport const leaseManifest = manifest;\n",
  // Allowed: @x/cpu-priority imports Node built-ins and its own files.
  'packages/cpu-priority/src/index.ts':
    "import { setPriority } from 'node:os';\nimport { priorityStore } from './uses-store.ts';\nexport const lower = [setPriority, priorityStore];\n",
  // Forbidden: @x/cpu-priority imports a workspace package.
  'packages/cpu-priority/src/uses-store.ts':
    "import { store } from '@x/store';\nexport const priorityStore = store;\n",
  // Forbidden: a format package imports a store.
  'packages/manifest/src/uses-store.ts':
    "import { store } from '@x/store';\nexport const manifestStore = store;\n",
  // Forbidden: the worker's sources import a cloud adapter and a cloud SDK.
  'packages/backup-worker/src/uses-adapter.ts':
    "import { s3 } from '@x/store-s3';\nexport const workerS3 = s3;\n",
  'packages/backup-worker/src/uses-sdk.ts':
    "import { S3Client } from '@aws-sdk/client-s3';\nexport const client = S3Client;\n",
  // Allowed: the worker's integration tests run against the adapters.
  'packages/backup-worker/test/s3.test.ts': "import { s3 } from '@x/store-s3';\nexport { s3 };\n",
  // Forbidden: a package reaches into another package by a relative path.
  'packages/backup-worker/src/reaches-in.ts':
    "import { store } from '../../store/src/index.ts';\nexport const reached = store;\n",
  // Allowed: a package's own files by relative path.
  'packages/backup-worker/src/index.ts':
    "import { workerS3 } from './uses-adapter.ts';\nexport const worker = workerS3;\n",
  // Forbidden: the worker's sources import restore or an engine.
  'packages/backup-worker/src/uses-restore.ts':
    "import { restore } from '@x/restore';\nexport const workerRestore = restore;\n",
  'packages/backup-worker/src/uses-engine.ts':
    "import { engine } from '@x/source-sqlite';\nexport const workerEngine = engine;\n",
  // Allowed: restore imports the store and the formats by name.
  'packages/restore/src/index.ts':
    "import { manifest } from '@x/manifest';\nimport { store } from '@x/store';\nexport const restore = [manifest, store];\n",
  // Forbidden: restore imports the worker or an engine.
  'packages/restore/src/uses-worker.ts':
    "import { worker } from '@x/backup-worker';\nexport const restoreWorker = worker;\n",
  'packages/restore/src/uses-engine.ts':
    "import { engine } from '@x/source-sqlite';\nexport const restoreEngine = engine;\n",
  // Allowed: an engine imports the contract and restore by name.
  'packages/source-sqlite/src/index.ts':
    "import { contract } from '@x/engine';\nimport { restore } from '@x/restore';\nexport const engine = [contract, restore];\n",
  // Forbidden: an engine's sources import the worker.
  'packages/source-sqlite/src/uses-worker.ts':
    "import { worker } from '@x/backup-worker';\nexport const engineWorker = worker;\n",
  // Forbidden: an engine imports a cloud adapter.
  'packages/source-sqlite/src/uses-adapter.ts':
    "import { s3 } from '@x/store-s3';\nexport const engineS3 = s3;\n",
  // Forbidden: something outside the app imports it.
  'apps/backupd/src/main.ts': "export const main = 'main';\n",
  'bench/uses-app.ts': "import { main } from '../apps/backupd/src/main.ts';\nexport { main };\n",
  // Forbidden: bench reaches into a package by a relative path; allowed: by name.
  'bench/reaches-in.ts':
    "import { store } from '../packages/store/src/index.ts';\nexport const benchStore = store;\n",
  'bench/by-name.ts': "import { store } from '@x/store';\nexport const named = store;\n",
  // Forbidden: a cycle.
  'packages/store/src/cycle-a.ts': "import { b } from './cycle-b.ts';\nexport const a = () => b;\n",
  'packages/store/src/cycle-b.ts': "import { a } from './cycle-a.ts';\nexport const b = () => a;\n",
};

/** Each workspace link a pnpm install makes in the fixture: link -> package directory. */
const LINKS: Record<string, string> = {
  'node_modules/@x/backup-worker': 'packages/backup-worker',
  'node_modules/@x/engine': 'packages/engine',
  'node_modules/@x/restore': 'packages/restore',
  'node_modules/@x/source-sqlite': 'packages/source-sqlite',
  'node_modules/@x/store': 'packages/store',
  'node_modules/@x/store-s3': 'packages/store-s3',
  'node_modules/@x/manifest': 'packages/manifest',
};

interface Violation {
  readonly rule: string;
  readonly from: string;
  readonly to: string;
}

let fixture: string;
let violations: Violation[];
let exitCode: number | null;

beforeAll(async () => {
  fixture = await mkdtemp(join(tmpdir(), 'dependency-rules-'));
  for (const [path, contents] of Object.entries(FILES)) {
    await mkdir(dirname(join(fixture, path)), { recursive: true });
    await writeFile(join(fixture, path), contents);
  }
  for (const [link, target] of Object.entries(LINKS)) {
    await mkdir(dirname(join(fixture, link)), { recursive: true });
    await symlink(join(fixture, target), join(fixture, link), 'dir');
  }
  const cruise = (outputType: string) =>
    spawnSync(
      process.execPath,
      [depcruise, '--config', config, '--output-type', outputType, 'packages', 'apps', 'bench'],
      { cwd: fixture, encoding: 'utf8' },
    );
  // As `pnpm deps:check` runs it (its exit code is the number of errors), then as JSON.
  exitCode = cruise('err').status;
  const json = cruise('json');
  if (json.stdout === '') throw new Error(`dependency-cruiser printed no report: ${json.stderr}`);
  const report = JSON.parse(json.stdout) as {
    summary: { violations: { rule: { name: string }; from: string; to: string }[] };
  };
  violations = report.summary.violations.map(({ rule, from, to }) => ({
    rule: rule.name,
    from,
    to,
  }));
});

afterAll(async () => {
  await rm(fixture, { recursive: true, force: true });
});

describe('the dependency rules', () => {
  it('fail the check on a tree that breaks them, with one error per violation', () => {
    expect(exitCode).toBe(violations.length);
    expect(exitCode).toBeGreaterThan(0);
  });

  it('report each forbidden import under its rule, and nothing else', () => {
    const sorted = (list: Violation[]) =>
      [...list].sort((x, y) => `${x.rule} ${x.from}`.localeCompare(`${y.rule} ${y.from}`));
    expect(sorted(violations)).toEqual(
      sorted([
        {
          rule: 'testing-subpath-only-in-tests',
          from: 'packages/source-sqlite/src/uses-testing.ts',
          to: 'packages/backup-worker/src/testing.ts',
        },
        {
          rule: 'lease-imports-only-store',
          from: 'packages/lease/src/uses-manifest.ts',
          to: 'packages/manifest/src/index.ts',
        },
        {
          rule: 'cpu-priority-imports-only-node',
          from: 'packages/cpu-priority/src/uses-store.ts',
          to: 'packages/store/src/index.ts',
        },
        {
          rule: 'formats-import-no-store',
          from: 'packages/manifest/src/uses-store.ts',
          to: 'packages/store/src/index.ts',
        },
        {
          rule: 'worker-imports-no-cloud',
          from: 'packages/backup-worker/src/uses-adapter.ts',
          to: 'packages/store-s3/src/index.ts',
        },
        {
          rule: 'worker-imports-no-cloud',
          from: 'packages/backup-worker/src/uses-sdk.ts',
          to: 'node_modules/@aws-sdk/client-s3/index.js',
        },
        {
          rule: 'no-package-internals-between-packages',
          from: 'packages/backup-worker/src/reaches-in.ts',
          to: 'packages/store/src/index.ts',
        },
        {
          rule: 'worker-imports-no-engine-or-restore',
          from: 'packages/backup-worker/src/uses-restore.ts',
          to: 'packages/restore/src/index.ts',
        },
        {
          rule: 'worker-imports-no-engine-or-restore',
          from: 'packages/backup-worker/src/uses-engine.ts',
          to: 'packages/source-sqlite/src/index.ts',
        },
        {
          rule: 'restore-imports-no-worker-or-engine',
          from: 'packages/restore/src/uses-worker.ts',
          to: 'packages/backup-worker/src/index.ts',
        },
        {
          rule: 'restore-imports-no-worker-or-engine',
          from: 'packages/restore/src/uses-engine.ts',
          to: 'packages/source-sqlite/src/index.ts',
        },
        {
          rule: 'engine-contract-imports-only-formats',
          from: 'packages/engine/src/uses-store.ts',
          to: 'packages/store/src/index.ts',
        },
        {
          rule: 'engines-import-no-worker',
          from: 'packages/source-sqlite/src/uses-worker.ts',
          to: 'packages/backup-worker/src/index.ts',
        },
        {
          rule: 'engines-import-no-worker',
          from: 'packages/source-sqlite/src/uses-testing.ts',
          to: 'packages/backup-worker/src/testing.ts',
        },
        {
          rule: 'engines-import-no-cloud-or-lease',
          from: 'packages/source-sqlite/src/uses-adapter.ts',
          to: 'packages/store-s3/src/index.ts',
        },
        {
          rule: 'nothing-imports-the-app',
          from: 'bench/uses-app.ts',
          to: 'apps/backupd/src/main.ts',
        },
        {
          rule: 'no-package-internals-from-outside',
          from: 'bench/reaches-in.ts',
          to: 'packages/store/src/index.ts',
        },
        {
          rule: 'no-circular',
          from: 'packages/store/src/cycle-a.ts',
          to: 'packages/store/src/cycle-b.ts',
        },
      ]),
    );
  });
});
