/**
 * `waitForLease` and `LeaseKeeper.whenWritable`, on a MemoryStore and a fake
 * clock: waiting out a holder (released, or dead for a full TTL), the
 * deadline, and a worker loop that pauses while renewals are late.
 */
import { MemoryStore } from '@x/store';
import { describe, expect, it } from 'vitest';
import { FaultStore } from '../test/fault-store.ts';
import { settle } from '../test/helpers.ts';
import { FakeClock } from './clock.ts';
import {
  LeaseError,
  LeaseLostError,
  LeaseOptionsError,
  LeaseWaitTimeoutError,
  WriteDeadlineError,
} from './errors.ts';
import { holdLease } from './keeper.ts';
import { readLease } from './record.ts';
import { waitForLease } from './wait.ts';

const silent = { info() {}, warn() {} };

/** Advances the fake clock in steps, letting the waiter's store calls run between them. */
async function advanceInSteps(clock: FakeClock, totalMs: number, stepMs: number): Promise<void> {
  for (let moved = 0; moved < totalMs; moved += stepMs) {
    clock.advance(Math.min(stepMs, totalMs - moved));
    await settle();
  }
}

describe('waitForLease', () => {
  it('takes the lease as soon as the holder releases it, within one poll', async () => {
    const clock = new FakeClock();
    const store = new MemoryStore();
    const base = { prefix: 'job', clock, logger: silent, ttlSeconds: 30 };
    const holder = await holdLease(store, { ...base, instanceId: 'holder' });
    let waiter: Awaited<ReturnType<typeof waitForLease>> | undefined;
    const waiting = waitForLease(store, {
      ...base,
      instanceId: 'waiter',
      timeoutMs: 60_000,
      pollMs: 500,
    }).then((keeper) => {
      waiter = keeper;
    });
    await advanceInSteps(clock, 5_000, 250);
    expect(waiter).toBeUndefined();
    await holder.release();
    await advanceInSteps(clock, 500, 250);
    await waiting;
    expect(waiter?.lease.instanceId).toBe('waiter');
    expect(waiter?.generation).toBe(2);
    // Released, not expired: the waiter got it 5.5 s in, long before the 30 s TTL.
    expect(clock.monotonicNow() - 1_000_000).toBeLessThan(30_000);
    await waiter?.release();
  });

  it('takes over from a holder that stopped renewing only once a full TTL has passed', async () => {
    const clock = new FakeClock();
    const store = new MemoryStore();
    const base = { prefix: 'job', clock, logger: silent, ttlSeconds: 3 };
    const dead = await holdLease(store, { ...base, instanceId: 'dead' });
    // A process killed holding it: it never renews nor releases.
    dead.drop(new Error('killed'));
    const lastRenewed = (await readLease(store, 'job'))!.record.renewedAt;
    let takenAt: number | undefined;
    const waiting = waitForLease(store, {
      ...base,
      instanceId: 'next',
      timeoutMs: 10_000,
      pollMs: 1_000,
    }).then((keeper) => {
      takenAt = keeper.lease.record.acquiredAt;
      return keeper;
    });
    await advanceInSteps(clock, 5_000, 100);
    const keeper = await waiting;
    expect(takenAt).toBeDefined();
    expect(takenAt! - lastRenewed).toBeGreaterThan(3_000);
    expect(keeper.generation).toBe(2);
    await keeper.release();
  });

  it('gives up at the deadline with LeaseWaitTimeoutError naming the holder', async () => {
    const clock = new FakeClock();
    const store = new MemoryStore();
    const base = { prefix: 'job', clock, logger: silent, ttlSeconds: 30 };
    const holder = await holdLease(store, { ...base, instanceId: 'holder' });
    const outcome = waitForLease(store, {
      ...base,
      instanceId: 'waiter',
      timeoutMs: 4_000,
    }).then(
      () => undefined,
      (error: unknown) => error,
    );
    await advanceInSteps(clock, 5_000, 250);
    const error = await outcome;
    expect(LeaseWaitTimeoutError.isInstance(error)).toBe(true);
    expect(LeaseError.isInstance(error)).toBe(true);
    const timeout = error as LeaseWaitTimeoutError;
    expect(timeout.code).toBe('LEASE_WAIT_TIMEOUT');
    expect(timeout.holder?.instanceId).toBe('holder');
    expect(timeout.message).toMatch(/not free within 4000 ms; last held by instance holder/);
    // Nothing of the waiter's was written.
    expect((await readLease(store, 'job'))?.record.instanceId).toBe('holder');
    await holder.release();
  });

  it('refuses bad and unknown options before sending anything', async () => {
    const store = new MemoryStore();
    const base = { prefix: 'job', instanceId: 'w', clock: new FakeClock(), logger: silent };
    for (const [options, option] of [
      [{ ...base, timeoutMs: -1 }, 'timeoutMs'],
      [{ ...base, timeoutMs: 10, pollMs: 0 }, 'pollMs'],
      [{ ...base, timeoutMs: 10, deadlineMs: 5 }, 'deadlineMs'],
    ] as const) {
      await expect(waitForLease(store, options as never)).rejects.toSatisfy(
        (error) => LeaseOptionsError.isInstance(error) && error.option === option,
      );
    }
    expect((await store.list('')).objects).toEqual([]);
  });

  it('rejects with the abort reason when its signal aborts while waiting', async () => {
    const clock = new FakeClock();
    const store = new MemoryStore();
    const base = { prefix: 'job', clock, logger: silent };
    const holder = await holdLease(store, { ...base, instanceId: 'holder' });
    const controller = new AbortController();
    const outcome = waitForLease(store, {
      ...base,
      instanceId: 'waiter',
      timeoutMs: 60_000,
      signal: controller.signal,
    }).catch((error: unknown) => error);
    await advanceInSteps(clock, 2_000, 500);
    controller.abort(new Error('shutting down'));
    expect(await outcome).toMatchObject({ message: 'shutting down' });
    await holder.release();
  });
});

