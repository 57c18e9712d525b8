/**
 * The lease: two workers on one prefix (exactly one uploads; the other is
 * unhealthy naming the holder; the holder dies and the other takes over and
 * its first restore point verifies), and a lease lost mid-upload (the upload
 * is aborted; nothing the successor's manifests name is overwritten).
 */
import type { FakeClock } from '@x/lease';
import { leaseKey, readLease } from '@x/lease';
import { latestKey, parseLatestRecord } from '@x/manifest';
import { supersededTenures } from '@x/restore';
import type { ObjectStore } from '@x/store';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { checkBucket } from './helpers/check-bucket.ts';
import { waitFor } from './helpers/drive.ts';
import type { FramedTestEngine } from './helpers/framed-engine.ts';
import { realStoreCases } from './helpers/real-stores.ts';
import { StartedWorkers } from './helpers/started-workers.ts';
import { CountingStore, localStoreCases, untilAborted } from './helpers/stores.ts';

const TTL_S = 6;
const TIMINGS = {
  leaseTtlSeconds: TTL_S,
  walIntervalMs: 1_000,
  operationTimeoutMs: 2_000,
  shutdownGraceMs: 3_000,
};

for (const storeCase of [...localStoreCases(), ...realStoreCases()]) {
  describe(`the bucket lease (${storeCase.name})`, () => {
    let inner: ObjectStore;
    let prefix: string;
    let close: () => Promise<void>;
    let workers: StartedWorkers;
    let engine: FramedTestEngine;
    let clock: FakeClock;

    beforeEach(async () => {
      workers = await StartedWorkers.create('backup-worker-lease-');
      ({ engine, clock } = workers);
      ({ store: inner, prefix, close } = await storeCase.open());
    });
    afterEach(async () => {
      await workers.dispose({ stepMs: 500, maxMs: 60_000 });
      await close();
    });

    it('lets exactly one of two workers upload; the other takes over within a TTL of the holder dying', async () => {
      const storeA = new CountingStore(inner);
      const storeB = new CountingStore(inner);
      const a = workers.start(storeA, { prefix, ...TIMINGS });
      await waitFor(
        clock,
        async () => a.handle.health().leaseHeld && (await inner.get(latestKey(prefix))) !== null,
        {
          what: 'A to back up',
        },
      );
      const b = workers.start(storeB, { prefix, ...TIMINGS });
      await waitFor(clock, () => b.handle.health().reason !== null, { what: 'B to report' });
      const reason = b.handle.health().reason!;
      expect(reason).toContain(`held by another instance (${a.worker.instanceId}`);
      expect(reason).toContain('this instance uploads nothing while it is');
      expect(b.handle.health().healthy).toBe(false);
      expect(b.handle.health().leaseHeld).toBe(false);

      // A keeps shipping; B keeps out for a while (several TTLs).
      for (let i = 0; i < 4; i += 1) {
        await engine.commit(1);
        await waitFor(clock, () => false, { maxMs: TTL_S * 1000 }).catch(() => {});
      }
      expect(storeB.writes.filter((w) => !w.endsWith('/LEASE'))).toEqual([]);
      expect(a.handle.health().healthy).toBe(true);

      // A dies: the bucket stops answering it (a kill as seen from the bucket).
      storeA.hang = true;
      const takeover = await waitFor(clock, () => b.handle.health().leaseHeld, {
        what: 'B to take over',
      });
      // The lease expires a TTL after A's last renewal (before the kill); B
      // looks every third of a TTL and at the moment it may expire.
      // On a real server the fake clock keeps advancing while B's requests
      // are in flight, so B's look at the moment of expiry can land on its
      // next third-of-a-TTL retry instead: one TTL plus one retry interval
      // bounds it there; the local stores answer within the same turn.
      const local = localStoreCases().some((local) => local.name === storeCase.name);
      expect(takeover).toBeLessThanOrEqual(TTL_S * 1000 + (local ? 200 : (TTL_S * 1000) / 3));
      // B's first restore point: LATEST names a manifest of B's generation
      // (LATEST itself is rewritten only when it must name another manifest).
      await waitFor(
        clock,
        async () => {
          if (!storeB.writes.some((w) => w.startsWith(`PUT ${prefix}/manifest/`))) return false;
          const seen = await checkBucket(inner, prefix, { content: false });
          return (seen.manifests.get(seen.latest!)?.walGeneration ?? 0) > 0;
        },
        { what: "B's first restore point" },
      );
      // Its first restore point verifies and holds everything durable.
      const check = await checkBucket(inner, prefix, { content: true });
      expect(check.manifests.get(check.latest!)!.commitSeq).toBe(engine.durableCommits);
      expect(check.manifests.get(check.latest!)!.walGeneration).toBeGreaterThan(0);
      // Stamped with B's lease generation (A's plus one), and so is LATEST;
      // no restore point was written by a superseded tenure.
      const lease = await readLease(inner, prefix);
      expect(lease!.record.generation).toBeGreaterThanOrEqual(2);
      expect(check.manifests.get(check.latest!)!.leaseGeneration).toBe(lease!.record.generation);
      const latest = await inner.get(latestKey(prefix));
      expect(parseLatestRecord(latest!.body, { prefix })).toEqual({
        key: check.latest,
        leaseGeneration: lease!.record.generation,
      });
      expect(
        [...check.manifests.values()].every(
          (manifest) => manifest.formatVersion === 3 && (manifest.leaseGeneration ?? 0) >= 1,
        ),
      ).toBe(true);
      expect(supersededTenures([...check.manifests].map(([key, m]) => ({ key, ...m }))).size).toBe(
        0,
      );
      // Healthy once the step that wrote it has been evaluated.
      await waitFor(clock, () => b.handle.health().healthy, { what: 'B healthy' });
      expect(a.handle.health().healthy).toBe(false);
    });

    it('aborts an upload in flight when the lease is lost, and overwrites nothing of the successor', async () => {
      // A snapshot large enough for several read chunks.
      await engine.commit(1, { payloadBytes: 9 * 1024 * 1024 });
      await engine.snapshot();
      await engine.commit(1);
      const storeA = new CountingStore(inner);
      let reached!: () => void;
      const reachedUpload = new Promise<void>((resolve) => {
        reached = resolve;
      });
      storeA.onUploadChunk = async (key, index, signal) => {
        if (index === 1 && key.includes('/archives/')) {
          reached();
          // Held here until the worker's fence aborts the upload.
          await untilAborted(signal);
        }
      };
      const a = workers.start(storeA, { prefix, ...TIMINGS });
      let upload = false;
      void reachedUpload.then(() => {
        upload = true;
      });
      await waitFor(clock, () => upload, { what: 'the archive upload to be in flight' });
      // A is partitioned from the bucket mid-upload: its renewals fail, its
      // fence fires two thirds of a TTL after the last renewal.
      storeA.hang = true;
      await waitFor(clock, () => storeA.abortedUploads.length > 0, {
        what: 'the upload to be aborted',
      });
      const abortedKey = storeA.abortedUploads[0]!;
      expect(await inner.head(abortedKey)).toBeNull();

      // A successor takes over after the TTL and writes its restore point.
      // B uploads the 9 MiB archive for real while the fake clock runs some
      // twenty times faster than real time (100 ms per five event-loop
      // turns): its operation deadline, and the wait for its manifest, have
      // to cover a slow real upload to a server every suite shares.
      const storeB = new CountingStore(inner);
      const b = workers.start(storeB, { prefix, ...TIMINGS, operationTimeoutMs: 600_000 });
      await waitFor(clock, () => b.handle.health().leaseHeld, { what: 'B to take the lease' });
      await waitFor(clock, () => storeB.writes.includes(`PUT ${latestKey(prefix)}`), {
        what: "B's manifest",
        maxMs: 1_200_000,
      });
      const successor = await checkBucket(inner, prefix, { content: true });
      const named = new Map<string, string>();
      for (const m of successor.manifests.values())
        for (const e of [...m.files, ...m.segments])
          named.set(e.key, JSON.stringify((await inner.head(e.key))!.version));

      // A's partition heals: it finds its lease lost, stays out, names B.
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
      await checkBucket(inner, prefix, { content: true });
    });
  });
}
