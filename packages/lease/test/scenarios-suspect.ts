/**
 * The lease scenarios of `suspect records`, run once per store by
 * `defineLeaseScenarios`. Suspect records (a TTL over the sane limit, a
 * renewal far in the future): taken over only after being watched unchanged
 * for a TTL.
 */

import { describe, expect, it } from 'vitest';
import { BucketLease } from '../src/bucket-lease.ts';
import { FakeClock } from '../src/clock.ts';
import { ForeignActiveError } from '../src/errors.ts';
import { LeaseWatch } from '../src/watch.ts';
import { recordingLogger, writeRecordByHand } from './helpers.ts';
import { expectRejection, options, type StoreTarget, TTL_MS } from './scenario-helpers.ts';

export function suspectRecordScenarios(target: StoreTarget): void {
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
      await expectRejection(BucketLease.acquireAs(store, contender), ForeignActiveError.isInstance);
      clock.advance(1);
      const lease = await BucketLease.acquireAs(store, contender);
      expect(lease.generation).toBe(6);
      expect(entries.some((entry) => entry.event === 'lease.suspect_takeover')).toBe(true);
      await lease.release();
    });

    it('a suspect record that changes in between restarts the watch', async () => {
      const { store, prefix } = await target.open();
      const clock = new FakeClock();
      const future = clock.wallNow() + 2 * 60 * 60 * 1000;
      await writeRecordByHand(store, prefix, { renewedAt: future });
      const contender = options(prefix, clock, { watch: new LeaseWatch() });
      await expectRejection(BucketLease.acquireAs(store, contender), ForeignActiveError.isInstance);
      clock.advance(TTL_MS / 2);
      await writeRecordByHand(store, prefix, { renewedAt: future + 1000 });
      await expectRejection(BucketLease.acquireAs(store, contender), ForeignActiveError.isInstance);
      clock.advance(TTL_MS / 2);
      await expectRejection(BucketLease.acquireAs(store, contender), ForeignActiveError.isInstance);
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
      await expectRejection(BucketLease.acquireAs(store, contender), ForeignActiveError.isInstance);
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
}
