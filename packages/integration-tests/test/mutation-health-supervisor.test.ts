/**
 * The health supervisor: health is evaluated every WAL interval whatever the
 * worker is doing, so a step stuck on the bucket (a segment upload that is
 * never answered, under a deadline far longer than the lag limit) still
 * turns the worker unhealthy once durable data has waited unshipped longer
 * than the limit. Steps evaluate health only when they end, so without the
 * supervisor nothing would: the stuck step never ends within the test.
 */
import type { FakeClock } from '@x/lease';
import { latestKey } from '@x/manifest';
import { MemoryStore, type PutOptions } from '@x/store';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { checkBucket } from './helpers/check-bucket.ts';
import { waitFor } from './helpers/drive.ts';
import type { FramedTestEngine } from './helpers/framed-engine.ts';
import { StartedWorkers } from './helpers/started-workers.ts';
import { CountingStore, untilAborted } from './helpers/stores.ts';

const prefix = 'supervised/db';
/** Far beyond the lag limit (30 s at a 1 s interval): the stuck step cannot end by itself. */
const OPERATION_TIMEOUT_MS = 600_000;

/** Leaves the lease alone; while `stuck`, a segment PUT waits for its signal and is never answered. */
class StuckSegmentStore extends CountingStore {
  stuck = false;
  /** Segment PUTs waiting now. */
  waiting = 0;
  override async put(key: string, body: Uint8Array, options?: PutOptions) {
    if (this.stuck && key.startsWith(`${prefix}/wal/`)) {
      this.waiting += 1;
      try {
        await untilAborted(options?.signal);
        throw options?.signal?.reason ?? new Error('aborted');
      } finally {
        this.waiting -= 1;
      }
    }
    return super.put(key, body, options);
  }
}

describe('the health supervisor', () => {
  let workers: StartedWorkers;
  let engine: FramedTestEngine;
  let clock: FakeClock;
  let inner: MemoryStore;
  let store: StuckSegmentStore;

  beforeEach(async () => {
    workers = await StartedWorkers.create('backup-worker-supervisor-');
    ({ engine, clock } = workers);
    inner = new MemoryStore();
    store = new StuckSegmentStore(inner);
  });
  afterEach(async () => {
    store.stuck = false;
    await workers.dispose({ stepMs: 250 });
  });

  it('re-evaluates health while a step is stuck: lag grows and the worker turns unhealthy, then recovers when the step completes', async () => {
    const { handle } = workers.start(store, {
      prefix,
      walIntervalMs: 1_000,
      leaseTtlSeconds: 30,
      operationTimeoutMs: OPERATION_TIMEOUT_MS,
      shutdownGraceMs: 5_000,
    });
    await waitFor(clock, async () => (await inner.get(latestKey(prefix))) !== null, {
      what: 'a backup',
    });
    await waitFor(clock, () => handle.health().healthy && handle.health().lagSeconds === 0, {
      what: 'healthy',
    });

    // The next step blocks on its segment upload and stays blocked.
    store.stuck = true;
    await engine.commit(2);
    await waitFor(clock, () => store.waiting > 0, { what: 'the step to be stuck' });
    // Lag is seen while the step is still stuck…
    await waitFor(clock, () => handle.health().lagSeconds >= 10, {
      what: 'lag to grow while the step is stuck',
      stepMs: 500,
      maxMs: 60_000,
    });
    expect(store.waiting).toBe(1);
    expect(handle.health().healthy).toBe(true);
    // …and the limit (max(30 s, 10 × interval)) turns the worker unhealthy, still stuck.
    await waitFor(clock, () => !handle.health().healthy, {
      what: 'unhealthy while the step is stuck',
      stepMs: 500,
      maxMs: 60_000,
    });
    expect(store.waiting).toBe(1);
    expect(handle.health().reason).toMatch(
      /^durable data unshipped for 3\ds \(.* behind\): backupd is not keeping up with the database's commits$/,
    );
    expect(handle.health().unshippedBytes).toBeGreaterThan(0);

    // The bucket answers again: the segment ships once the stuck request is
    // given up, and the worker is healthy with everything restorable.
    store.stuck = false;
    await waitFor(
      clock,
      async () => {
        if (!handle.health().healthy) return false;
        const check = await checkBucket(inner, prefix, { content: true });
        return check.manifests.get(check.latest!)!.commitSeq === engine.durableCommits;
      },
      { what: 'healthy again', stepMs: 5_000, maxMs: 2 * OPERATION_TIMEOUT_MS },
    );
    expect(handle.health()).toMatchObject({ reason: null, lagSeconds: 0 });
  });
});
