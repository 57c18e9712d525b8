/**
 * The lease scenarios of `self-fencing`, run once per store by
 * `defineLeaseScenarios`. The holder's own fence: it may write only until
 * two thirds of a TTL after its last renewal was sent, by both clocks.
 */

import { describe, expect, it } from 'vitest';
import { BucketLease } from '../src/bucket-lease.ts';
import { FakeClock } from '../src/clock.ts';
import { ForeignActiveError, LeaseLostError, WriteDeadlineError } from '../src/errors.ts';
import { holdLease } from '../src/keeper.ts';
import { readLease } from '../src/record.ts';
import { FaultStore } from './fault-store.ts';
import { EventLog, settle } from './helpers.ts';
import {
  expectRejection,
  INTERVAL_MS,
  options,
  runSkewedTakeover,
  type StoreTarget,
  TTL_MS,
  TWO_THIRDS_MS,
} from './scenario-helpers.ts';

export function selfFencingScenarios(target: StoreTarget): void {
  describe('self-fencing', () => {
    it('paused holder: when it wakes, its fence has aborted, and its deadline fell a third of a TTL before the takeover', async () => {
      const { store, prefix } = await target.open();
      const holderClock = new FakeClock();
      const successorClock = new FakeClock();
      const holder = await BucketLease.acquireAs(store, options(prefix, holderClock));
      const fence = holder.signal;
      // The holder is frozen: its clocks do not run its code; the successor's time moves on.
      successorClock.advance(TTL_MS - 1);
      const successorOptions = options(prefix, successorClock);
      await expectRejection(
        BucketLease.acquireAs(store, successorOptions),
        ForeignActiveError.isInstance,
      );
      successorClock.advance(1);
      const successor = await BucketLease.acquireAs(store, successorOptions);
      expect(successor.generation).toBe(2);
      // The holder wakes: time has passed for it too.
      holderClock.advance(TTL_MS);
      expect(fence.aborted).toBe(true);
      expect(holder.mayWrite()).toBe(false);
      expect(WriteDeadlineError.isInstance(fence.reason)).toBe(true);
      expect(holder.writeDeadline().wallMs).toBeLessThanOrEqual(
        successor.record.acquiredAt - TTL_MS / 3,
      );
      await expectRejection(holder.renew(), LeaseLostError.isInstance);
      await successor.release();
    });

    it('partitioned holder: the fence aborts a third of a TTL before the first moment a contender can take over', async () => {
      const { store, prefix } = await target.open();
      const clock = new FakeClock();
      const partitioned = new FaultStore(store);
      const events = new EventLog();
      const keeper = await holdLease(partitioned, {
        ...options(prefix, clock),
        onEvent: events.onEvent,
      });
      partitioned.faults.failPuts = 1_000;
      let abortedAt: number | undefined;
      keeper.signal.addEventListener('abort', () => {
        abortedAt = clock.monotonicNow();
      });
      const start = clock.monotonicNow();
      const contender = options(prefix, clock);
      let takenAt: number | undefined;
      let successor: BucketLease | undefined;
      for (let second = 1; second <= 40 && !successor; second++) {
        clock.advance(1000);
        await settle();
        try {
          successor = await BucketLease.acquireAs(store, contender);
          takenAt = clock.monotonicNow();
          // At the moment of takeover the old holder is fenced.
          expect(keeper.mayWrite()).toBe(false);
        } catch (error) {
          if (!ForeignActiveError.isInstance(error)) throw error;
        }
      }
      expect(abortedAt).toBe(start + TWO_THIRDS_MS);
      expect(takenAt).toBe(start + TTL_MS);
      expect(events.types()).toContain('renewal-failed');
      await keeper[Symbol.asyncDispose]();
      await successor?.release();
    });

    it('the deadline is anchored at the send time of the renewal, not its answer', async () => {
      const { store, prefix } = await target.open();
      const clock = new FakeClock();
      const slow = new FaultStore(store);
      const lease = await BucketLease.acquireAs(slow, options(prefix, clock));
      clock.advance(INTERVAL_MS);
      const sentMono = clock.monotonicNow();
      const sentWall = clock.wallNow();
      slow.faults.beforePut = () => clock.advance(5000); // the answer takes 5 s
      await lease.renew();
      slow.faults.beforePut = undefined;
      expect(lease.writeDeadline()).toEqual({
        monotonicMs: sentMono + TWO_THIRDS_MS,
        wallMs: sentWall + TWO_THIRDS_MS,
      });
      expect((await readLease(store, prefix))?.record.renewedAt).toBe(sentWall);
      clock.advance(TWO_THIRDS_MS - 5000 - 1);
      expect(lease.mayWrite()).toBe(true);
      clock.advance(1);
      expect(lease.mayWrite()).toBe(false);
      expect(lease.signal.aborted).toBe(true);
      await lease.release();
    });

    it('a wall clock that jumps forward ends the right to write; one that jumps back does not extend it', async () => {
      const { store, prefix } = await target.open();
      const clock = new FakeClock();
      const forward = await BucketLease.acquireAs(store, options(prefix, clock));
      const fence = forward.signal;
      clock.jumpWall(TWO_THIRDS_MS);
      expect(forward.mayWrite()).toBe(false);
      expect(fence.aborted).toBe(true);
      await forward.release();

      const backClock = new FakeClock();
      const { store: store2, prefix: prefix2 } = await target.open();
      const back = await BucketLease.acquireAs(store2, options(prefix2, backClock));
      const deadline = back.writeDeadline().monotonicMs;
      backClock.jumpWall(-60 * 60 * 1000);
      backClock.advance(deadline - backClock.monotonicNow() - 1);
      expect(back.mayWrite()).toBe(true);
      backClock.advance(1);
      expect(back.mayWrite()).toBe(false);
      expect(back.signal.aborted).toBe(true);
      await back.release();
    });

    for (const skewMs of [10_000, -10_000]) {
      it(`clock skew ${skewMs > 0 ? '+' : ''}${skewMs / 1000} s at TTL 30 s: no moment where both may write`, async () => {
        const { store, prefix } = await target.open();
        const { successor, overlapSteps, holder } = await runSkewedTakeover(store, prefix, skewMs);
        expect(successor, 'the contender took over eventually').toBeDefined();
        expect(overlapSteps).toEqual([]);
        expect(holder.mayWrite()).toBe(false);
        await successor?.release();
      });
    }

    it('after the deadline passed, a renewal that succeeds opens a new fence signal; the old one stays aborted', async () => {
      const { store, prefix } = await target.open();
      const clock = new FakeClock();
      const lease = await BucketLease.acquireAs(store, options(prefix, clock));
      const first = lease.signal;
      clock.advance(TWO_THIRDS_MS);
      expect(first.aborted).toBe(true);
      expect(lease.mayWrite()).toBe(false);
      // Nobody took over (a full TTL has not passed), so the conditional renewal succeeds.
      await lease.renew();
      expect(lease.mayWrite()).toBe(true);
      const second = lease.signal;
      expect(second).not.toBe(first);
      expect(second.aborted).toBe(false);
      expect(first.aborted).toBe(true);
      await lease.release();
      expect(second.aborted).toBe(true);
    });
  });
}
