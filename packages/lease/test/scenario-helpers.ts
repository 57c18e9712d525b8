/**
 * What the lease scenarios share: the store under test and its target, the
 * acquire options they start from, a typed rejection check, and the races
 * and skewed takeovers the meta-tests also run.
 */
import type { ObjectStore } from '@x/store';
import { expect } from 'vitest';
import { BucketLease } from '../src/bucket-lease.ts';
import { FakeClock } from '../src/clock.ts';
import { ForeignActiveError } from '../src/errors.ts';
import type { AcquireOptions } from '../src/lease-options.ts';
import { newInstanceId } from '../src/record.ts';
import { recordingLogger } from './helpers.ts';

export interface StoreUnderTest {
  readonly store: ObjectStore;
  /** A prefix no other test uses. */
  readonly prefix: string;
}

export interface StoreTarget {
  readonly name: string;
  open(): Promise<StoreUnderTest>;
}

export const TTL_S = 30;
export const TTL_MS = TTL_S * 1000;
export const INTERVAL_MS = TTL_MS / 3;
export const TWO_THIRDS_MS = (TTL_MS * 2) / 3;

/** Acquire options for one instance on a fake clock, logs recorded. */
export function options(
  prefix: string,
  clock: FakeClock,
  extra: Partial<AcquireOptions> = {},
): AcquireOptions & { instanceId: string } {
  return {
    prefix,
    instanceId: newInstanceId(),
    ttlSeconds: TTL_S,
    clock,
    logger: recordingLogger().logger,
    ...extra,
  };
}

export async function expectRejection<T extends Error>(
  promise: Promise<unknown>,
  isInstance: (value: unknown) => value is T,
): Promise<T> {
  let caught: unknown;
  try {
    await promise;
  } catch (error) {
    caught = error;
  }
  expect(caught, 'expected a rejection').toBeDefined();
  if (!isInstance(caught)) throw caught;
  return caught;
}

/** Starts `count` contenders at once; returns who got the lease and what the others got. */
export async function raceContenders(
  store: ObjectStore,
  prefix: string,
  count: number,
  extra: Partial<AcquireOptions> = {},
): Promise<{ winners: BucketLease[]; losers: unknown[] }> {
  const clock = new FakeClock();
  const outcomes = await Promise.allSettled(
    Array.from({ length: count }, () =>
      BucketLease.acquireAs(store, options(prefix, clock, extra)),
    ),
  );
  const winners: BucketLease[] = [];
  const losers: unknown[] = [];
  for (const outcome of outcomes) {
    if (outcome.status === 'fulfilled') winners.push(outcome.value);
    else losers.push(outcome.reason);
  }
  return { winners, losers };
}

/**
 * A holder stops renewing; a contender whose wall clock is `skewMs` ahead
 * (negative: behind) tries once a second. Time runs in 250 ms steps on both.
 * Returns the steps at which both could write (should be none).
 */
export async function runSkewedTakeover(
  store: ObjectStore,
  prefix: string,
  skewMs: number,
): Promise<{ holder: BucketLease; successor: BucketLease | undefined; overlapSteps: number[] }> {
  const holderClock = new FakeClock();
  const contenderClock = new FakeClock({ wallMs: holderClock.wallNow() + skewMs });
  const holder = await BucketLease.acquireAs(store, options(prefix, holderClock));
  const contender = options(prefix, contenderClock);
  let successor: BucketLease | undefined;
  const overlapSteps: number[] = [];
  for (let step = 1; step <= 240 && !successor; step++) {
    holderClock.advance(250);
    contenderClock.advance(250);
    if (step % 4 === 0) {
      try {
        successor = await BucketLease.acquireAs(store, contender);
      } catch (error) {
        if (!ForeignActiveError.isInstance(error)) throw error;
      }
    }
    if (successor?.mayWrite() && holder.mayWrite()) overlapSteps.push(step);
  }
  return { holder, successor, overlapSteps };
}
