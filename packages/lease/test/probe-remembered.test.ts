/**
 * The precondition probe is paid once per store object per process: a
 * second acquire on the same store skips it, and a lost lease makes the
 * next acquire probe again (a store may have stopped honouring
 * preconditions), which then fails closed on a store that now ignores one.
 */
import { MemoryStore } from '@x/store';
import { describe, expect, it } from 'vitest';
import { ACQUIRE_RACE_WRITERS } from '../src/acquire-probe.ts';
import { BucketLease } from '../src/bucket-lease.ts';
import { FakeClock } from '../src/clock.ts';
import { LeaseLostError, PreconditionsIgnoredError } from '../src/errors.ts';
import { FaultStore } from './fault-store.ts';
import { recordingLogger, writeRecordByHand } from './helpers.ts';
import { expectRejection, options } from './scenario-helpers.ts';

/** The probe's writes: a create-if-absent, a replace-if-version on a made-up version, the race. */
const PROBE_PUTS = 2 + ACQUIRE_RACE_WRITERS;

describe('the precondition probe, remembered per store', () => {
  it('is paid by the first acquire on a store only, until a lease on it is lost', async () => {
    const store = new FaultStore(new MemoryStore());
    const clock = new FakeClock();
    const recording = recordingLogger();
    const settings = options('probe', clock, { logger: recording.logger });

    const first = await BucketLease.acquireAs(store, settings);
    expect(store.puts.length).toBe(1 + PROBE_PUTS);
    await first.release();

    const before = store.puts.length;
    const second = await BucketLease.acquireAs(store, settings);
    expect(store.puts.length - before).toBe(1);
    const acquired = recording.entries.filter((event) => event.event === 'lease.acquired');
    expect(acquired.map((event) => event.fields.preconditionProbe)).toEqual(['run', 'remembered']);

    // Another writer takes the record over: the renewal finds it lost.
    await writeRecordByHand(store, 'probe', { renewedAt: clock.wallNow(), generation: 9 });
    await expectRejection(second.renew(), LeaseLostError.isInstance);
    await writeRecordByHand(store, 'probe', {
      renewedAt: clock.wallNow(),
      generation: 9,
      released: true,
    });

    // Meanwhile the store began to accept a stale If-Match: probed again, refused.
    store.faults.acceptStaleIfMatch = true;
    const refused = await expectRejection(
      BucketLease.acquireAs(store, settings),
      PreconditionsIgnoredError.isInstance,
    );
    expect(refused.ignored.join('; ')).toMatch(/replace-if-version.*accepted/);
  });

  it('is not remembered across store objects', async () => {
    const inner = new MemoryStore();
    const clock = new FakeClock();
    const one = new FaultStore(inner);
    await (await BucketLease.acquireAs(one, options('a', clock))).release();
    const other = new FaultStore(inner);
    await BucketLease.acquireAs(other, options('b', clock));
    expect(other.puts.length).toBe(1 + PROBE_PUTS);
  });
});
