/**
 * A stop after this worker lost the lease it once held. When another
 * instance holds it now, that instance backs the database up: the stop
 * hands over and is complete, and uploads nothing. When nobody holds it, the
 * stop takes it back and writes a restore point of everything captured,
 * instead of leaving those commits unrestorable.
 */
import type { BackupHandle, ShutdownReport } from '@x/backup-worker';
import { MemoryStore } from '@x/store';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { checkBucket } from './helpers/check-bucket.ts';
import { waitFor } from './helpers/drive.ts';
import { StartedWorkers } from './helpers/started-workers.ts';
import { CountingStore } from './helpers/stores.ts';

const TTL_S = 6;
const TIMINGS = {
  prefix: 'p',
  leaseTtlSeconds: TTL_S,
  walIntervalMs: 1_000,
  operationTimeoutMs: 2_000,
  // Shorter than the flush's retries (1 s, then 2 s): a lost lease must end them at once.
  shutdownGraceMs: 2_500,
};

describe('a stop after the lease was lost', () => {
  let workers: StartedWorkers;
  let bucket: MemoryStore;
  beforeEach(async () => {
    workers = await StartedWorkers.create('shutdown-after-lost-lease-');
    bucket = new MemoryStore();
  });
  afterEach(async () => {
    await workers.dispose({ stepMs: 500, maxMs: 60_000 });
  });

  async function stop(handle: BackupHandle): Promise<ShutdownReport> {
    let report: ShutdownReport | undefined;
    void handle.shutdown().then((r) => {
      report = r;
    });
    await waitFor(workers.clock, () => report !== undefined, { stepMs: 100, what: 'shutdown' });
    return report!;
  }

  const restorableCommits = async (): Promise<number> => {
    const check = await checkBucket(bucket, 'p', { content: true });
    return check.manifests.get(check.latest!)!.commitSeq;
  };

  /** A backs up, then the bucket stops answering it for longer than a TTL: its lease lapses. */
  async function startThenPartition() {
    const { clock, engine } = workers;
    const storeA = new CountingStore(bucket);
    const a = workers.start(storeA, TIMINGS);
    await waitFor(clock, () => a.handle.health().latestRestorePoint !== null, { what: 'A' });
    storeA.hang = true;
    await engine.commit(2);
    await waitFor(clock, () => !a.handle.health().leaseHeld, { what: 'A to stop writing' });
    await waitFor(clock, () => false, { maxMs: TTL_S * 1000 }).catch(() => {});
    return { a, storeA };
  }

  it('hands over to the instance that holds it now: complete, and nothing uploaded', async () => {
    const { clock, engine } = workers;
    const { a, storeA } = await startThenPartition();
    const storeB = new CountingStore(bucket);
    const b = workers.start(storeB, TIMINGS);
    await waitFor(clock, () => b.handle.health().latestRestorePoint !== null, { what: 'B' });
    await engine.commit(3);
    await waitFor(
      clock,
      () => b.handle.health().latestRestorePoint?.commitSeq === engine.durableCommits,
      { what: 'B to ship every commit' },
    );
    // The partition ends; A still counts every commit it saw as its own.
    storeA.hang = false;
    const writesBefore = storeA.writes.length;
    const report = await stop(a.handle);
    expect(report).toMatchObject({ complete: true, unrestorableCommits: 0 });
    expect(report.leaseHeldBy).toBe(b.worker.instanceId);
    expect(storeA.writes.slice(writesBefore).filter((w) => !w.endsWith('/LEASE'))).toEqual([]);
    expect(await restorableCommits()).toBe(engine.durableCommits);
    expect(await stop(b.handle)).toMatchObject({ complete: true });
  });

  it('takes back a lease its successor released and writes a restore point of everything captured', async () => {
    const { clock, engine } = workers;
    const { a, storeA } = await startThenPartition();
    const b = workers.start(new CountingStore(bucket), TIMINGS);
    await waitFor(clock, () => b.handle.health().latestRestorePoint !== null, { what: 'B' });
    expect(await stop(b.handle)).toMatchObject({ complete: true });
    // Commits after B's stop: only A, taking the lease back, can ship them.
    await engine.commit(2);
    storeA.hang = false;
    expect(await restorableCommits()).toBeLessThan(engine.durableCommits);
    const report = await stop(a.handle);
    expect(report).toMatchObject({ complete: true, unrestorableCommits: 0 });
    expect(report.leaseHeldBy).toBeUndefined();
    expect(await restorableCommits()).toBe(engine.durableCommits);
  });
});
