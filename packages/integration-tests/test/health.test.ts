/**
 * Health transitions, each with its reason; back-off; shutdown within the
 * grace period against a bucket that never answers; the panic hook.
 */
import { writeFile } from 'node:fs/promises';
import type { BackupHandle, BackupWorker } from '@x/backup-worker';
import { TestHooks } from '@x/backup-worker/testing';
import { type FakeClock, readLease } from '@x/lease';
import { latestKey } from '@x/manifest';
import { MemoryStore, StoreError } from '@x/store';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { checkBucket } from './helpers/check-bucket.ts';
import { waitFor } from './helpers/drive.ts';
import type { FramedTestEngine } from './helpers/framed-engine.ts';
import { StartedWorkers, type WorkerOptions } from './helpers/started-workers.ts';
import { CountingStore } from './helpers/stores.ts';

const prefix = 'health/db';

/** A store that fails every request while `failing` is set. */
class FailingStore extends CountingStore {
  failing = false;
  override async put(...args: Parameters<CountingStore['put']>) {
    if (this.failing) throw new StoreError('injected failure');
    return super.put(...args);
  }
  override async get(...args: Parameters<CountingStore['get']>) {
    if (this.failing) throw new StoreError('injected failure');
    return super.get(...args);
  }
  override async list(...args: Parameters<CountingStore['list']>) {
    if (this.failing) throw new StoreError('injected failure');
    return super.list(...args);
  }
}

