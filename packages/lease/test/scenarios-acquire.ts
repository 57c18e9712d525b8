/**
 * The lease scenarios of `acquire`, run once per store by
 * `defineLeaseScenarios`. How an instance takes the lease: create, continue
 * its own record after a lost answer, take over an expired or released one,
 * refuse a live foreign one or a higher term.
 */

import { describe, expect, it } from 'vitest';
import { BucketLease, releaseOwnRecord } from '../src/bucket-lease.ts';
import { FakeClock } from '../src/clock.ts';
import { FencedError, ForeignActiveError, LeaseRecordError } from '../src/errors.ts';
import { leaseKey, readLease } from '../src/record.ts';
import { FaultStore } from './fault-store.ts';
import {
  expectRejection,
  INTERVAL_MS,
  options,
  raceContenders,
  type StoreTarget,
  TTL_MS,
} from './scenario-helpers.ts';

export function acquireScenarios(target: StoreTarget): void {
  describe('acquire', () => {
    it('16 contenders that start together: exactly one holds the lease, the rest get ForeignActiveError', async () => {
      const { store, prefix } = await target.open();
      const { winners, losers } = await raceContenders(store, prefix, 16);
      expect(winners).toHaveLength(1);
      expect(losers).toHaveLength(15);
      const winner = winners[0]!;
      for (const loser of losers) {
        expect(ForeignActiveError.isInstance(loser)).toBe(true);
        expect((loser as ForeignActiveError).holder.instanceId).toBe(winner.instanceId);
      }
      const stored = await readLease(store, prefix);
      expect(stored?.record.instanceId).toBe(winner.instanceId);
      expect(stored?.record.generation).toBe(1);
      await winner.release();
    });

    it('read-then-refused race: the write refused after our read re-reads and names the winner', async () => {
      const { store, prefix } = await target.open();
      const clock = new FakeClock();
      const other = options(prefix, clock);
      let otherLease: BucketLease | undefined;
      const racing = new FaultStore(store, {
        // Between our read (no record) and our create, another instance takes the lease.
        beforePut: async () => {
          if (!otherLease) otherLease = await BucketLease.acquireAs(store, other);
        },
      });
      const error = await expectRejection(
        BucketLease.acquireAs(racing, options(prefix, clock)),
        ForeignActiveError.isInstance,
      );
      expect(racing.puts[0]?.mode).toBe('create');
      expect(error.holder.instanceId).toBe(other.instanceId);
      expect(error.mayExpireAt).toBe(error.holder.renewedAt + TTL_MS);
      expect((await readLease(store, prefix))?.record.instanceId).toBe(other.instanceId);
      await otherLease?.release();
    });

    it('takeover of an expired lease bumps the generation, renewal does not, and release/re-acquire never lowers it', async () => {
      const { store, prefix } = await target.open();
      const clock = new FakeClock();
      const first = options(prefix, clock);
      const second = options(prefix, clock);
      const a = await BucketLease.acquireAs(store, first);
      expect(a.generation).toBe(1);
      expect(a.exclusion).toBe('conditional');
      clock.advance(INTERVAL_MS);
      await a.renew();
      expect(a.generation).toBe(1);
      expect((await readLease(store, prefix))?.record.generation).toBe(1);

      // Not expired yet by one millisecond: refused.
      clock.advance(TTL_MS - 1);
      await expectRejection(BucketLease.acquireAs(store, second), ForeignActiveError.isInstance);
      clock.advance(1);
      const b = await BucketLease.acquireAs(store, second);
      expect(b.generation).toBe(2);

      await b.release();
      const released = await readLease(store, prefix);
      expect(released?.record.released).toBe(true);
      expect(released?.record.generation).toBe(2);

      // Right after a release the prefix is free, and the generation continues.
      const again = await BucketLease.acquireAs(store, first);
      expect(again.generation).toBe(3);
      await again.release();
      const third = await BucketLease.acquireAs(store, second);
      expect(third.generation).toBe(4);
      await third.release();
    });

    it('a record naming our own instance id is continued (lost answer), a foreign one is not mistaken for ours', async () => {
      const { store, prefix } = await target.open();
      const clock = new FakeClock();
      const ours = options(prefix, clock);
      const lossy = new FaultStore(store, { lostResponses: 1 });
      // The create lands but its answer is lost: the attempt fails with a timeout.
      await expect(BucketLease.acquireAs(lossy, ours)).rejects.toMatchObject({
        name: 'TimeoutError',
      });
      const left = await readLease(store, prefix);
      expect(left?.record.instanceId).toBe(ours.instanceId);

      // Someone else sees a live foreign lease.
      const foreign = await expectRejection(
        BucketLease.acquireAs(store, options(prefix, clock)),
        ForeignActiveError.isInstance,
      );
      expect(foreign.holder.instanceId).toBe(ours.instanceId);

      // The next attempt with our id recognises the record and continues it at once.
      clock.advance(1000);
      const lease = await BucketLease.acquireAs(store, ours);
      expect(lease.generation).toBe(left?.record.generation);
      expect(lease.record.acquiredAt).toBe(left?.record.acquiredAt);
      expect(lease.mayWrite()).toBe(true);
      await lease.release();
    });

    it('releaseOwnRecord clears a record left by a failed acquire, and leaves foreign ones alone', async () => {
      const { store, prefix } = await target.open();
      const clock = new FakeClock();
      const ours = options(prefix, clock);
      const lossy = new FaultStore(store, { lostResponses: 1 });
      await expect(BucketLease.acquireAs(lossy, ours)).rejects.toMatchObject({
        name: 'TimeoutError',
      });
      expect(await releaseOwnRecord(store, prefix, 'someone-else')).toBe(false);
      expect((await readLease(store, prefix))?.record.released).toBeUndefined();
      expect(await releaseOwnRecord(store, prefix, ours.instanceId)).toBe(true);
      const after = await readLease(store, prefix);
      expect(after?.record.released).toBe(true);
      expect(after?.record.generation).toBe(1);
      expect(await releaseOwnRecord(store, prefix, ours.instanceId)).toBe(false);
      // The next holder continues the generation.
      const next = await BucketLease.acquireAs(store, options(prefix, clock));
      expect(next.generation).toBe(2);
      await next.release();
    });

    it('an invalid record is suspect, never absent: acquire refuses with LeaseRecordError and leaves it', async () => {
      const { store, prefix } = await target.open();
      const key = leaseKey(prefix);
      await store.put(key, new TextEncoder().encode('{"instanceId":"x","renewedAt":"soon"}'));
      const error = await expectRejection(
        BucketLease.acquireAs(store, options(prefix, new FakeClock())),
        LeaseRecordError.isInstance,
      );
      expect(error.problem).toMatch(/acquiredAt|renewedAt/);
      expect(new TextDecoder().decode((await store.get(key))?.body)).toContain('"soon"');
    });

    it('term fencing: a published term ahead of ours refuses acquire even when expired; a newer term takes over', async () => {
      const { store, prefix } = await target.open();
      const clock = new FakeClock();
      const old = await BucketLease.acquireAs(store, options(prefix, clock, { term: 7 }));
      await old.release();
      clock.advance(10 * TTL_MS);
      const fenced = await expectRejection(
        BucketLease.acquireAs(store, options(prefix, clock, { term: 6 })),
        FencedError.isInstance,
      );
      expect(fenced.newerTerm).toBe(7);
      await expectRejection(
        BucketLease.acquireAs(store, options(prefix, clock)),
        FencedError.isInstance,
      );
      const newer = await BucketLease.acquireAs(store, options(prefix, clock, { term: 8 }));
      expect(newer.record.term).toBe(8);
      expect(newer.generation).toBe(2);
      await newer.release();
    });
  });
}
