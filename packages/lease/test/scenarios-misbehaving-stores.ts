/**
 * The lease scenarios of `misbehaving stores`, run once per store by
 * `defineLeaseScenarios`. Stores that lose answers, fail, or ignore
 * preconditions: the lease notices, and fails closed where it cannot be
 * sure.
 */

import { describe, expect, it } from 'vitest';
import { BucketLease } from '../src/bucket-lease.ts';
import { FakeClock } from '../src/clock.ts';
import { LeaseLostError, PreconditionsIgnoredError } from '../src/errors.ts';
import { readLease } from '../src/record.ts';
import { FaultStore } from './fault-store.ts';
import { recordingLogger, writeRecordByHand } from './helpers.ts';
import { expectRejection, INTERVAL_MS, options, type StoreTarget } from './scenario-helpers.ts';

export function misbehavingStoreScenarios(target: StoreTarget): void {
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
        name: 'checks If-Match and then writes (not atomically)',
        faults: { checkThenWriteIfMatch: true },
        ignored: /replace-if-version \(If-Match\) is not atomic: [2-4] of 4 concurrent writes/,
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
      const warning = entries.find((entry) => entry.event === 'lease.best_effort');
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
}
