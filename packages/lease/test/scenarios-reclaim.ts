/**
 * The lease scenarios of `ownRecord: 'reclaim'`, run once per store by
 * `defineLeaseScenarios`: a record naming our own instance id, left by an
 * earlier run that died holding it, is taken over at once as a new tenure
 * (generation + 1, conditional on the version read), while a record of any
 * other instance id still has to expire first, and a published term still
 * fences.
 */

import { describe, expect, it } from 'vitest';
import { BucketLease } from '../src/bucket-lease.ts';
import { FakeClock } from '../src/clock.ts';
import { FencedError, ForeignActiveError, LeaseLostError } from '../src/errors.ts';
import { readLease } from '../src/record.ts';
import { FaultStore } from './fault-store.ts';
import {
  expectRejection,
  INTERVAL_MS,
  options,
  type StoreTarget,
  TTL_MS,
} from './scenario-helpers.ts';

export function reclaimScenarios(target: StoreTarget): void {
  describe('reclaim of our own record (ownRecord: reclaim)', () => {
    it('a record of a dead earlier run with our id is taken over at once: generation + 1, written conditionally, and the old handle is lost', async () => {
      const { store, prefix } = await target.open();
      const clock = new FakeClock();
      const ours = options(prefix, clock);
      // The earlier run: it took the lease, renewed once, then died (never released).
      const dead = await BucketLease.acquireAs(store, ours);
      clock.advance(INTERVAL_MS);
      await dead.renew();
      const left = await readLease(store, prefix);
      expect(left?.record.generation).toBe(1);

      // Well within the dead run's TTL: a restart with the same id reclaims at once.
      clock.advance(1000);
      const recording = new FaultStore(store);
      const lease = await BucketLease.acquireAs(recording, { ...ours, ownRecord: 'reclaim' });
      expect(lease.generation).toBe(2);
      expect(lease.record.acquiredAt).toBe(clock.wallNow());
      expect(lease.record.acquiredAt).not.toBe(left?.record.acquiredAt);
      expect(lease.mayWrite()).toBe(true);
      // The takeover itself was replace-if-version on the version read.
      expect(recording.puts[0]?.mode).toEqual({ ifMatch: left?.version });
      const stored = await readLease(store, prefix);
      expect(stored?.record.generation).toBe(2);
      expect(stored?.record.instanceId).toBe(ours.instanceId);

      // Had the earlier run been alive after all, its next renewal finds it taken over.
      await expect(dead.renew()).rejects.toSatisfy(LeaseLostError.isInstance);
      expect(dead.signal.aborted).toBe(true);
      await lease.release();
    });

    it('without the option our own record is continued (same generation), as after a lost answer', async () => {
      const { store, prefix } = await target.open();
      const clock = new FakeClock();
      const ours = options(prefix, clock);
      await BucketLease.acquireAs(store, ours);
      clock.advance(1000);
      const lease = await BucketLease.acquireAs(store, ours);
      expect(lease.generation).toBe(1);
      await lease.release();
    });

    it("a live record of another instance id still waits out its TTL, even with ownRecord: 'reclaim'", async () => {
      const { store, prefix } = await target.open();
      const clock = new FakeClock();
      const other = await BucketLease.acquireAs(store, options(prefix, clock));
      const ours = options(prefix, clock, { ownRecord: 'reclaim' });
      clock.advance(TTL_MS - 1);
      const refused = await expectRejection(
        BucketLease.acquireAs(store, ours),
        ForeignActiveError.isInstance,
      );
      expect(refused.holder.instanceId).toBe(other.instanceId);
      expect(refused.mayExpireAt).toBe(other.record.renewedAt + TTL_MS);
      clock.advance(1);
      const lease = await BucketLease.acquireAs(store, ours);
      expect(lease.generation).toBe(2);
      await lease.release();
    });

    it('a term published ahead of ours fences a reclaim like any takeover', async () => {
      const { store, prefix } = await target.open();
      const clock = new FakeClock();
      const ours = options(prefix, clock);
      await BucketLease.acquireAs(store, { ...ours, term: 3 });
      const fenced = await expectRejection(
        BucketLease.acquireAs(store, { ...ours, term: 2, ownRecord: 'reclaim' }),
        FencedError.isInstance,
      );
      expect(fenced.newerTerm).toBe(3);
      // Under the published term, the reclaim is a new tenure that keeps it.
      const lease = await BucketLease.acquireAs(store, { ...ours, term: 3, ownRecord: 'reclaim' });
      expect(lease.generation).toBe(2);
      expect(lease.record.term).toBe(3);
      await lease.release();
    });
  });
}
