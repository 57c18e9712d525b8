/**
 * A renewal that hangs is retried before writes stop. Writes stop two thirds
 * of a TTL after the last renewal was sent, and renewals go out every third
 * of a TTL, so one renewal may take at most a third of a TTL. With the
 * operation deadline (30 s by default) on each renewal, one that never
 * answered was never retried before the fence fell (20 s at the default 30 s
 * TTL); each now gets a sixth of a TTL and is retried after it.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BackupWorker } from '@x/backup-worker';
import { FakeClock, leaseKey } from '@x/lease';
import { FramedDirSource } from '@x/source-framed';
import { type CallOptions, MemoryStore, type ObjectVersion, type PutOptions } from '@x/store';
import { describe, expect, it } from 'vitest';
import { waitFor } from './helpers/drive.ts';
import { FramedTestEngine } from './helpers/framed-engine.ts';
import { untilAborted } from './helpers/stores.ts';

/** A memory store whose PUT of the lease never answers (until aborted) while `hangLease` is set. */
class HangingLeaseStore extends MemoryStore {
  hangLease = false;
  hungRenewals = 0;
  override async put(
    key: string,
    body: Uint8Array,
    options?: PutOptions & CallOptions,
  ): Promise<{ version: ObjectVersion }> {
    if (this.hangLease && key === leaseKey('p')) {
      this.hangLease = false;
      this.hungRenewals += 1;
      await untilAborted(options?.signal);
      throw options?.signal?.reason ?? new Error('aborted');
    }
    return super.put(key, body, options);
  }
}

describe('a lease renewal that never answers', () => {
  it('is given up and retried before writes stop, and the worker keeps its right to write', async () => {
    const directory = await mkdtemp(join(tmpdir(), 'backup-worker-renewal-'));
    const clock = new FakeClock();
    const engine = await FramedTestEngine.create(directory);
    await engine.commit(2);
    const store = new HangingLeaseStore();
    // The defaults that matter: a 30 s TTL and the 30 s operation deadline.
    const worker = new BackupWorker({
      store,
      prefix: 'p',
      source: new FramedDirSource({ directory, engine }),
      clock,
      walIntervalMs: 1_000,
      manifestIntervalMs: 0,
    });
    const handle = worker.start();
    try {
      await waitFor(clock, () => handle.health().latestRestorePoint !== null, {
        what: 'the first restore point',
      });
      store.hangLease = true;
      // Past the point where writes stop for a renewal not answered since
      // the one before the hung one (two thirds of the TTL), with a commit
      // to ship at the end.
      await waitFor(clock, () => store.hungRenewals === 1, { what: 'the hung renewal' });
      await waitFor(clock, () => false, { maxMs: 22_000 }).catch(() => undefined);
      await engine.commit(1);
      await waitFor(clock, () => handle.health().latestRestorePoint?.commitSeq === 3, {
        maxMs: 5_000,
        what: 'the commit made after the hung renewal, in a restore point',
      });
      expect(handle.health().leaseHeld).toBe(true);
      expect(handle.health().healthy, handle.health().reason ?? '').toBe(true);
    } finally {
      let stopped = false;
      void handle.shutdown().then(() => {
        stopped = true;
      });
      await waitFor(clock, () => stopped, { stepMs: 500, maxMs: 60_000, what: 'shutdown' });
      await rm(directory, { recursive: true, force: true });
    }
  });
});
