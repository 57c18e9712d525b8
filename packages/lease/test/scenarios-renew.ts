/**
 * The lease scenarios of `renew`, run once per store by
 * `defineLeaseScenarios`. Renewal: a holder keeps the lease by replace-if-
 * version and learns at its next renewal when it was taken over.
 */

import { describe, expect, it } from 'vitest';
import { BucketLease } from '../src/bucket-lease.ts';
import { FakeClock } from '../src/clock.ts';
import { FencedError, LeaseLostError } from '../src/errors.ts';
import { readLease } from '../src/record.ts';
import { FaultStore } from './fault-store.ts';
import {
  expectRejection,
  INTERVAL_MS,
  options,
  type StoreTarget,
  TTL_MS,
} from './scenario-helpers.ts';

export function renewScenarios(target: StoreTarget): void {
  describe('renew', () => {
    it('renew after a takeover: LeaseLostError naming the new holder, never retried into success', async () => {
      const { store, prefix } = await target.open();
      const clock = new FakeClock();
      const a = await BucketLease.acquireAs(store, options(prefix, clock));
      const fenceBefore = a.signal;
      clock.advance(TTL_MS);
      const successor = options(prefix, clock);
      const b = await BucketLease.acquireAs(store, successor);
      const lost = await expectRejection(a.renew(), LeaseLostError.isInstance);
      expect(lost.holder?.instanceId).toBe(successor.instanceId);
      expect(a.isLost()).toBe(true);
      expect(a.mayWrite()).toBe(false);
      expect(fenceBefore.aborted).toBe(true);
      expect(a.signal.aborted).toBe(true);
      // Even once B is gone and the record is free, A's lease stays lost.
      await b.release();
      await expectRejection(a.renew(), LeaseLostError.isInstance);
      expect(a.mayWrite()).toBe(false);
      expect((await readLease(store, prefix))?.record.instanceId).toBe(successor.instanceId);
    });

    it('a renewal whose answer was lost but which landed is adopted by the next renewal', async () => {
      const { store, prefix } = await target.open();
      const clock = new FakeClock();
      const lossy = new FaultStore(store);
      const lease = await BucketLease.acquireAs(lossy, options(prefix, clock));
      clock.advance(INTERVAL_MS);
      lossy.faults.lostResponses = 1;
      const landedAt = clock.monotonicNow();
      await expect(lease.renew()).rejects.toMatchObject({ name: 'TimeoutError' });
      clock.advance(1000);
      await lease.renew();
      expect(lease.isLost()).toBe(false);
      expect(lease.mayWrite()).toBe(true);
      // The grant is the landed write's, anchored at its own send time.
      expect(lease.lastWriteSentAt().monotonicMs).toBe(landedAt);
      clock.advance(INTERVAL_MS);
      await lease.renew();
      expect(lease.lastWriteSentAt().monotonicMs).toBe(clock.monotonicNow());
      await lease.release();
    });

    it('renewal under a current term ahead of ours is refused before any request', async () => {
      const { store, prefix } = await target.open();
      const clock = new FakeClock();
      const counting = new FaultStore(store);
      const lease = await BucketLease.acquireAs(counting, options(prefix, clock, { term: 3 }));
      const putsBefore = counting.puts.length;
      await lease.renew({ currentTerm: 3 });
      expect(counting.puts.length).toBe(putsBefore + 1);
      const fenced = await expectRejection(lease.renew({ currentTerm: 4 }), FencedError.isInstance);
      expect(fenced.newerTerm).toBe(4);
      expect(counting.puts.length).toBe(putsBefore + 1);
      expect(lease.isLost()).toBe(true);
      expect(lease.signal.aborted).toBe(true);
    });
  });
}
