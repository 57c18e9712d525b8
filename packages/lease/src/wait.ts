/**
 * `waitForLease`: take a lease that another instance may hold, waiting for
 * it to be released or to expire, up to a deadline.
 *
 * Each attempt is one `holdLease`. While another instance holds the lease,
 * the next attempt is made after `pollMs`, or sooner when the holder's record
 * expires before then (so a released record is noticed within `pollMs`, a
 * dead holder is taken over as soon as its TTL has passed). One `LeaseWatch`
 * is shared by every attempt, so a suspect record is taken over after being
 * watched for a TTL. The last attempt is made at the deadline.
 */
import type { ObjectStore } from '@x/store';
import { type Clock, systemClock } from './clock.ts';
import { ForeignActiveError, LeaseOptionsError, LeaseWaitTimeoutError } from './errors.ts';
import { HOLD_OPTION_NAMES, type HoldLeaseOptions, holdLease, type LeaseKeeper } from './keeper.ts';
import { refuseUnknownOptions } from './known-options.ts';
import type { LeaseRecord } from './lease-record.ts';
import { isRefusal } from './lease-writes.ts';
import { leaseKey } from './record.ts';
import { LeaseWatch } from './watch.ts';

/** The default pause between attempts while the lease is held elsewhere. */
export const WAIT_POLL_MS = 1000;

export interface WaitForLeaseOptions extends HoldLeaseOptions {
  /** How long to wait at most, in ms on the injected monotonic clock; 0 makes one attempt. */
  timeoutMs: number;
  /** Pause between attempts while the lease is held (default `WAIT_POLL_MS`, 1 s). */
  pollMs?: number;
}

const WAIT_OPTION_NAMES = [...HOLD_OPTION_NAMES, 'timeoutMs', 'pollMs'] as const;

/**
 * Takes the lease as `holdLease` does, waiting while another instance holds it.
 * @throws LeaseWaitTimeoutError — not free within `timeoutMs`; nothing is held.
 * @throws LeaseOptionsError — a bad or unknown option; nothing was sent.
 * @throws the abort reason of `signal`; anything else `holdLease` throws
 *   except `ForeignActiveError` and a lost race (which are waited out):
 *   `PreconditionsIgnoredError`, `LeaseRecordError`, `FencedError`, a `StoreError`.
 */
export async function waitForLease(
  store: ObjectStore,
  options: WaitForLeaseOptions,
): Promise<LeaseKeeper> {
  refuseUnknownOptions(options, WAIT_OPTION_NAMES, 'waitForLease');
  const { timeoutMs, pollMs = WAIT_POLL_MS, ...hold } = options;
  if (typeof timeoutMs !== 'number' || !Number.isFinite(timeoutMs) || timeoutMs < 0)
    throw new LeaseOptionsError(
      'timeoutMs',
      `must be a number of milliseconds >= 0, got ${String(timeoutMs)}`,
    );
  if (typeof pollMs !== 'number' || !Number.isFinite(pollMs) || pollMs <= 0)
    throw new LeaseOptionsError(
      'pollMs',
      `must be a positive number of milliseconds, got ${String(pollMs)}`,
    );
  const clock = hold.clock ?? systemClock;
  const watch = hold.watch ?? new LeaseWatch();
  const deadline = clock.monotonicNow() + timeoutMs;
  let holder: LeaseRecord | undefined;
  for (;;) {
    hold.signal?.throwIfAborted();
    let lastError: unknown;
    let untilExpiryMs = Number.POSITIVE_INFINITY;
    try {
      return await holdLease(store, { ...hold, watch });
    } catch (error) {
      if (ForeignActiveError.isInstance(error)) {
        holder = error.holder;
        untilExpiryMs = error.mayExpireAt - clock.wallNow();
      } else if (!isRefusal(error)) {
        // Another instance won every round of a race: like a holder, waited out.
        throw error;
      }
      lastError = error;
    }
    const leftMs = deadline - clock.monotonicNow();
    if (leftMs <= 0)
      throw new LeaseWaitTimeoutError(leaseKey(hold.prefix), timeoutMs, holder, {
        cause: lastError,
      });
    // One ms past the expiry: a record exactly at its TTL still counts as held.
    await sleep(clock, Math.min(pollMs, Math.max(1, untilExpiryMs + 1), leftMs), hold.signal);
  }
}

function sleep(clock: Clock, ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      cancel();
      reject(signal?.reason);
    };
    const done = () => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    };
    // The system clock's timers are unref'd (a forgotten lease must not keep
    // a process alive); a caller awaiting this wait is not forgotten.
    const cancel =
      clock === systemClock
        ? (() => {
            const handle = setTimeout(done, ms);
            return () => clearTimeout(handle);
          })()
        : clock.setTimer(ms, done);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
