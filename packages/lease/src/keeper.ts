/**
 * A keeper for standalone users: acquire, renew every TTL/3, expose the fence,
 * release on dispose.
 *
 * Renewal schedule: the next renewal is due one interval (TTL/3) after the
 * send time of the last successful one. A renewal that fails for a transient
 * reason (transport failure, timeout) is retried after 1 s, doubling on each
 * further failure, never waiting longer than the interval. A renewal that
 * finds the lease taken over, or fenced by term, ends the loop for good: the
 * fence signal aborts and a `lost` event fires.
 */
import type { ObjectStore } from '@x/store';
import { BucketLease } from './bucket-lease.ts';
import { systemClock } from './clock.ts';
import { FencedError, type LeaseError, LeaseLostError, LeaseOptionsError } from './errors.ts';
import {
  type AcquireOptions,
  type Exclusion,
  type LeaseLogger,
  stderrLeaseLogger,
} from './options.ts';
import type { LeaseRecord } from './record.ts';

/** What happens to a held lease, in order. */
export type LeaseEvent =
  | { readonly type: 'acquired'; readonly record: LeaseRecord; readonly exclusion: Exclusion }
  | { readonly type: 'renewed'; readonly record: LeaseRecord }
  | { readonly type: 'renewal-failed'; readonly error: unknown; readonly retryInMs: number }
  | { readonly type: 'lost'; readonly error: LeaseError }
  | { readonly type: 'released' }
  | { readonly type: 'release-failed'; readonly error: unknown };

export interface HoldLeaseOptions extends AcquireOptions {
  /** Called for every event; an exception it throws is logged and ignored. */
  onEvent?: (event: LeaseEvent) => void;
  /**
   * Per-renewal request timeout in ms, on the injected clock. Default: half
   * the renewal interval (TTL/6), so a hung request and its retry still fit
   * before the write deadline.
   */
  renewTimeoutMs?: number;
  /** The cluster's current term, read before every renewal (term fencing). */
  currentTerm?: () => number | undefined;
}

/** The first retry after a failed renewal; it doubles, capped at the renewal interval. */
export const RENEW_RETRY_MS = 1000;

/**
 * Takes the lease and keeps it renewed until released or lost.
 * @throws whatever `BucketLease.acquireAs` throws (the lease is not held then).
 */
export async function holdLease(
  store: ObjectStore,
  options: HoldLeaseOptions,
): Promise<LeaseKeeper> {
  if (
    options.renewTimeoutMs !== undefined &&
    !(Number.isFinite(options.renewTimeoutMs) && options.renewTimeoutMs > 0)
  )
    throw new LeaseOptionsError('renewTimeoutMs', 'must be a positive number of milliseconds');
  const lease = await BucketLease.acquireAs(store, options);
  return new LeaseKeeper(lease, options);
}

/** A held lease with its renew loop. `await using keeper = await holdLease(...)` releases it at scope exit. */
export class LeaseKeeper implements AsyncDisposable {
  readonly lease: BucketLease;
  /** Resolves when the renew loop has stopped (lost or released). */
  readonly stopped: Promise<void>;

  readonly #options: HoldLeaseOptions;
  readonly #logger: LeaseLogger;
  #cancelTimer: (() => void) | undefined;
  #failures = 0;
  #stopping = false;
  #resolveStopped!: () => void;

  /** @internal Use {@link holdLease}. */
  constructor(lease: BucketLease, options: HoldLeaseOptions) {
    this.lease = lease;
    this.#options = options;
    this.#logger = options.logger ?? stderrLeaseLogger;
    this.stopped = new Promise((resolve) => {
      this.#resolveStopped = resolve;
    });
    this.#emit({ type: 'acquired', record: lease.record, exclusion: lease.exclusion });
    this.#scheduleNext();
  }

  /** The current fence signal (see `BucketLease.signal`): read it for each write. */
  get signal(): AbortSignal {
    return this.lease.signal;
  }

  mayWrite(): boolean {
    return this.lease.mayWrite();
  }

  isLost(): boolean {
    return this.lease.isLost();
  }

  get generation(): number {
    return this.lease.generation;
  }

  /** Stops renewing, waits for a renewal in flight, and releases. Rejects on a store failure. */
  async release(options: { signal?: AbortSignal } = {}): Promise<void> {
    this.#stop();
    if (this.lease.isLost()) return;
    await this.lease.release(options);
    if (!this.lease.isLost()) this.#emit({ type: 'released' });
  }

  /** Releases; a store failure is logged and reported as `release-failed`, not thrown (the record expires after its TTL). */
  async [Symbol.asyncDispose](): Promise<void> {
    try {
      await this.release();
    } catch (error) {
      this.#logger.warn('lease.release-failed', {
        key: this.lease.key,
        instanceId: this.lease.instanceId,
        error: String(error),
        note: 'the record expires after its TTL',
      });
      this.#emit({ type: 'release-failed', error });
    }
  }

  #clock() {
    return this.#options.clock ?? systemClock;
  }

  #scheduleNext(): void {
    const lastSent = this.lease.lastWriteSentAt().monotonicMs;
    const due = Math.max(0, lastSent + this.lease.renewIntervalMs() - this.#clock().monotonicNow());
    this.#schedule(due);
  }

  #schedule(delayMs: number): void {
    if (this.#stopping) return;
    this.#cancelTimer = this.#clock().setTimer(delayMs, () => {
      this.#cancelTimer = undefined;
      void this.#renewOnce();
    });
  }

  async #renewOnce(): Promise<void> {
    if (this.#stopping) return;
    const clock = this.#clock();
    const controller = new AbortController();
    const timeoutMs = this.#options.renewTimeoutMs ?? Math.floor(this.lease.renewIntervalMs() / 2);
    const cancelTimeout = clock.setTimer(timeoutMs, () =>
      controller.abort(
        new DOMException(`lease renewal timed out after ${timeoutMs} ms`, 'TimeoutError'),
      ),
    );
    try {
      const currentTerm = this.#options.currentTerm?.();
      await this.lease.renew({
        signal: controller.signal,
        ...(currentTerm === undefined ? {} : { currentTerm }),
      });
      this.#failures = 0;
      this.#emit({ type: 'renewed', record: this.lease.record });
      this.#scheduleNext();
    } catch (error) {
      if (
        LeaseLostError.isInstance(error) ||
        FencedError.isInstance(error) ||
        this.lease.isLost()
      ) {
        if (this.lease.isLost()) this.#emit({ type: 'lost', error: error as LeaseError });
        this.#stop();
        return;
      }
      if (this.#stopping) return;
      const retryInMs = Math.min(
        RENEW_RETRY_MS * 2 ** Math.min(this.#failures, 20),
        this.lease.renewIntervalMs(),
      );
      this.#failures += 1;
      this.#emit({ type: 'renewal-failed', error, retryInMs });
      this.#schedule(retryInMs);
    } finally {
      cancelTimeout();
    }
  }

  #stop(): void {
    if (this.#stopping) return;
    this.#stopping = true;
    this.#cancelTimer?.();
    this.#cancelTimer = undefined;
    this.#resolveStopped();
  }

  #emit(event: LeaseEvent): void {
    if (!this.#options.onEvent) return;
    try {
      this.#options.onEvent(event);
    } catch (error) {
      // A listener's bug must not stop the renew loop; it is reported instead.
      this.#logger.warn('lease.event-listener-failed', { event: event.type, error: String(error) });
    }
  }
}