describe('LeaseKeeper.whenWritable', () => {
  it('lets a worker loop pause while renewals are late and resume when one lands', async () => {
    const clock = new FakeClock();
    const store = new FaultStore(new MemoryStore());
    const keeper = await holdLease(store, {
      prefix: 'job',
      instanceId: 'worker',
      ttlSeconds: 30,
      clock,
      logger: silent,
      renewRetry: 'steady',
    });
    await keeper.whenWritable(); // writable at once
    // Renewals fail from the first one (at 10 s) until 22 s: writes stop at 20 s.
    store.faults.failPuts = 12;
    let resumed = false;
    await advanceInSteps(clock, 20_000, 1_000);
    expect(keeper.mayWrite()).toBe(false);
    expect(WriteDeadlineError.isInstance(keeper.signal.reason)).toBe(true);
    const waiting = keeper.whenWritable().then(() => {
      resumed = true;
    });
    await advanceInSteps(clock, 1_000, 1_000);
    expect(resumed).toBe(false);
    await advanceInSteps(clock, 2_000, 1_000);
    await waiting;
    expect(resumed).toBe(true);
    expect(keeper.mayWrite()).toBe(true);
    expect(keeper.signal.aborted).toBe(false);
    await keeper.release();
  });

  it('rejects with the lost error when the lease is taken over while waiting', async () => {
    const clock = new FakeClock();
    const inner = new MemoryStore();
    const store = new FaultStore(inner);
    const keeper = await holdLease(store, {
      prefix: 'job',
      instanceId: 'worker',
      ttlSeconds: 3,
      clock,
      logger: silent,
    });
    store.faults.failPuts = 1_000;
    await advanceInSteps(clock, 2_500, 500);
    expect(keeper.mayWrite()).toBe(false);
    const waiting = keeper.whenWritable().catch((error: unknown) => error);
    // Another instance takes over after a full TTL; our next renewal finds it.
    await advanceInSteps(clock, 1_000, 500);
    const other = await holdLease(inner, {
      prefix: 'job',
      instanceId: 'other',
      ttlSeconds: 3,
      clock,
      logger: silent,
    });
    store.faults.failPuts = 0;
    await advanceInSteps(clock, 3_000, 500);
    expect(LeaseLostError.isInstance(await waiting)).toBe(true);
    await other.release();
  });

  it('rejects once the keeper is released, and refuses unknown options', async () => {
    const keeper = await holdLease(new MemoryStore(), {
      prefix: 'job',
      instanceId: 'worker',
      clock: new FakeClock(),
      logger: silent,
    });
    await expect(keeper.whenWritable({ timeout: 5 } as never)).rejects.toSatisfy(
      (error) => LeaseOptionsError.isInstance(error) && error.option === 'timeout',
    );
    await keeper.release();
    await expect(keeper.whenWritable()).rejects.toMatchObject({ name: 'AbortError' });
  });
});
