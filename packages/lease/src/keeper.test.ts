/**
 * The keeper's own features, on a MemoryStore and a fake clock: steady
 * retries, the per-renewal timeout, renewal timing, `writesStopped`, and
 * `drop(reason)`.
 */
import { MemoryStore } from '@x/store';
import { describe, expect, it } from 'vitest';
import { FaultStore } from '../test/fault-store.ts';
import { EventLog, settle } from '../test/helpers.ts';
import { FakeClock } from './clock.ts';
import { LeaseOptionsError } from './errors.ts';
import { holdLease, RENEW_RETRY_MS } from './keeper.ts';
import { readLease } from './record.ts';

const TTL_S = 30;
const INTERVAL_MS = (TTL_S * 1000) / 3;
const silent = { info() {}, warn() {} };

async function keep(options: { renewRetry?: 'doubling' | 'steady'; renewTimeoutMs?: number } = {}) {
  const clock = new FakeClock();
  const inner = new MemoryStore();
  const store = new FaultStore(inner);
  const events = new EventLog();
  const keeper = await holdLease(store, {
    prefix: 'p',
    instanceId: 'a',
    ttlSeconds: TTL_S,
    clock,
    logger: silent,
    onEvent: events.onEvent,
    ...options,
  });
  return { clock, inner, store, events, keeper };
}

describe('LeaseKeeper', () => {
  it("retries every RENEW_RETRY_MS with renewRetry: 'steady', and says when writes stopped", async () => {
    const { clock, store, events, keeper } = await keep({ renewRetry: 'steady' });
    store.faults.failPuts = 12;
    const seen: { retryInMs: number; writesStopped: boolean }[] = [];
    let wait = INTERVAL_MS;
    for (let attempt = 0; attempt < 12; attempt++) {
      const failed = events.next('renewal-failed');
      clock.advance(wait);
      const event = await failed;
      seen.push({ retryInMs: event.retryInMs, writesStopped: event.writesStopped });
      wait = event.retryInMs;
    }
    expect(seen.map((s) => s.retryInMs)).toEqual(Array(12).fill(RENEW_RETRY_MS));
    // Failures at 10 s … 21 s after the grant: writes stop at 20 s (two thirds of the TTL).
    expect(seen.map((s) => s.writesStopped)).toEqual([...Array(10).fill(false), true, true]);
    const renewed = events.next('renewed');
    clock.advance(wait);
    await renewed;
    expect(keeper.mayWrite()).toBe(true);
    await keeper.release();
  });

  it('keeps doubling by default', async () => {
    const { clock, store, events, keeper } = await keep();
    store.faults.failPuts = 3;
    const delays: number[] = [];
    let wait = INTERVAL_MS;
    for (let attempt = 0; attempt < 3; attempt++) {
      const failed = events.next('renewal-failed');
      clock.advance(wait);
      wait = (await failed).retryInMs;
      delays.push(wait);
    }
    expect(delays).toEqual([1000, 2000, 4000]);
    await keeper.release();
  });

  it('gives a renewal renewTimeoutMs, then retries it', async () => {
    const { clock, store, events, keeper } = await keep({
      renewRetry: 'steady',
      renewTimeoutMs: 2_000,
    });
    let hung = 0;
    store.faults.beforePut = (_key, _mode, signal) => {
      if (hung > 0) return;
      hung += 1;
      return new Promise<void>((_resolve, reject) => {
        signal?.addEventListener('abort', () => reject(signal.reason));
      });
    };
    const failed = events.next('renewal-failed');
    clock.advance(INTERVAL_MS);
    await settle();
    clock.advance(1_999);
    await settle();
    expect(events.types()).toEqual(['acquired']);
    clock.advance(1);
    const event = await failed;
    expect((event.error as Error).message).toBe('lease renewal timed out after 2000 ms');
    const renewed = events.next('renewed');
    clock.advance(RENEW_RETRY_MS);
    await renewed;
    await keeper.release();
  });

  it('reports how long a renewal took', async () => {
    const { clock, store, events, keeper } = await keep();
    store.faults.beforePut = () =>
      new Promise<void>((resolve) => {
        clock.setTimer(700, resolve);
      });
    const renewed = events.next('renewed');
    clock.advance(INTERVAL_MS);
    await settle();
    clock.advance(700);
    expect((await renewed).tookMs).toBe(700);
    store.faults.beforePut = undefined;
    await keeper.release();
  });

  it('rejects a renewRetry it does not know, before any request', async () => {
    const store = new FaultStore(new MemoryStore());
    await expect(
      holdLease(store, {
        prefix: 'p',
        instanceId: 'a',
        clock: new FakeClock(),
        logger: silent,
        renewRetry: 'sometimes' as 'steady',
      }),
    ).rejects.toSatisfy(LeaseOptionsError.isInstance);
    expect(store.puts).toEqual([]);
  });

  describe('drop(reason)', () => {
    it('aborts the fence with the reason, stops renewing, and leaves the record alone', async () => {
      const { clock, inner, store, events, keeper } = await keep();
      const fence = keeper.signal;
      const reason = new Error('another writer is using this prefix');
      keeper.drop(reason);
      expect(fence.aborted).toBe(true);
      expect(fence.reason).toBe(reason);
      expect(keeper.signal.reason).toBe(reason);
      expect(keeper.mayWrite()).toBe(false);
      expect(keeper.isDropped()).toBe(true);
      expect(keeper.isLost()).toBe(false);
      await keeper.stopped;
      const puts = store.puts.length;
      clock.advance(3 * INTERVAL_MS);
      await settle();
      expect(store.puts.length).toBe(puts);
      await keeper.release();
      expect(store.puts.length).toBe(puts);
      const record = (await readLease(inner, 'p'))?.record;
      expect(record?.instanceId).toBe('a');
      expect(record?.released).toBeUndefined();
      expect(events.types()).toEqual(['acquired', 'dropped']);
      expect(clock.pendingTimers()).toBe(0);
    });

    it('a renewal in flight when dropped finishes unreported', async () => {
      const { clock, store, events, keeper } = await keep();
      let answer: () => void = () => {};
      store.faults.beforePut = () =>
        new Promise<void>((resolve) => {
          answer = resolve;
        });
      const putsBefore = store.puts.length;
      clock.advance(INTERVAL_MS);
      await settle();
      keeper.drop(new Error('refused'));
      answer();
      await settle();
      expect(events.types()).toEqual(['acquired', 'dropped']);
      expect(keeper.mayWrite()).toBe(false);
      clock.advance(3 * INTERVAL_MS);
      await settle();
      expect(store.puts.length).toBe(putsBefore + 1);
    });
  });

  it('release waits for a renewal in flight, then writes the released record', async () => {
    const { clock, inner, store, events, keeper } = await keep();
    let answer: () => void = () => {};
    store.faults.beforePut = () =>
      new Promise<void>((resolve) => {
        answer = resolve;
        store.faults.beforePut = undefined;
      });
    clock.advance(INTERVAL_MS);
    await settle();
    let released = false;
    const release = keeper.release().then(() => {
      released = true;
    });
    await settle();
    expect(released).toBe(false);
    answer();
    await release;
    expect((await readLease(inner, 'p'))?.record.released).toBe(true);
    expect(events.types()).toEqual(['acquired', 'released']);
  });
});