describe('health', () => {
  let workers: StartedWorkers;
  let engine: FramedTestEngine;
  let clock: FakeClock;
  let store: FailingStore;
  let inner: MemoryStore;

  beforeEach(async () => {
    workers = await StartedWorkers.create('backup-worker-health-');
    ({ engine, clock } = workers);
    inner = new MemoryStore();
    store = new FailingStore(inner);
  });
  afterEach(() => workers.dispose());

  function worker(options: Partial<WorkerOptions> = {}): BackupWorker {
    return workers.worker(store, {
      prefix,
      walIntervalMs: 1_000,
      leaseTtlSeconds: 6,
      operationTimeoutMs: 2_000,
      shutdownGraceMs: 5_000,
      ...options,
    });
  }

  it('turns unhealthy after 3 consecutive failed steps, backs off 1 s doubling to 60 s, and recovers', async () => {
    const w = worker();
    // Nothing shipped yet: no success to report.
    await writeFile(engine.path('snapshot.intent'), 'in progress');
    await w.step();
    expect(w.health().lastSuccessAt).toBeNull();
    await writeFile(engine.path('snapshot.intent'), '');
    expect(await w.step()).toBe(1_000);
    expect(w.health()).toMatchObject({ healthy: true, reason: null, errorCount: 0, lagSeconds: 0 });
    expect(w.health().lastSuccessAt).toBe(clock.wallNow());
    store.failing = true;
    await engine.commit(1);
    const delays: number[] = [];
    for (let i = 0; i < 9; i += 1) {
      delays.push(await w.step());
      if (i === 1) expect(w.health()).toMatchObject({ healthy: true, errorCount: 2 });
      if (i === 2)
        expect(w.health()).toMatchObject({
          healthy: false,
          // The reason quotes the error behind the failures.
          reason: expect.stringMatching(
            /^3 consecutive failed backup steps \(last: .*injected failure.*\)$/,
          ),
          lastError: expect.stringContaining('injected failure'),
          errorCount: 3,
        });
    }
    expect(delays).toEqual([1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 60_000, 60_000, 60_000]);
    store.failing = false;
    expect(await w.step()).toBe(1_000);
    expect(w.health()).toMatchObject({
      healthy: true,
      reason: null,
      lastError: null,
      errorCount: 9,
      lagSeconds: 0,
    });
    expect(await w.step()).toBe(1_000);
  });

  it('reports lag and turns unhealthy when durable data waits unshipped longer than max(30 s, 10 × interval), naming the deferral', async () => {
    const handle = worker().start();
    try {
      await waitFor(clock, async () => (await inner.get(latestKey(prefix))) !== null, {
        what: 'a backup',
      });
      expect(handle.health()).toMatchObject({ healthy: true, lagSeconds: 0, leaseHeld: true });
      // A snapshot that never finishes: every step defers while commits pile up.
      await writeFile(engine.path('snapshot.intent'), 'stuck');
      await engine.commit(2);
      await waitFor(clock, () => handle.health().lagSeconds >= 10, { what: 'lag', stepMs: 500 });
      expect(handle.health().healthy).toBe(true);
      await waitFor(clock, () => !handle.health().healthy, { what: 'unhealthy', stepMs: 500 });
      expect(handle.health().reason).toMatch(
        /^durable data unshipped for 3\ds: a snapshot is in progress \(the snapshot intent is not empty\)$/,
      );
      // The snapshot finishes: shipped, healthy, lag 0.
      await writeFile(engine.path('snapshot.intent'), '');
      await waitFor(clock, () => handle.health().healthy, { what: 'healthy again' });
      expect(handle.health()).toMatchObject({ reason: null, lagSeconds: 0 });
      const check = await checkBucket(inner, prefix, { content: true });
      expect(check.manifests.get(check.latest!)!.commitSeq).toBe(engine.durableCommits);
    } finally {
      await stop(handle);
    }
  });

  function stop(handle: BackupHandle): Promise<number> {
    return workers.stop(handle, { stepMs: 250, maxMs: 120_000 });
  }

  it('flushes pending WAL and writes a final manifest on shutdown, then releases the lease and stays unhealthy ("stopped")', async () => {
    const handle = worker({ walIntervalMs: 60_000 }).start();
    await waitFor(clock, async () => (await inner.get(latestKey(prefix))) !== null, {
      what: 'a backup',
    });
    await engine.commit(4);
    await stop(handle);
    const check = await checkBucket(inner, prefix, { content: true });
    expect(check.manifests.get(check.latest!)!.commitSeq).toBe(engine.durableCommits);
    // Released: the record is gone or marked released.
    const lease = await readLease(inner, prefix);
    expect(lease === null || lease.record.released === true).toBe(true);
    expect(handle.health()).toMatchObject({ healthy: false, reason: 'stopped', leaseHeld: false });
  });

  for (const deaf of [false, true]) {
    it(`shuts down within the grace period against a bucket that never answers${deaf ? ', even one that ignores abort signals' : ''}`, async () => {
      const handle = worker().start();
      await waitFor(clock, async () => (await inner.get(latestKey(prefix))) !== null, {
        what: 'a backup',
      });
      store.hang = true;
      store.deaf = deaf;
      await engine.commit(2);
      // Let a step start and block on the bucket.
      clock.advance(1_000);
      const took = await stop(handle);
      // Grace (5 s) for the flush, then one operation deadline (2 s) for the release.
      expect(took).toBeLessThanOrEqual(5_000 + 2_000 + 250);
      expect(handle.health()).toMatchObject({ healthy: false, reason: 'stopped' });
      store.hang = false;
      // What was left verifies.
      await checkBucket(inner, prefix, { content: true });
    });
  }

  it('makes no request but lease renewals while idle, and steps at once on a snapshot trigger', async () => {
    const handle = worker({ walIntervalMs: 1_000, leaseTtlSeconds: 30 }).start();
    try {
      await waitFor(clock, async () => (await inner.get(latestKey(prefix))) !== null, {
        what: 'a backup',
      });
      await waitFor(clock, () => false, { maxMs: 2_000 }).catch(() => {});
      const writes = store.writes.length;
      const reads = { ...store.counts };
      // A minute of fake time with nothing to ship.
      await waitFor(clock, () => false, { maxMs: 60_000, stepMs: 500 }).catch(() => {});
      const idleWrites = store.writes.slice(writes);
      expect(idleWrites.length).toBeGreaterThanOrEqual(5);
      expect(idleWrites.every((w) => w === `PUT ${prefix}/LEASE`)).toBe(true);
      expect(store.counts.LIST).toBe(reads.LIST);
      expect(store.counts.HEAD).toBe(reads.HEAD);
      expect(store.counts.DELETE).toBe(reads.DELETE);
      expect(store.counts.GET).toBe(reads.GET);

      // A snapshot trigger: the next step runs without waiting for the interval.
      await engine.snapshot();
      await engine.commit(1);
      handle.trigger('snapshot');
      await waitFor(
        clock,
        async () => {
          const check = await checkBucket(inner, prefix);
          return check.manifests.get(check.latest!)!.commitSeq === engine.durableCommits;
        },
        { what: 'the new generation', stepMs: 1, maxMs: 50 },
      );
    } finally {
      await stop(handle);
    }
  });

  it('reports a panic as unhealthy for good, with the message', async () => {
    const hooks = new TestHooks();
    const w = worker({ hooks });
    const handle = w.start();
    await waitFor(clock, async () => (await inner.get(latestKey(prefix))) !== null, {
      what: 'a backup',
    });
    hooks.panicOnNextStep();
    let stopped = false;
    void handle.done.then(() => {
      stopped = true;
    });
    await waitFor(clock, () => stopped, { what: 'the worker to end' });
    expect(handle.health()).toMatchObject({
      healthy: false,
      reason: 'backup worker panicked: test hook: backup worker panics',
      leaseHeld: false,
    });
    clock.advance(10_000);
    expect(handle.health().healthy).toBe(false);
  });

  it('defers (not fails) while the snapshot intent is non-empty, and uploads nothing', async () => {
    await writeFile(engine.path('snapshot.intent'), 'in progress');
    const w = worker();
    await w.step();
    expect(store.writes).toEqual([]);
    expect(w.health()).toMatchObject({ healthy: true, errorCount: 0 });
    await writeFile(engine.path('snapshot.intent'), '');
    await w.step();
    expect(store.writes.length).toBeGreaterThan(0);
  });

  it('drops the lease when the bucket refuses a write, and starts again from the bucket afresh', async () => {
    const hooks = new TestHooks();
    const w = worker({ hooks });
    const handle = w.start();
    try {
      await waitFor(clock, async () => (await inner.get(latestKey(prefix))) !== null, {
        what: 'a backup',
      });
      // Another writer moves LATEST behind this worker's back.
      const latest = (await inner.get(latestKey(prefix)))!;
      await inner.put(latestKey(prefix), latest.body);
      const lists = hooks.listRequests();
      await engine.commit(1);
      await waitFor(
        clock,
        () => (handle.health().reason ?? '').includes('another writer is using this backup prefix'),
        {
          what: 'the refusal',
        },
      );
      expect(handle.health().reason).toBe(
        'another writer is using this backup prefix: LATEST changed since this worker last wrote or read it',
      );
      // It takes the lease again (its own record) and resumes from the bucket
      // (LISTs again: a new tenure reads the bucket afresh).
      await waitFor(
        clock,
        async () => {
          if (!handle.health().healthy || hooks.listRequests() <= lists + 2) return false;
          const check = await checkBucket(inner, prefix, { content: true });
          return check.manifests.get(check.latest!)!.commitSeq === engine.durableCommits;
        },
        { what: 'a new tenure' },
      );
    } finally {
      await stop(handle);
    }
  });
});
