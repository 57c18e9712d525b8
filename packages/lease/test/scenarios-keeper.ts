/**
 * The lease scenarios of `holdLease keeper`, run once per store by
 * `defineLeaseScenarios`. The `holdLease` keeper: renews on its cadence,
 * retries, and drops the lease with the reason when the bucket refuses.
 */

import { describe, expect, it } from 'vitest';
import { FakeClock } from '../src/clock.ts';
import { FencedError, LeaseLostError } from '../src/errors.ts';
import { holdLease } from '../src/keeper.ts';
import { readLease } from '../src/record.ts';
import { FaultStore } from './fault-store.ts';
import { EventLog, settle, writeRecordByHand } from './helpers.ts';
import { INTERVAL_MS, options, type StoreTarget, TTL_MS } from './scenario-helpers.ts';

export function keeperScenarios(target: StoreTarget): void {
  describe('holdLease keeper', () => {
    it('renews every TTL/3 while writes stay allowed, and await using releases it', async () => {
      const { store, prefix } = await target.open();
      const clock = new FakeClock();
      const events = new EventLog();
      const instance = options(prefix, clock);
      {
        await using keeper = await holdLease(store, { ...instance, onEvent: events.onEvent });
        const firstSent = keeper.lease.record.renewedAt;
        for (let round = 1; round <= 3; round++) {
          const renewed = events.next('renewed');
          clock.advance(INTERVAL_MS);
          const event = await renewed;
          expect(event.record.renewedAt).toBe(firstSent + round * INTERVAL_MS);
          expect(keeper.mayWrite()).toBe(true);
          expect(keeper.signal.aborted).toBe(false);
        }
        expect(keeper.generation).toBe(1);
      }
      expect(events.types()).toEqual(['acquired', 'renewed', 'renewed', 'renewed', 'released']);
      expect((await readLease(store, prefix))?.record.released).toBe(true);
      expect(clock.pendingTimers()).toBe(0);
    });

    it('a transport failure is retried after 1 s, doubling, capped at the interval', async () => {
      const { store, prefix } = await target.open();
      const clock = new FakeClock();
      const flaky = new FaultStore(store);
      const events = new EventLog();
      const keeper = await holdLease(flaky, {
        ...options(prefix, clock),
        onEvent: events.onEvent,
      });
      flaky.faults.failPuts = 5;
      const delays: number[] = [];
      let wait = INTERVAL_MS;
      for (let attempt = 0; attempt < 5; attempt++) {
        const failed = events.next('renewal-failed');
        clock.advance(wait);
        const event = await failed;
        delays.push(event.retryInMs);
        wait = event.retryInMs;
      }
      expect(delays).toEqual([1000, 2000, 4000, 8000, INTERVAL_MS]);
      // 10 + 1 + 2 + 4 + 8 s after the last grant: past the deadline, the fence is down.
      expect(keeper.mayWrite()).toBe(false);
      const oldFence = keeper.signal;
      expect(oldFence.aborted).toBe(true);
      // Nobody took over, so the next renewal succeeds and opens a new fence.
      const renewed = events.next('renewed');
      clock.advance(wait);
      await renewed;
      expect(keeper.mayWrite()).toBe(true);
      expect(keeper.signal.aborted).toBe(false);
      expect(oldFence.aborted).toBe(true);
      await keeper.release();
    });

    it('a renewal that hangs is cut off by its timeout (TTL/6 on the injected clock) and retried', async () => {
      const { store, prefix } = await target.open();
      const clock = new FakeClock();
      const hanging = new FaultStore(store);
      const events = new EventLog();
      const keeper = await holdLease(hanging, {
        ...options(prefix, clock),
        onEvent: events.onEvent,
      });
      hanging.faults.beforePut = (_key, _mode, signal) =>
        new Promise<void>((_resolve, reject) => {
          signal?.addEventListener('abort', () => reject(signal.reason));
        });
      const failed = events.next('renewal-failed');
      clock.advance(INTERVAL_MS);
      await settle();
      clock.advance(TTL_MS / 6);
      const event = await failed;
      expect((event.error as Error).name).toBe('TimeoutError');
      expect(event.retryInMs).toBe(1000);
      hanging.faults.beforePut = undefined;
      const renewed = events.next('renewed');
      clock.advance(1000);
      await renewed;
      expect(keeper.mayWrite()).toBe(true);
      await keeper.release();
    });

    it('a takeover ends the loop: lost event, fence aborted with LeaseLostError, no more renewals', async () => {
      const { store, prefix } = await target.open();
      const clock = new FakeClock();
      const events = new EventLog();
      const counting = new FaultStore(store);
      const keeper = await holdLease(counting, {
        ...options(prefix, clock),
        onEvent: events.onEvent,
      });
      await writeRecordByHand(store, prefix, { renewedAt: clock.wallNow(), generation: 2 });
      const lost = events.next('lost');
      clock.advance(INTERVAL_MS);
      const event = await lost;
      expect(LeaseLostError.isInstance(event.error)).toBe(true);
      expect(LeaseLostError.isInstance(keeper.signal.reason)).toBe(true);
      await keeper.stopped;
      const putsAfterLoss = counting.puts.length;
      clock.advance(10 * TTL_MS);
      await settle();
      expect(counting.puts.length).toBe(putsAfterLoss);
      await keeper[Symbol.asyncDispose]();
      expect((await readLease(store, prefix))?.record.generation).toBe(2);
      expect(events.types()).toEqual(['acquired', 'lost']);
    });

    it('a current term ahead of ours fences the keeper before any renewal request', async () => {
      const { store, prefix } = await target.open();
      const clock = new FakeClock();
      const events = new EventLog();
      const counting = new FaultStore(store);
      let clusterTerm = 1;
      const keeper = await holdLease(counting, {
        ...options(prefix, clock, { term: 1 }),
        currentTerm: () => clusterTerm,
        onEvent: events.onEvent,
      });
      const putsAfterAcquire = counting.puts.length;
      clusterTerm = 2;
      const lost = events.next('lost');
      clock.advance(INTERVAL_MS);
      expect(FencedError.isInstance((await lost).error)).toBe(true);
      expect(counting.puts.length).toBe(putsAfterAcquire);
      expect(keeper.mayWrite()).toBe(false);
    });
  });
}
