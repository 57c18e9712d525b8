/**
 * The direction of dependencies, checked by `pnpm deps:check` (in CI, before
 * the tests). The layering it enforces is the one in the root README:
 *
 *   @x/store  <-  adapters (@x/store-s3, -azure, -gcs), @x/store-conformance, @x/lease
 *   @x/manifest, @x/wal-segment (pure formats: no store)
 *   @x/cpu-priority (Node built-ins only)
 *   @x/backup-worker (no cloud adapter, no cloud SDK)  <-  apps/backupd (imported by nobody)
 *
 * Workspace packages are resolved to their sources (the `@x/source` export
 * condition), so an import by package name and an import by relative path
 * both land in packages/<name>/src: the rules tell them apart by the import's
 * kind (`local` = a relative path). Each exception names its file and why;
 * tools/test/dependency-rules.test.ts proves that every rule reports what it
 * forbids.
 */

const CLOUD_ADAPTERS = '^packages/store-(s3|azure|gcs)/';
const CLOUD_SDKS =
  'node_modules/(@aws-sdk|@smithy|@azure|@google-cloud|google-auth-library|gcp-metadata)/';
const TEST_FILE = '([.]test[.]ts$|/test/)';

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment:
        'No module depends on itself through others (type-only imports included); no cycle is exempt.',
      from: {},
      to: { circular: true },
    },
    {
      name: 'lease-imports-only-store',
      severity: 'error',
      comment:
        '@x/lease must be installable and useful on its own: its sources import @x/store and Node built-ins, nothing else.',
      from: { path: '^packages/lease/src/', pathNot: TEST_FILE },
      to: {
        pathNot: '^packages/(lease|store)/src/',
        dependencyTypesNot: ['core'],
      },
    },
    {
      name: 'cpu-priority-imports-only-node',
      severity: 'error',
      comment:
        '@x/cpu-priority stands alone (backupd and the benchmarks use it): its sources import Node built-ins and each other, nothing else.',
      from: { path: '^packages/cpu-priority/src/', pathNot: TEST_FILE },
      to: {
        pathNot: '^packages/cpu-priority/src/',
        dependencyTypesNot: ['core'],
      },
    },
    {
      name: 'formats-import-no-store',
      severity: 'error',
      comment:
        "The format packages (@x/manifest, @x/wal-segment) are pure formats: no store package, except @x/store's key rules (@x/store/keys: pure functions), so a key a format builds is one every store takes.",
      // README examples (examples/) are user code: they write a format to a store.
      from: {
        path: '^packages/(manifest|wal-segment)/',
        pathNot: '^packages/(manifest|wal-segment)/examples/',
      },
      to: {
        path: ['^packages/store[^/]*/', '^packages/test-servers/', '^packages/test-faults/'],
        pathNot: '^packages/store/src/(keys|errors|error-marker)[.]ts$',
      },
    },
    {
      name: 'worker-imports-no-cloud',
      severity: 'error',
      comment:
        '@x/backup-worker works on any ObjectStore: its sources import no cloud adapter and no cloud SDK (its integration tests may use the adapters).',
      from: { path: '^packages/backup-worker/src/', pathNot: TEST_FILE },
      to: { path: [CLOUD_ADAPTERS, CLOUD_SDKS] },
    },
    {
      name: 'worker-imports-no-engine-or-restore',
      severity: 'error',
      comment:
        '@x/backup-worker knows engines only through @x/engine; restore is a package of its own. Its sources import neither an engine nor restore.',
      from: { path: '^packages/backup-worker/src/', pathNot: TEST_FILE },
      to: { path: '^packages/(restore|source-[^/]+)/' },
    },
    {
      name: 'restore-imports-no-worker-or-engine',
      severity: 'error',
      comment:
        '@x/restore reads a prefix with @x/store, the formats and the engine contract only: it imports no worker, no engine, no lease, no cloud adapter or SDK.',
      from: { path: '^packages/restore/src/', pathNot: TEST_FILE },
      to: {
        path: ['^packages/(backup-worker|lease|source-[^/]+)/', CLOUD_ADAPTERS, CLOUD_SDKS],
      },
    },
    {
      name: 'engine-contract-imports-only-formats',
      severity: 'error',
      comment:
        '@x/engine is the contract every engine, the worker and restore share: types over the formats (@x/manifest, @x/wal-segment) and nothing else.',
      from: { path: '^packages/engine/src/', pathNot: TEST_FILE },
      to: { path: '^packages/', pathNot: '^packages/(engine|manifest|wal-segment)/' },
    },
    {
      name: 'engines-import-no-worker',
      severity: 'error',
      comment:
        'An engine (@x/source-*) implements the contract of @x/engine; its sources never import the worker (its tests run one).',
      from: { path: '^packages/source-[^/]+/src/', pathNot: TEST_FILE },
      to: { path: '^packages/backup-worker/' },
    },
    {
      name: 'engines-import-no-cloud-or-lease',
      severity: 'error',
      comment:
        'An engine (@x/source-*) implements the worker and restore interfaces on any ObjectStore: its sources import no cloud adapter or SDK and no lease.',
      from: { path: '^packages/source-[^/]+/src/', pathNot: TEST_FILE },
      to: { path: ['^packages/lease/', CLOUD_ADAPTERS, CLOUD_SDKS] },
    },
    {
      name: 'testing-subpath-only-in-tests',
      severity: 'error',
      comment:
        "@x/backup-worker/testing (test hooks, tuning constants) is for tests, benchmarks and the engine conformance suite: no package's or app's product code imports it.",
      from: {
        path: '^(packages|apps)/[^/]+/src/',
        pathNot: [TEST_FILE, '^packages/engine-conformance/src/'],
      },
      to: { path: '^packages/backup-worker/src/testing\\.ts$' },
    },
    {
      name: 'nothing-imports-the-app',
      severity: 'error',
      comment: 'apps/backupd is the top of the graph: nothing outside it imports it.',
      from: { pathNot: '^apps/backupd/' },
      to: { path: '^apps/backupd/' },
    },
    {
      name: 'no-package-internals-between-packages',
      severity: 'error',
      comment:
        'A package reaches another package only through its name (its package.json exports), never by a relative path into it.',
      from: { path: '^packages/([^/]+)/' },
      to: { dependencyTypes: ['local'], path: '^packages/', pathNot: '^packages/$1/' },
    },
    {
      name: 'no-package-internals-from-outside',
      severity: 'error',
      comment:
        'apps/, bench/, soak/, scripts/ and tools/ reach a package only through its name, never by a relative path into it.',
      from: {
        pathNot: '^packages/',
      },
      to: { dependencyTypes: ['local'], path: '^packages/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    // Not node_modules: excluded modules vanish from the graph, and the
    // cloud-SDK rule must see imports of them (doNotFollow keeps their insides out).
    exclude: { path: ['(^|/)dist/', '^bench/results/'] },
    tsPreCompilationDeps: true,
    // Resolve workspace packages to their sources, as the tests and tsc do.
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['@x/source', 'import', 'types', 'node', 'default'],
      extensions: ['.ts', '.js', '.mjs', '.cjs', '.d.ts', '.json'],
      mainFields: ['module', 'main', 'types'],
    },
    reporterOptions: {
      text: { highlightFocused: true },
    },
  },
};
