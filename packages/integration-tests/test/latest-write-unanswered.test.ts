/**
 * A LATEST write the service applied but whose answer never came (a
 * dropped connection, a timeout, a shutdown that abandoned the step in
 * flight). The worker's record of LATEST's version is then stale, and the
 * next write is refused against the worker's own write: that must not be
 * taken for another writer (the lease dropped, the commits left
 * unrestorable). What LATEST holds proves it: it names the unanswered
 * write's manifest, which is still this tenure's. Anything else stays a
 * conflict.
 */
import type { BackupHandle } from '@x/backup-worker';
import { latestKey, serializeLatest } from '@x/manifest';
import { MemoryStore, StoreError } from '@x/store';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { checkBucket } from './helpers/check-bucket.ts';
import { waitFor } from './helpers/drive.ts';
import { StartedWorkers } from './helpers/started-workers.ts';
import { CountingStore } from './helpers/stores.ts';

const events: string[] = [];
const record = (event: string) => {
  events.push(event);
};
const TIMINGS = {
  logger: { info: record, warn: record, error: record, debug: () => {} },
  prefix: 'p',
  leaseTtlSeconds: 30,
  walIntervalMs: 1_000,
  operationTimeoutMs: 2_000,
};

/** Applies the next PUT of LATEST, then fails it as if its answer was lost; `then` runs right after it landed. */
class LostLatestAnswerStore extends CountingStore {
  loseNext: (() => Promise<void>) | null = null;
  lost = 0;

  override async put(...args: Parameters<CountingStore['put']>) {
    const [key] = args;
    const result = await super.put(...args);
    const then = this.loseNext;
    if (then !== null && key === latestKey('p')) {
      this.loseNext = null;
      this.lost += 1;
      await then();
      throw new StoreError(`PUT ${key}: the connection was dropped before the answer`);
    }
    return result;
  }
}

describe('a LATEST write whose answer was lost', () => {
  let workers: StartedWorkers;
  let bucket: MemoryStore;
  let store: LostLatestAnswerStore;
  let handle: BackupHandle;
  beforeEach(async () => {
    events.length = 0;
    workers = await StartedWorkers.create('latest-unanswered-');
    bucket = new MemoryStore();
    store = new LostLatestAnswerStore(bucket);
    handle = workers.start(store, TIMINGS).handle;
    await waitFor(workers.clock, () => handle.health().latestRestorePoint !== null, {
      what: 'the first restore point',
    });
  });
  afterEach(async () => {
    await workers.dispose({ stepMs: 500, maxMs: 60_000 });
  });

  const restorable = async (): Promise<number> => {
    const check = await checkBucket(bucket, 'p', { content: true });
    return check.manifests.get(check.latest!)!.commitSeq;
  };

  it('is settled by what LATEST holds: the next restore point is written, the lease kept', async () => {
    const { clock, engine } = workers;
    store.loseNext = async () => {};
    await engine.commit(2);
    await waitFor(clock, () => store.lost === 1, { what: 'the lost answer' });
    await engine.commit(3);
    await waitFor(
      clock,
      () => handle.health().latestRestorePoint?.commitSeq === engine.durableCommits,
      { what: 'a restore point of every commit' },
    );
    // No conflict, so no new generation (a needless snapshot) either.
    expect(events).toContain('backup.latest_write_settled');
    expect(events).not.toContain('backup.write_refused');
    expect(handle.health().leaseHeld).toBe(true);
    expect(await restorable()).toBe(engine.durableCommits);
    const check = await checkBucket(bucket, 'p');
    expect(check.manifests.get(check.latest!)!.walGeneration).toBe(0);
    const report = await handle.shutdown();
    expect(report).toMatchObject({ complete: true, unrestorableCommits: 0 });
  });

  it('at a shutdown that abandoned it: the stop writes its restore point, complete', async () => {
    const { clock, engine } = workers;
    let report: Awaited<ReturnType<BackupHandle['shutdown']>> | undefined;
    // The stop comes while the write is in flight, with commits after it.
    store.loseNext = async () => {
      await engine.commit(2);
      void handle.shutdown().then((r) => {
        report = r;
      });
    };
    await engine.commit(2);
    await waitFor(clock, () => report !== undefined, { what: 'the shutdown' });
    expect(report).toMatchObject({ complete: true, unrestorableCommits: 0 });
    expect(events).not.toContain('backup.write_refused');
    expect(await restorable()).toBe(engine.durableCommits);
  });

  it('is still a conflict when another writer moved LATEST meanwhile', async () => {
    const { clock, engine } = workers;
    // Right after the lost write landed, another writer points LATEST at
    // the restore point before it.
    const before = (await checkBucket(bucket, 'p')).latest!;
    store.loseNext = async () => {
      await bucket.put(latestKey('p'), new TextEncoder().encode(serializeLatest(before)), {
        mode: 'overwrite',
      });
    };
    await engine.commit(2);
    await waitFor(clock, () => store.lost === 1, { what: 'the lost answer' });
    await engine.commit(3);
    await waitFor(clock, () => events.includes('backup.write_refused'), { what: 'the conflict' });
    expect(events).not.toContain('backup.latest_write_settled');
    expect((await checkBucket(bucket, 'p')).latest).toBe(before);
  });
});
