/**
 * Scheduled snapshots with the SQLite source: once a generation is as old as
 * `snapshotIntervalMs`, or its stored log outgrows `snapshotLogFactor` × the
 * database, the worker starts a new generation on a fresh snapshot; every
 * restore point before and after the switch restores exactly, and a restore
 * of the latest state reads the new snapshot, not the old generation's log.
 */

import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { BackupWorker, type BackupWorkerOptions } from '@x/backup-worker';
import { SNAPSHOT_FORCE_MIN_AGE_MS, SNAPSHOT_LOG_FLOOR_BYTES } from '@x/backup-worker/testing';
import { FakeClock } from '@x/lease';
import { parseManifest } from '@x/manifest';
import { listRestorePoints, restore } from '@x/restore';
import { MemoryStore } from '@x/store';
import { describe, expect, it } from 'vitest';
import { sqliteContentHash } from '../src/content-hash.ts';
import { sqliteMaterializer } from '../src/sqlite-materializer.ts';
import { SqliteSource } from '../src/sqlite-source.ts';
import { hashOf as contentHashOf, testWorkspace } from './harness.ts';

const workspace = testWorkspace();

const hashOf = (path: string): string => contentHashOf(path, sqliteContentHash);

async function setUp(options: Partial<BackupWorkerOptions>) {
  const directory = workspace.directory('scheduled-snapshot');
  const path = join(directory, 'app.db');
  const application = new DatabaseSync(path, { timeout: 5000 });
  workspace.onCleanup(() => application.close());
  application.exec('PRAGMA journal_mode=WAL; CREATE TABLE t (id INTEGER PRIMARY KEY, body BLOB)');
  const source = SqliteSource.open({ path, captureIntervalMs: 0 });
  workspace.onCleanup(() => source.close());
  const clock = new FakeClock();
  const store = new MemoryStore();
  const worker = new BackupWorker({
    store,
    prefix: 'p',
    source,
    clock,
    manifestIntervalMs: 0,
    ...options,
  });
  const insert = application.prepare('INSERT INTO t (body) VALUES (?)');
  const commit = (rows: number, bytes = 64) => {
    // Random bytes: the size rule counts stored (compressed) bytes.
    for (let i = 0; i < rows; i += 1) insert.run(randomBytes(bytes));
  };
  const rewrite = application.prepare('UPDATE t SET body = ? WHERE id % ? = ?');
  /** Rewrites the rows whose id is `slot` modulo `slots` with random `bytes`. */
  const update = (slots: number, slot: number, bytes: number) => {
    rewrite.run(randomBytes(bytes), slots, slot);
  };
  /** `steps` steps, each after `rows` more rows of `bytes`. */
  const commitEachStep = async (steps: number, rows: number, bytes: number) => {
    for (let step = 0; step < steps; step += 1) {
      commit(rows, bytes);
      await worker.runOnce();
    }
  };
  return { directory, path, clock, store, worker, commit, commitEachStep, update, source };
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The WAL generations the prefix's restore points name. */
async function generationsOf(store: MemoryStore): Promise<Set<number | undefined>> {
  return new Set((await listRestorePoints(store, 'p')).map((point) => point.walGeneration));
}

/** Every restore point of the prefix restores to the database it recorded. */
async function restoresExactly(
  store: MemoryStore,
  directory: string,
  expected: Map<number, string>,
): Promise<void> {
  for (const [commitSeq, hash] of expected) {
    const target = join(directory, `restored-${commitSeq}`);
    await restore(store, 'p', target, {
      target: { kind: 'commit', commitSeq },
      materializer: sqliteMaterializer({ databaseName: 'app.db' }),
    });
    expect(hashOf(join(target, 'app.db')), `commit ${commitSeq}`).toBe(hash);
  }
}

describe('scheduled snapshots (SQLite)', () => {
  it('starts a new generation once the current one is snapshotIntervalMs old, and restores across it', async () => {
    const { directory, path, clock, store, worker, commit } = await setUp({
      snapshotIntervalMs: 3_600_000,
      snapshotLogFactor: 0,
      // Every commit stays restorable (compaction would merge the old
      // generation's windows, long ended, before the switch).
      compactionLevels: [],
    });
    const expected = new Map<number, string>();
    const record = async () => {
      const points = await listRestorePoints(store, 'p');
      const newest = points.at(-1)!;
      expected.set(newest.commitSeq, hashOf(path));
      return newest;
    };
    commit(5);
    await worker.runOnce();
    const first = await record();
    clock.advance(1_800_000);
    commit(5);
    await worker.runOnce();
    expect((await record()).walGeneration).toBe(first.walGeneration);

    // An hour since the generation began: the step after it starts a new one.
    clock.advance(1_800_000);
    commit(5);
    await worker.runOnce();
    await record();
    await worker.runOnce();
    const switched = await record();
    expect(switched.walGeneration!).toBeGreaterThan(first.walGeneration!);
    commit(5);
    await worker.runOnce();
    const after = await record();
    expect(after.walGeneration).toBe(switched.walGeneration);
    await restoresExactly(store, directory, expected);

    // A restore of the latest state reads the new generation's snapshot and log only.
    const latest = (await listRestorePoints(store, 'p')).at(-1)!;
    expect(latest.restorableFrom!).toBeGreaterThan(first.commitSeq);
  });

  it('starts a new generation once the stored log outgrows snapshotLogFactor × the database', async () => {
    const { directory, path, store, worker, commit, update } = await setUp({
      snapshotIntervalMs: 0,
      snapshotLogFactor: 2,
      // The log as shipped: compaction would keep it near the database's size.
      compactionLevels: [],
    });
    const expected = new Map<number, string>();
    commit(40, 4096);
    await worker.runOnce();
    const first = (await listRestorePoints(store, 'p')).at(-1)!;
    expected.set(first.commitSeq, hashOf(path));
    // 40 rows of 4 KiB, each overflowing its page, rewritten with random
    // bytes 20 commits a round: the stored log outgrows twice the database,
    // and passes the 1 MiB floor (SNAPSHOT_LOG_FLOOR_BYTES) in about a
    // dozen rounds, while the database stays near 200 KiB.
    let generations = new Set([first.walGeneration]);
    for (let round = 0; round < 300 && generations.size < 2; round += 1) {
      for (let slot = 0; slot < 20; slot += 1) update(20, slot, 4096);
      await worker.runOnce();
      const newest = (await listRestorePoints(store, 'p')).at(-1)!;
      expected.set(newest.commitSeq, hashOf(path));
      generations = new Set([...generations, newest.walGeneration]);
    }
    expect(generations.size).toBe(2);
    await restoresExactly(store, directory, expected);
  });

  it('switches under a load that never lets the capture catch up at a step end, every restore point exact', async () => {
    // A commit lands, and is captured, before every bucket write: at a
    // step's end there is always one the worker has not shipped.
    let onWrite = () => {};
    const { directory, clock, store, worker, commit, source } = await setUp({
      hooks: { beforeWrite: () => onWrite() },
      // A restore point only at the interval, so none would come between
      // the steps of a due snapshot but for the rule under test.
      manifestIntervalMs: 3_600_000,
      snapshotIntervalMs: 3_600_000,
      snapshotLogFactor: 0,
    });
    onWrite = () => {
      commit(1);
      void source.catchUp();
    };
    await worker.runOnce();
    const first = (await listRestorePoints(store, 'p')).at(-1)!;
    clock.advance(3_600_000);
    let generations = new Set([first.walGeneration]);
    for (let step = 0; step < 10 && generations.size < 2; step += 1) {
      await worker.runOnce();
      const points = await listRestorePoints(store, 'p');
      generations = new Set(points.map((point) => point.walGeneration));
    }
    // Due at the first step, switched within the steps the rule allows.
    expect(generations.size).toBe(2);
    await worker.runOnce();
    const points = await listRestorePoints(store, 'p');
    const newest = points.at(-1)!;
    expect(newest.walGeneration).toBeGreaterThan(first.walGeneration!);
    // The old generation ends in a restore point; both restore exactly.
    const lastOfFirst = points.filter((p) => p.walGeneration === first.walGeneration).at(-1)!;
    expect(lastOfFirst.commitSeq).toBeGreaterThan(first.commitSeq);
    for (const point of [lastOfFirst, newest]) {
      const target = join(directory, `restored-${point.commitSeq}`);
      await restore(store, 'p', target, {
        target: { kind: 'restore-point', manifestKey: point.manifestKey },
        materializer: sqliteMaterializer({ databaseName: 'app.db' }),
      });
      const restored = new DatabaseSync(join(target, 'app.db'), { readOnly: true });
      try {
        const count = (restored.prepare('SELECT count(*) AS n FROM t').get() as { n: number }).n;
        // Each commit adds one row: the restore holds as many rows as commits.
        expect(count, point.manifestKey).toBe(point.commitSeq - (point === newest ? 1 : 0));
      } finally {
        restored.close();
      }
    }
  });

  it('under a load that never lets the capture catch up, switches by size no sooner than SNAPSHOT_FORCE_MIN_AGE_MS', async () => {
    let onWrite = () => {};
    const { clock, store, worker, commit, update, source } = await setUp({
      hooks: { beforeWrite: () => onWrite() },
      snapshotIntervalMs: 0,
      snapshotLogFactor: 1,
      compactionLevels: [],
    });
    commit(40, 4096);
    await worker.runOnce();
    const first = (await listRestorePoints(store, 'p')).at(-1)!;
    // A commit lands, and is captured, before every bucket write; rewrites
    // of the 40 rows take the stored log past the database and the floor.
    let slot = 0;
    onWrite = () => {
      for (let row = 0; row < 4; row += 1, slot += 1) update(40, slot % 40, 4096);
      void source.catchUp();
    };
    update(40, 0, 4096);
    const generations = () => generationsOf(store);
    for (let step = 0; step < 40; step += 1) await worker.runOnce();
    // Due by size all along, but the generation is younger than the minimum
    // age: its newest restore point names a snapshot of about 330 KiB and a
    // log well past the 1 MiB floor.
    expect(await generations()).toEqual(new Set([first.walGeneration]));
    const shipped = (await listRestorePoints(store, 'p')).at(-1)!;
    expect(shipped.sizeBytes!).toBeGreaterThan(2 * SNAPSHOT_LOG_FLOOR_BYTES);
    clock.advance(SNAPSHOT_FORCE_MIN_AGE_MS);
    for (let step = 0; step < 10 && (await generations()).size < 2; step += 1)
      await worker.runOnce();
    expect((await generations()).size).toBe(2);
  });

  it('a generation due by size stays due while compaction shrinks its log, and switches', async () => {
    let onWrite = () => {};
    const { clock, store, worker, commit, update, source } = await setUp({
      hooks: { beforeWrite: () => onWrite() },
      snapshotIntervalMs: 0,
      snapshotLogFactor: 1,
      // One window that stays open: only the bytes rule merges, whenever
      // the fine segments hold as many bytes as the database; each merge
      // takes the log back under 1 × the database.
      compactionLevels: [3_600_000],
    });
    const generations = () => generationsOf(store);
    // The inserts are the first generation's log, past 1 × the database: a
    // second generation starts on a snapshot that holds them.
    commit(300, 4096);
    for (let step = 0; step < 5 && (await generations()).size < 2; step += 1)
      await worker.runOnce();
    expect((await generations()).size).toBe(2);
    clock.advance(SNAPSHOT_FORCE_MIN_AGE_MS);
    // A load that never lets the capture catch up: the same 30 rows
    // rewritten before every bucket write. A merge holds a tenth of the
    // database, so the log passes 1 × the database for one step at most
    // before the next merge takes it back under: without the latch the
    // forced switch's wait starts over every time and never ends.
    let slot = 0;
    onWrite = () => {
      for (let row = 0; row < 30; row += 1, slot += 1) update(300, slot % 30, 4096);
      void source.catchUp();
    };
    update(300, 0, 4096);
    let steps = 0;
    while (steps < 30 && (await generations()).size < 3) {
      await worker.runOnce();
      steps += 1;
    }
    expect((await generations()).size).toBe(3);
    expect(steps).toBeLessThanOrEqual(10);
  });

  it('switches once a compaction in flight is in a restore point: the old generation ends on the compacted object, none is left unnamed', async () => {
    const { clock, store, worker, commit, commitEachStep } = await setUp({
      snapshotIntervalMs: 3_600_000,
      snapshotLogFactor: 0,
    });
    await commitEachStep(4, 5, 1000);
    // An hour later the generation is due and every window of compaction
    // has ended: the step starts a compaction, and the switch waits for it.
    clock.advance(3_600_000);
    commit(5, 1000);
    const generations = () => generationsOf(store);
    for (let step = 0; step < 10 && (await generations()).size < 2; step += 1) {
      await worker.runOnce();
      await pause(20);
    }
    expect((await generations()).size).toBe(2);
    const points = await listRestorePoints(store, 'p');
    const named = new Set<string>();
    for (const point of points) {
      const object = await store.get(point.manifestKey);
      const manifest = parseManifest(object!.body, { prefix: 'p' });
      for (const entry of [...manifest.files, ...manifest.segments]) named.add(entry.key);
    }
    const compacted = (await store.list('p/wal/00000000000000000000/')).objects
      .map((object) => object.key)
      .filter((key) => key.includes('.L'));
    expect(compacted.length).toBeGreaterThan(0);
    for (const key of compacted) expect(named.has(key), key).toBe(true);
    // The old generation's last restore point names a compacted object.
    const lastOfFirst = points.filter((point) => point.walGeneration === 0).at(-1)!;
    const last = parseManifest((await store.get(lastOfFirst.manifestKey))!.body, { prefix: 'p' });
    expect(last.segments.some((entry) => entry.key.includes('.L'))).toBe(true);
  });

  it('a switch that waited for a compaction and then stopped being imminent (a backlog past the bound) lets the generation compact again', async () => {
    // Set by the test below: called on the first bucket write of a step.
    let onFirstWrite = () => {};
    let wroteThisStep = false;
    const { clock, store, worker, commit, commitEachStep, update, source } = await setUp({
      hooks: {
        beforeStep: () => {
          wroteThisStep = false;
        },
        beforeWrite: () => {
          if (wroteThisStep) return;
          wroteThisStep = true;
          onFirstWrite();
        },
      },
      snapshotIntervalMs: 60_000,
      snapshotLogFactor: 0,
      compactionLevels: [20_000],
    });
    const compactedObjects = async () =>
      (await store.list('p/wal/')).objects.filter((object) => object.key.includes('.L')).length;
    /** Waits (up to 5 s: compaction runs beside the steps) for more than `count` compacted objects. */
    const compactedBeyond = async (count: number) => {
      for (let waited = 0; waited < 5000; waited += 20) {
        if ((await compactedObjects()) > count) return true;
        await pause(20);
      }
      return false;
    };
    // Three segments in the first window, the first with 1280 rows of 4 KiB.
    commit(1280, 4096);
    await commitEachStep(3, 5, 1000);
    // A minute later the generation is due by time and caught up, and the
    // first window has ended: the step starts its compaction, and the
    // switch waits for it.
    clock.advance(60_000);
    await worker.runOnce();
    expect(await compactedBeyond(0)).toBe(true);
    const afterFirst = await compactedObjects();
    expect(afterFirst).toBe(1);
    // From now on 5 MiB of rewrites land during every step (more than
    // SNAPSHOT_FORCE_MAX_BACKLOG_BYTES, 4 MiB, unshipped at its end): the
    // switch is not forced while the application outruns the shipping.
    onFirstWrite = () => {
      for (let slot = 0; slot < 4; slot += 1) update(4, slot, 4096);
      void source.catchUp();
    };
    const generationsBefore = await generationsOf(store);
    expect(generationsBefore.size).toBe(1);
    for (let step = 0; step < 8; step += 1) {
      clock.advance(10_000);
      await worker.runOnce();
      await pause(50);
    }
    // The generation kept compacting its ended windows meanwhile.
    expect(await compactedBeyond(afterFirst)).toBe(true);
    expect(await generationsOf(store)).toEqual(generationsBefore);
  });

  it('never starts one with both rules off', async () => {
    const { clock, store, worker, commit } = await setUp({
      snapshotIntervalMs: 0,
      snapshotLogFactor: 0,
    });
    for (let round = 0; round < 4; round += 1) {
      commit(20, 4096);
      clock.advance(86_400_000);
      await worker.runOnce();
    }
    const points = await listRestorePoints(store, 'p');
    expect(new Set(points.map((point) => point.walGeneration)).size).toBe(1);
  });
});
