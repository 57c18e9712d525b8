/**
 * The lease's behaviour, written once and run against every store
 * (`defineLeaseScenarios` is called once per store, one describe each).
 * Time is a FakeClock everywhere, also on real servers: the record's
 * timestamps come from the fake wall clock, so nothing sleeps.
 */
import type { ObjectStore } from '@x/store';
import { describe, expect, it } from 'vitest';
import { BucketLease, releaseOwnRecord } from '../src/bucket-lease.ts';
import { FakeClock } from '../src/clock.ts';
import {
  FencedError,
  ForeignActiveError,
  LeaseLostError,
  LeaseRecordError,
  PreconditionsIgnoredError,
  WriteDeadlineError,
} from '../src/errors.ts';
import { holdLease } from '../src/keeper.ts';
import type { AcquireOptions } from '../src/options.ts';
import { leaseKey, newInstanceId, readLease } from '../src/record.ts';
import { LeaseWatch } from '../src/watch.ts';
import { FaultStore } from './fault-store.ts';
import { EventLog, recordingLogger, settle, writeRecordByHand } from './helpers.ts';

export interface StoreUnderTest {
  readonly store: ObjectStore;
  /** A prefix no other test uses. */
  readonly prefix: string;
}

export interface StoreTarget {
  readonly name: string;
  open(): Promise<StoreUnderTest>;
}

const TTL_S = 30;
const TTL_MS = TTL_S * 1000;
const INTERVAL_MS = TTL_MS / 3;
const TWO_THIRDS_MS = (TTL_MS * 2) / 3;

