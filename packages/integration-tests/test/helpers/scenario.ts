/** The crash-at-every-write scenario, shared by the local and real-server suites. */
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BackupWorker, type EncryptionOptions } from '@x/backup-worker';
import { SimulatedCrashError, TestHooks } from '@x/backup-worker/testing';
import { FakeClock } from '@x/lease';
import { FramedDirSource, restoreFramedStore } from '@x/source-framed';
import type { ObjectStore } from '@x/store';
import { expect } from 'vitest';
import { checkBucket, checkRestorePointContent } from './check-bucket.ts';
import { FramedTestEngine } from './framed-engine.ts';
import type { StoreCase } from './stores.ts';

export const RETAIN = 2;

/** How the scenario's workers store objects: in clear, or with `encryption` (restored with its identities). */
export interface ScenarioOptions {
  readonly encryption?: EncryptionOptions;
}

export function newWorker(
  store: ObjectStore,
  prefix: string,
  engine: FramedTestEngine,
  clock = new FakeClock(),
  hooks?: TestHooks,
  options: ScenarioOptions = {},
): BackupWorker {
  return new BackupWorker({
    store,
    prefix,
    source: new FramedDirSource({ directory: engine.directory, engine }),
    clock,
    manifestIntervalMs: 0,
    retain: RETAIN,
    ...(hooks ? { hooks } : {}),
    ...(options.encryption === undefined ? {} : { encryption: options.encryption }),
  });
}

/** The identities that open what `options` seals (none in clear). */
function openOptionsOf(options: ScenarioOptions): {
  identities?: NonNullable<EncryptionOptions['identities']>;
} {
  const identities = options.encryption?.identities;
  return identities === undefined ? {} : { identities };
}

/**
 * The scenario: a base restore point with an archive, WAL shipping, a side
 * file change, a snapshot that archives the WAL (a new generation that
 * reuses the old archive), a compacting snapshot (floor raised, archives
 * gone), and retention throughout. Stops at the first simulated crash.
 */
export async function runScenario(
  worker: BackupWorker,
  engine: FramedTestEngine,
): Promise<'completed' | 'crashed'> {
  const steps: (() => Promise<void>)[] = [
    () => engine.commit(2),
    () => engine.snapshot(),
    () => engine.commit(3),
    () => worker.runOnce(),
    () => engine.commit(2),
    () => worker.runOnce(),
    () => engine.setRoles('{"roles":["reader"]}'),
    () => engine.snapshot(),
    () => engine.commit(1),
    () => worker.runOnce(),
    () => engine.commit(2),
    () => worker.runOnce(),
    () => engine.snapshot({ compact: true }),
    () => engine.commit(2),
    () => worker.runOnce(),
    () => engine.commit(1),
    () => worker.runOnce(),
  ];
  for (const step of steps) {
    try {
      await step();
    } catch (error) {
      if (SimulatedCrashError.isInstance(error)) return 'crashed';
      throw error;
    }
  }
  return 'completed';
}

/**
 * After a crash at write n: the bucket verifies, a new worker completes,
 * LATEST is the source. `inspect` looks at the bucket once the second worker
 * completed (the stored form of its objects).
 */
export async function crashAt(
  storeCase: StoreCase,
  n: number,
  options: ScenarioOptions & {
    inspect?: (store: ObjectStore, prefix: string) => Promise<void>;
  } = {},
): Promise<'completed' | 'crashed'> {
  const { store, prefix, close } = await storeCase.open();
  const directory = await mkdtemp(join(tmpdir(), 'backup-worker-crash-'));
  const open = openOptionsOf(options);
  try {
    const engine = await FramedTestEngine.create(directory);
    const hooks = new TestHooks();
    const first = newWorker(store, prefix, engine, new FakeClock(), hooks, options);
    hooks.failAfterWrites(n);
    const outcome = await runScenario(first, engine);
    // Every manifest left behind verifies, and LATEST names one of them.
    await checkBucket(store, prefix, { content: true, ...open });
    // A new worker resumes and completes.
    const second = newWorker(store, prefix, engine, new FakeClock(), undefined, options);
    await second.runOnce();
    const after = await checkBucket(store, prefix, { content: true, ...open });
    expect(after.latest).not.toBeNull();
    const latest = after.manifests.get(after.latest!)!;
    expect(latest.commitSeq).toBe(engine.durableCommits);
    await checkRestorePointContent(store, prefix, latest, open);
    // Retention ran: at most RETAIN of this lineage's manifests remain.
    expect(after.manifests.size).toBeLessThanOrEqual(RETAIN);
    // A restore of LATEST equals the source at that commit, file for file.
    await expectRestoreEqualsSource(store, prefix, engine, after.latest!, open);
    await options.inspect?.(store, prefix);
    return outcome;
  } finally {
    await rm(directory, { recursive: true, force: true });
    await close();
  }
}

/**
 * Restores `manifestKey` with the package's `restore()` and compares every
 * file with the engine's directory (which holds exactly what is durable):
 * the same snapshot, archives, WAL and side files, no `snapshot.intent`, no
 * `backup.lineage`, and a parent record naming the manifest.
 */
export async function expectRestoreEqualsSource(
  store: ObjectStore,
  prefix: string,
  engine: FramedTestEngine,
  manifestKey: string,
  open: { identities?: NonNullable<EncryptionOptions['identities']> } = {},
): Promise<void> {
  const target = await mkdtemp(join(tmpdir(), 'backup-worker-restored-'));
  try {
    const result = await restoreFramedStore(store, prefix, target, {
      target: { kind: 'restore-point', manifestKey },
      force: true,
      ...open,
    });
    expect(result.manifestKey).toBe(manifestKey);
    expect(result.commitSeq).toBe(engine.durableCommits);
    const skip = new Set(['snapshot.intent', 'backup.lineage', 'backup.parent']);
    const sourceNames = (await readdir(engine.directory)).filter((n) => !skip.has(n)).sort();
    const restoredNames = (await readdir(target)).filter((n) => n !== 'backup.parent').sort();
    expect(restoredNames).toEqual(sourceNames);
    for (const name of sourceNames) {
      const [a, b] = await Promise.all([
        readFile(join(engine.directory, name)),
        readFile(join(target, name)),
      ]);
      expect(Buffer.compare(a, b), name).toBe(0);
    }
    const parent = JSON.parse(await readFile(join(target, 'backup.parent'), 'utf8')) as {
      manifestKey: string;
    };
    expect(parent.manifestKey).toBe(manifestKey);
  } finally {
    await rm(target, { recursive: true, force: true });
  }
}
