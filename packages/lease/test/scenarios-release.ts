/**
 * The lease scenarios of `release`, run once per store by
 * `defineLeaseScenarios`. Release: a released record is written (never
 * deleted), so the generation continues; releaseOwnRecord cleans up after a
 * failed acquire.
 */

import { describe, expect, it } from 'vitest';
import { BucketLease } from '../src/bucket-lease.ts';
import { FakeClock } from '../src/clock.ts';
import { LeaseLostError } from '../src/errors.ts';
import { leaseKey, readLease } from '../src/record.ts';
import { FaultStore } from './fault-store.ts';
import { settle } from './helpers.ts';
import {
  expectRejection,
  INTERVAL_MS,
  options,
  type StoreTarget,
  TTL_MS,
} from './scenario-helpers.ts';

export function releaseScenarios(target: StoreTarget): void {
  describe('release', () => {
    it('release with a stale version (taken over) leaves the new holder alone', async () => {
      const { store, prefix } = await target.open();
      const clock = new FakeClock();
      const a = await BucketLease.acquireAs(store, options(prefix, clock));
      clock.advance(TTL_MS);
      const b = await BucketLease.acquireAs(store, options(prefix, clock));
      const before = await readLease(store, prefix);
      await a.release();
      const after = await readLease(store, prefix);
      expect(after?.record).toEqual(before?.record);
      expect(a.isLost()).toBe(true);
      expect(b.mayWrite()).toBe(true);
      await b.release();
    });

    it('release of an already-deleted record does not recreate it', async () => {
      const { store, prefix } = await target.open();
      const lease = await BucketLease.acquireAs(store, options(prefix, new FakeClock()));
      await store.delete(leaseKey(prefix));
      await lease.release();
      expect(await readLease(store, prefix)).toBeNull();
      expect(lease.mayWrite()).toBe(false);
    });

    it('release racing a renewal: the renewal finishes first, then the record is released', async () => {
      const { store, prefix } = await target.open();
      const clock = new FakeClock();
      let openGate: () => void = () => {};
      const gate = new Promise<void>((resolve) => {
        openGate = resolve;
      });
      const gated = new FaultStore(store);
      const lease = await BucketLease.acquireAs(gated, options(prefix, clock));
      clock.advance(INTERVAL_MS);
      let reached: () => void = () => {};
      const renewalSent = new Promise<void>((resolve) => {
        reached = resolve;
      });
      gated.faults.beforePut = () => {
        reached();
        return gate;
      };
      const renewal = lease.renew();
      await renewalSent; // the renewal's request is in flight
      gated.faults.beforePut = undefined;
      const release = lease.release();
      expect(lease.mayWrite()).toBe(false); // writing stops when release is asked for
      await settle();
      openGate();
      await renewal;
      await release;
      const record = (await readLease(store, prefix))?.record;
      expect(record?.released).toBe(true);
      expect(record?.instanceId).toBe(lease.instanceId);
      expect(record?.generation).toBe(1);
      await expectRejection(lease.renew(), LeaseLostError.isInstance);
    });
  });
}
