/**
 * Compaction of a framed store's commit log by the worker: runs of fine
 * segments become level-1 objects (their frames concatenated), those become
 * level-2 objects; the newest restore point names a number of objects the
 * levels bound, not the steps; every commit any kept restore point covers
 * restores exactly, inside compacted objects too (a framed compacted object
 * keeps every frame); the fine objects a compaction replaced leave the
 * bucket; a snapshot of the engine starts a generation that compacts again;
 * a stop ends a compaction whose request the bucket never answers at once.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BackupWorker, type ShutdownReport } from '@x/backup-worker';
import { FakeClock } from '@x/lease';
import { parseManifest, parseSegmentKey } from '@x/manifest';
import { listRestorePoints, verify } from '@x/restore';
import { FramedDirSource, restoreFramedStore } from '@x/source-framed';
import { MemoryStore } from '@x/store';
import { faultyStore } from '@x/test-faults';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { checkBucket, framePayloads } from './helpers/check-bucket.ts';
import { waitFor } from './helpers/drive.ts';
import { FramedTestEngine } from './helpers/framed-engine.ts';
import { StartedWorkers } from './helpers/started-workers.ts';
import { readFiles } from './restore/fixture.ts';

const PREFIX = 'p';

describe('compaction of a framed store’s commit log', () => {
  let work: string;
  beforeEach(async () => {
    work = await mkdtemp(join(tmpdir(), 'framed-compaction-'));
  });
  afterEach(async () => {
    await rm(work, { recursive: true, force: true });
  });

  /** Steps until a compaction in flight has finished and been applied. */
  async function stepSettled(worker: BackupWorker): Promise<void> {
    for (let i = 0; i < 3; i += 1) {
      await worker.runOnce();
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    await worker.runOnce();
  }

  it('bounds what the newest restore point names and keeps every commit restorable', async () => {
    const store = new MemoryStore();
    const engine = await FramedTestEngine.create(join(work, 'source'));
    const clock = new FakeClock();
    clock.advance(Date.UTC(2026, 0, 1));
    const events: { event: string; fields: Record<string, unknown> }[] = [];
    const record = (event: string, fields: Record<string, unknown> = {}) => {
      events.push({ event, fields });
    };
    const worker = new BackupWorker({
      store,
      prefix: PREFIX,
      source: new FramedDirSource({ directory: engine.directory, engine }),
      clock,
      manifestIntervalMs: 0,
      compactionLevels: [30_000, 300_000],
      // Deleted as soon as no restore point names them (the window: exact-window.test.ts).
      exactWindowMs: 0,
      logger: { debug: record, info: record, warn: record, error: record },
    });
    // 12 minutes, a step every 5 s with 2 commits each; the engine
    // snapshots once, 8 minutes in.
    for (let step = 0; step < 144; step += 1) {
      if (step === 96) await engine.snapshot();
      await engine.commit(2);
      await stepSettled(worker);
      clock.advance(5_000);
    }
    expect(events.filter((e) => e.event === 'backup.compaction_failed')).toEqual([]);
    const compacted = events.filter((e) => e.event === 'backup.log_compacted');
    expect(compacted.some((e) => e.fields.level === 2 && e.fields.walGeneration === 0)).toBe(true);
    expect(compacted.some((e) => e.fields.level === 1 && e.fields.walGeneration === 1)).toBe(true);

    const report = await verify(store, PREFIX, { deep: true });
    expect(report.ok, JSON.stringify(report.manifests)).toBe(true);
    const points = (await listRestorePoints(store, PREFIX)).filter((p) => p.status === 'ok');
    const newest = points.at(-1)!;
    expect(newest.commitSeq).toBe(engine.durableCommits);
    const manifest = parseManifest((await store.get(newest.manifestKey))!.body, { prefix: PREFIX });
    expect(manifest.walGeneration).toBe(1);
    const levels = manifest.segments.map((s) => {
      const parsed = parseSegmentKey(PREFIX, s.key)!;
      return parsed.layout === 'compacted' ? parsed.level : 0;
    });
    // 48 steps in generation 1: its closed 5 min window as one level-2
    // object, the open one's 30 s windows as level 1, the newest fine.
    expect(levels.filter((l) => l > 0).length).toBeGreaterThanOrEqual(2);
    expect(manifest.segments.length).toBeLessThanOrEqual(2 + 10 + 8);

    // Every commit every kept restore point covers, exactly: inside the
    // compacted objects too.
    const covered = new Map<number, string>();
    for (const point of points)
      for (let commit = point.restorableFrom!; commit <= point.commitSeq; commit += 1)
        if (!covered.has(commit)) covered.set(commit, point.manifestKey);
    expect(covered.size).toBeGreaterThan(96);
    for (const [commitSeq, manifestKey] of covered) {
      const target = join(work, `restored-${commitSeq}`);
      const result = await restoreFramedStore(store, PREFIX, target, {
        target: { kind: 'restore-point', manifestKey, commitSeq },
      });
      const base = points.find((p) => p.manifestKey === result.manifestKey)!.restorableFrom!;
      const files = await readFiles(target);
      expect(framePayloads(files.get('wal.bin')!, 'wal.bin'), `commit ${commitSeq}`).toEqual(
        Array.from({ length: commitSeq - base }, (_, index) => `commit-${base + index + 1}`),
      );
      await rm(target, { recursive: true, force: true });
    }

    // What a compaction replaced is gone once no kept restore point names it.
    const named = new Set<string>();
    for (const point of points)
      for (const s of parseManifest((await store.get(point.manifestKey))!.body, { prefix: PREFIX })
        .segments)
        named.add(s.key);
    const left = (await store.list(`${PREFIX}/wal/`)).objects.map((o) => o.key);
    expect(left.filter((key) => !named.has(key))).toEqual([]);
    expect(left.length).toBeLessThan(144 / 2);
  });

  it('leaves a run covering more log than the source’s maxCompactedLogBytes as it is', async () => {
    const store = new MemoryStore();
    const engine = await FramedTestEngine.create(join(work, 'source'));
    const clock = new FakeClock();
    const events: string[] = [];
    const record = (event: string) => {
      events.push(event);
    };
    // Each step's segment covers 2 frames of 16 bytes: a run of two covers 64.
    class BoundedSource extends FramedDirSource {
      override readonly maxCompactedLogBytes = 63;
    }
    const worker = new BackupWorker({
      store,
      prefix: PREFIX,
      source: new BoundedSource({ directory: engine.directory, engine }),
      clock,
      manifestIntervalMs: 0,
      compactionLevels: [30_000],
      logger: { debug: record, info: record, warn: record, error: record },
    });
    for (let step = 0; step < 24; step += 1) {
      await engine.commit(2, { payloadBytes: 8 });
      await stepSettled(worker);
      clock.advance(5_000);
    }
    expect(events).not.toContain('backup.compaction_failed');
    expect(events).not.toContain('backup.log_compacted');
    const newest = (await listRestorePoints(store, PREFIX)).at(-1)!;
    const manifest = parseManifest((await store.get(newest.manifestKey))!.body, { prefix: PREFIX });
    expect(manifest.segments.length).toBe(24);
  });
});

