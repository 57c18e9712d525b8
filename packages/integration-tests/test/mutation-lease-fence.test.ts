/**
 * The lease's write fence aborts an upload in flight. The operation deadline
 * here is ten TTLs (60 s against a 6 s TTL), so nothing but the fence can
 * stop the upload within a TTL of the lease being lost: without the fence
 * the upload runs until its 60 s deadline.
 */
import type { FakeClock } from '@x/lease';
import { leaseKey } from '@x/lease';
import { latestKey } from '@x/manifest';
import type { ObjectStore } from '@x/store';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { checkBucket } from './helpers/check-bucket.ts';
import { waitFor } from './helpers/drive.ts';
import type { FramedTestEngine } from './helpers/framed-engine.ts';
import { StartedWorkers } from './helpers/started-workers.ts';
import { CountingStore, localStoreCases, untilAborted } from './helpers/stores.ts';

const TTL_S = 6;
/** Far longer than the TTL: only the fence can abort the upload in time. */
const OPERATION_TIMEOUT_MS = 60_000;
const TIMINGS = {
  leaseTtlSeconds: TTL_S,
  walIntervalMs: 1_000,
  operationTimeoutMs: OPERATION_TIMEOUT_MS,
  shutdownGraceMs: 3_000,
};

for (const storeCase of localStoreCases()) {
  describe(`the write fence (${storeCase.name})`, () => {
    let inner: ObjectStore;
    let prefix: string;
    let close: () => Promise<void>;
    let workers: StartedWorkers;
    let engine: FramedTestEngine;
    let clock: FakeClock;

    beforeEach(async () => {
      workers = await StartedWorkers.create('backup-worker-fence-');
      ({ engine, clock } = workers);
      ({ store: inner, prefix, close } = await storeCase.open());
    });
    afterEach(async () => {
      await workers.dispose({ stepMs: 500, maxMs: 120_000 });
      await close();
    });

    it('aborts an upload in flight within a TTL of the lease being lost, with a deadline of ten TTLs, and overwrites nothing of the successor', async () => {
      // A snapshot large enough for several read chunks of the archive.
      await engine.commit(1, { payloadBytes: 3 * 1024 * 1024 });
      await engine.snapshot();
      await engine.commit(1);
      const storeA = new CountingStore(inner);
      let inFlight = false;
      storeA.onUploadChunk = async (key, index, signal) => {
        if (index === 1 && key.includes('/archives/')) {
          inFlight = true;
          // Held here until something aborts the upload.
          await untilAborted(signal);
        }
      };
      const a = workers.start(storeA, { prefix, ...TIMINGS });
      await waitFor(clock, () => inFlight, { what: 'the archive upload to be in flight' });
      // A is partitioned from the bucket mid-upload: its renewals fail; its
      // fence falls two thirds of a TTL after the last renewal.
      storeA.hang = true;
      const abortedAfter = await waitFor(clock, () => storeA.abortedUploads.length > 0, {
        what: 'the upload to be aborted',
        maxMs: 2 * OPERATION_TIMEOUT_MS,
      });
      // The fence, not the deadline: within a TTL of fake time.
      expect(abortedAfter).toBeLessThanOrEqual(TTL_S * 1000);
      expect(abortedAfter).toBeLessThan(OPERATION_TIMEOUT_MS);
      const abortedKey = storeA.abortedUploads[0]!;
      expect(await inner.head(abortedKey)).toBeNull();

      // A successor takes over after the TTL and writes its restore point.
      const storeB = new CountingStore(inner);
      const b = workers.start(storeB, { prefix, ...TIMINGS });
      await waitFor(clock, () => b.handle.health().leaseHeld, { what: 'B to take the lease' });
      await waitFor(clock, () => storeB.writes.includes(`PUT ${latestKey(prefix)}`), {
        what: "B's manifest",
      });
      const successor = await checkBucket(inner, prefix, { content: true });
      const named = new Map<string, string>();
      for (const m of successor.manifests.values())
        for (const e of [...m.files, ...m.segments])
          named.set(e.key, JSON.stringify((await inner.head(e.key))!.version));
      expect(named.size).toBeGreaterThan(0);

      // A's partition heals: it finds its lease lost, writes nothing but its
      // lease probes, and names B.
      const writesBefore = storeA.writes.length;
      storeA.hang = false;
      await waitFor(clock, () => (a.handle.health().reason ?? '').includes(b.worker.instanceId), {
        what: 'A to name B',
      });
      const lateWrites = storeA.writes
        .slice(writesBefore)
        .filter((w) => !w.endsWith(leaseKey(prefix)));
      expect(lateWrites).toEqual([]);
      for (const [key, version] of named)
        expect(JSON.stringify((await inner.head(key))!.version), key).toBe(version);
      const after = await checkBucket(inner, prefix, { content: true });
      expect(after.latest).toBe(successor.latest);
    });
  });
}