/** Acquire options for one instance on a fake clock, logs recorded. */
function options(
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

async function expectRejection<T extends Error>(
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

export function defineLeaseScenarios(target: StoreTarget): void {
  describe(`lease on ${target.name}`, () => {
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
        const fenced = await expectRejection(
          lease.renew({ currentTerm: 4 }),
          FencedError.isInstance,
        );
        expect(fenced.newerTerm).toBe(4);
        expect(counting.puts.length).toBe(putsBefore + 1);
        expect(lease.isLost()).toBe(true);
        expect(lease.signal.aborted).toBe(true);
      });
    });

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
          const { successor, overlapSteps, holder } = await runSkewedTakeover(
            store,
            prefix,
            skewMs,
          );
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

    describe('suspect records', () => {
      it('a future-dated record is taken over after one of our TTLs unchanged, not before', async () => {
        const { store, prefix } = await target.open();
        const clock = new FakeClock();
        await writeRecordByHand(store, prefix, {
          renewedAt: clock.wallNow() + 2 * 60 * 60 * 1000,
          generation: 5,
        });
        const { logger, entries } = recordingLogger();
        const watch = new LeaseWatch();
        const contender = options(prefix, clock, { watch, logger });
        const first = await expectRejection(
          BucketLease.acquireAs(store, contender),
          ForeignActiveError.isInstance,
        );
        expect(first.message).toMatch(/suspect/);
        clock.advance(TTL_MS - 1);
        await expectRejection(
          BucketLease.acquireAs(store, contender),
          ForeignActiveError.isInstance,
        );
        clock.advance(1);
        const lease = await BucketLease.acquireAs(store, contender);
        expect(lease.generation).toBe(6);
        expect(entries.some((entry) => entry.event === 'lease.suspect-takeover')).toBe(true);
        await lease.release();
      });

      it('a suspect record that changes in between restarts the watch', async () => {
        const { store, prefix } = await target.open();
        const clock = new FakeClock();
        const future = clock.wallNow() + 2 * 60 * 60 * 1000;
        await writeRecordByHand(store, prefix, { renewedAt: future });
        const contender = options(prefix, clock, { watch: new LeaseWatch() });
        await expectRejection(
          BucketLease.acquireAs(store, contender),
          ForeignActiveError.isInstance,
        );
        clock.advance(TTL_MS / 2);
        await writeRecordByHand(store, prefix, { renewedAt: future + 1000 });
        await expectRejection(
          BucketLease.acquireAs(store, contender),
          ForeignActiveError.isInstance,
        );
        clock.advance(TTL_MS / 2);
        await expectRejection(
          BucketLease.acquireAs(store, contender),
          ForeignActiveError.isInstance,
        );
        clock.advance(TTL_MS / 2);
        const lease = await BucketLease.acquireAs(store, contender);
        expect(lease.generation).toBe(2);
        await lease.release();
      });

      it('a record with a TTL over MAX_SANE_TTL_S is suspect too', async () => {
        const { store, prefix } = await target.open();
        const clock = new FakeClock();
        await writeRecordByHand(store, prefix, { renewedAt: clock.wallNow(), ttlSeconds: 7200 });
        const contender = options(prefix, clock, { watch: new LeaseWatch() });
        await expectRejection(
          BucketLease.acquireAs(store, contender),
          ForeignActiveError.isInstance,
        );
        clock.advance(TTL_MS);
        const lease = await BucketLease.acquireAs(store, contender);
        expect(lease.generation).toBe(2);
        await lease.release();
      });

      it('a record a few seconds in the future (within its TTL) counts as fresh, not suspect', async () => {
        const { store, prefix } = await target.open();
        const clock = new FakeClock();
        await writeRecordByHand(store, prefix, { renewedAt: clock.wallNow() + 20_000 });
        const contender = options(prefix, clock, { watch: new LeaseWatch() });
        const error = await expectRejection(
          BucketLease.acquireAs(store, contender),
          ForeignActiveError.isInstance,
        );
        expect(error.message).not.toMatch(/suspect/);
        expect(error.mayExpireAt).toBe(clock.wallNow() + 20_000 + TTL_MS);
      });
    });

    describe('misbehaving stores', () => {
      const cases: {
        name: string;
        faults: ConstructorParameters<typeof FaultStore>[1];
        ignored: RegExp;
        leaves: 'released' | 'nothing';
      }[] = [
        {
          name: 'accepts a stale ifMatch',
          faults: { acceptStaleIfMatch: true },
          ignored: /replace-if-version.*accepted/,
          leaves: 'released',
        },
        {
          name: 'accepts a second create',
          faults: { acceptSecondCreate: true },
          ignored: /create-if-absent.*accepted/,
          leaves: 'released',
        },
        {
          name: 'returns no version',
          faults: { noVersion: true },
          ignored: /no version/,
          leaves: 'released',
        },
        {
          name: 'answers not-implemented to conditional writes',
          faults: { notImplemented: 'both' },
          ignored: /not implemented/,
          leaves: 'nothing',
        },
        {
          name: 'answers not-implemented to replace-if-version only',
          faults: { notImplemented: 'ifMatch' },
          ignored: /replace-if-version.*not implemented/,
          leaves: 'released',
        },
      ];
      for (const testCase of cases) {
        it(`a store that ${testCase.name}: acquire fails closed with PreconditionsIgnoredError`, async () => {
          const { store, prefix } = await target.open();
          const faulty = new FaultStore(store, testCase.faults);
          const contender = options(prefix, new FakeClock());
          const error = await expectRejection(
            BucketLease.acquireAs(faulty, contender),
            PreconditionsIgnoredError.isInstance,
          );
          expect(error.ignored.join('; ')).toMatch(testCase.ignored);
          expect(error.message).toContain('conditional: false');
          const left = await readLease(store, prefix);
          if (testCase.leaves === 'nothing') expect(left).toBeNull();
          else {
            expect(left?.record.instanceId).toBe(contender.instanceId);
            expect(left?.record.released).toBe(true);
          }
        });
      }

      it('best-effort mode (conditional: false) runs on such a store, says so, and warns what is not protected', async () => {
        const { store, prefix } = await target.open();
        const faulty = new FaultStore(store, { notImplemented: 'both' });
        const { logger, entries } = recordingLogger();
        const clock = new FakeClock();
        const lease = await BucketLease.acquireAs(
          faulty,
          options(prefix, clock, { conditional: false, logger }),
        );
        expect(lease.exclusion).toBe('best-effort');
        const warning = entries.find((entry) => entry.event === 'lease.best-effort');
        expect(warning?.level).toBe('warn');
        expect(String(warning?.fields.notProtected)).toMatch(/both/);
        expect(faulty.puts.every((put) => put.mode === 'overwrite')).toBe(true);
        clock.advance(INTERVAL_MS);
        await lease.renew();
        // A foreign write is noticed at the next renewal.
        await writeRecordByHand(store, prefix, { renewedAt: clock.wallNow(), generation: 9 });
        await expectRejection(lease.renew(), LeaseLostError.isInstance);
        await lease.release();
        expect((await readLease(store, prefix))?.record.generation).toBe(9);
      });
    });

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
  });
}