describe('a stop during a compaction whose PUT the bucket never answers', () => {
  let workers: StartedWorkers;
  beforeEach(async () => {
    workers = await StartedWorkers.create('framed-compaction-stop-');
  });
  afterEach(async () => {
    await workers.dispose({ stepMs: 500, maxMs: 60_000 });
  });

  it('ends at once, flushes every commit, and leaves the compacted object unnamed', async () => {
    const { clock, engine } = workers;
    const bucket = new MemoryStore();
    // A compacted object's PUT lands, but its answer is held for an hour:
    // only an abort ends it. Every other request is answered.
    const store = faultyStore(bucket, {
      schedule: {
        rules: [{ kind: 'stall', methods: ['put'], path: /\.L1\./, stallMs: 3_600_000 }],
      },
      seed: 1,
      clock,
    });
    const events: string[] = [];
    const record = (event: string) => {
      events.push(event);
    };
    const { handle } = workers.start(store, {
      prefix: PREFIX,
      walIntervalMs: 1_000,
      operationTimeoutMs: 30_000,
      shutdownGraceMs: 10_000,
      compactionLevels: [30_000],
      logger: { debug: record, info: record, warn: record, error: record },
    });
    // A commit every 100 ms until a window of 30 s has ended and its
    // compaction's PUT is held.
    await waitFor(
      clock,
      async () => {
        if (store.counts().stall > 0) return true;
        await engine.commit(1);
        return false;
      },
      { what: 'a compaction PUT in flight' },
    );
    const [held] = store.faults().filter((fault) => fault.kind === 'stall');
    await engine.commit(2);

    let report: ShutdownReport | undefined;
    void handle.shutdown().then((done) => {
      report = done;
    });
    const tookMs = await waitFor(clock, () => report !== undefined, {
      stepMs: 100,
      what: 'shutdown',
    });
    // Not the request's deadline (30 s), nor the grace period (10 s, after
    // which the flush would be skipped): the abort ended it.
    expect(tookMs).toBeLessThan(1_000);
    expect(report).toMatchObject({
      complete: true,
      unrestorableCommits: 0,
      restorableCommitSeq: engine.durableCommits,
    });
    // A stop is no failure, and the compaction did not finish.
    expect(events).not.toContain('backup.compaction_failed');
    expect(events).not.toContain('backup.log_compacted');
    const check = await checkBucket(bucket, PREFIX, { content: true });
    expect(check.manifests.get(check.latest!)!.commitSeq).toBe(engine.durableCommits);
    // The held PUT landed; no restore point names what it stored.
    expect(await bucket.head(held!.path)).not.toBeNull();
    for (const manifest of check.manifests.values())
      expect(manifest.segments.map((segment) => segment.key)).not.toContain(held!.path);
  });
});
