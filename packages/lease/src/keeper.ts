/**
 * A keeper: acquire, renew every TTL/3, expose the fence, release on dispose;
 * the one renew loop of this repository (`holdLease`, and so
 * `@x/backup-worker`). A renewal is due TTL/3 after the last successful one
 * was sent and gets `renewTimeoutMs` (default TTL/6), so a hung one is retried
 * before writes stop; a transient failure is retried after `RENEW_RETRY_MS`,
 * doubling or steady, never past the interval. A takeover or a fence by term
 * ends the loop (the fence aborts, `lost` fires); `drop(reason)` ends it from
 * the holder's side and leaves the record to expire. Events come on the loop's
 * turn, after the fact: `mayWrite()` and `signal` are the truth at a write.
 */
import type { ObjectStore } from '@x/store';
import { BucketLease } from './bucket-lease.ts';
import { systemClock } from './clock.ts';
import { FencedError, type LeaseError, LeaseLostError, LeaseOptionsError } from './errors.ts';
import { refuseUnknownOptions } from './known-options.ts';
import {
  ACQUIRE_OPTION_NAMES,
  type AcquireOptions,
  type Exclusion,
  type LeaseLogger,
  stderrLeaseLogger,
} from './lease-options.ts';
import type { LeaseRecord } from './record.ts';

/** What happens to a held lease, in order. */
export type LeaseEvent =
  | { readonly type: 'acquired'; readonly record: LeaseRecord; readonly exclusion: Exclusion }
  | {
      readonly type: 'renewed';
      readonly record: LeaseRecord;
      /** How long the renewal took, on the injected monotonic clock. */
      readonly tookMs: number;
    }
  | {
      readonly type: 'renewal-failed';
      readonly error: unknown;
      readonly retryInMs: number;
      /** The write deadline has passed: writes stay stopped until a renewal succeeds. */
      readonly writesStopped: boolean;
    }
  | { readonly type: 'lost'; readonly error: LeaseError }
  | { readonly type: 'dropped'; readonly reason: Error }
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
  /**
   * Retry delay after consecutive failed renewals: `'doubling'` (default)
   * waits `RENEW_RETRY_MS`, then twice as long after each further failure;
   * `'steady'` waits `RENEW_RETRY_MS` every time. Both are capped at the
   * renewal interval.
   */
  renewRetry?: 'doubling' | 'steady';
  /** The cluster's current term, read before every renewal (term fencing). */
  currentTerm?: () => number | undefined;
}

/** @internal The option names of `holdLease`. */
export const HOLD_OPTION_NAMES = [
  ...ACQUIRE_OPTION_NAMES,
  'onEvent',
  'renewTimeoutMs',
  'renewRetry',
  'currentTerm',
] as const satisfies readonly (keyof HoldLeaseOptions)[];

/** The first retry after a failed renewal; it doubles (unless steady), capped at the renewal interval. */
export const RENEW_RETRY_MS = 1000;

/**
 * Takes the lease and keeps it renewed until released, dropped or lost.
 * @throws LeaseOptionsError — a bad `renewTimeoutMs` or `renewRetry`; nothing was sent.
 * @throws whatever `BucketLease.acquireAs` throws (the lease is not held then).
 */
export async function holdLease(
  store: ObjectStore,
  options: HoldLeaseOptions,
): Promise<LeaseKeeper> {
  refuseUnknownOptions(options, HOLD_OPTION_NAMES, 'holdLease');
  if (
    options.renewTimeoutMs !== undefined &&
    !(Number.isFinite(options.renewTimeoutMs) && options.renewTimeoutMs > 0)
  )
    throw new LeaseOptionsError('renewTimeoutMs', 'must be a positive number of milliseconds');
  if (
    options.renewRetry !== undefined &&
    options.renewRetry !== 'doubling' &&
    options.renewRetry !== 'steady'
  )
    throw new LeaseOptionsError('renewRetry', "must be 'doubling' or 'steady'");
  const { onEvent, renewTimeoutMs, renewRetry, currentTerm, ...acquire } = options;
  const lease = await BucketLease.acquireAs(store, acquire);
  return new LeaseKeeper(lease, options);
}

/**
 * A held lease with its renew loop. Release it with `release()` in a
 * `finally` (or, on Node 24, `await using keeper = await holdLease(...)`).
 */
export class LeaseKeeper implements AsyncDisposable {
  readonly lease: BucketLease;
  /** Resolves when the renew loop has stopped (lost, dropped or released). */
  readonly stopped: Promise<void>;

  readonly #options: HoldLeaseOptions;
  readonly #logger: LeaseLogger;
  readonly #drop = new AbortController();
  /** The lease's fence combined with the drop signal, rebuilt when the lease opens a new fence. */
  #combined: { fence: AbortSignal; signal: AbortSignal } | undefined;
  #cancelTimer: (() => void) | undefined;
  #failures = 0;
  #stopping = false;
  #keepAlive: ReturnType<typeof setInterval> | undefined;
  /** What the renewal that found the lease lost threw. */
  #lostReason: unknown;
  /** Callers of `whenWritable` waiting for a renewal to restore the right to write. */
  readonly #writableWaiters = new Set<{
    resolve: () => void;
    reject: (reason: unknown) => void;
  }>();
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

  /**
   * The current fence signal (see `BucketLease.signal`), which also aborts
   * when the keeper is dropped (with the drop's reason): read it for each write.
   */
  get signal(): AbortSignal {
    if (this.#drop.signal.aborted) return this.#drop.signal;
    const fence = this.lease.signal;
    if (this.#combined?.fence !== fence)
      this.#combined = { fence, signal: AbortSignal.any([fence, this.#drop.signal]) };
    return this.#combined.signal;
  }

  /** True while held, not dropped, and before the write deadline. */
  mayWrite(): boolean {
    return !this.#drop.signal.aborted && this.lease.mayWrite();
  }

  isLost(): boolean {
    return this.lease.isLost();
  }

  /** True once {@link drop} was called. Final. */
  isDropped(): boolean {
    return this.#drop.signal.aborted;
  }

  get generation(): number {
    return this.lease.generation;
  }

  /**
   * Gives the lease up without touching the record: renewing stops, the fence
   * aborts with `reason`, and a later `release()` does nothing (the record
   * expires by itself). For a holder that learned another writer is active
   * (a refused conditional write): its view of the record is no longer to be
   * trusted. A renewal in flight still finishes, unreported. Idempotent.
   */
  drop(reason: Error): void {
    if (this.#drop.signal.aborted) return;
    this.#drop.abort(reason);
    this.#stop();
    this.#emit({ type: 'dropped', reason });
  }

  /**
   * Resolves when this holder may write: at once while `mayWrite()` is true,
   * otherwise at the first renewal that restores the right to write (a late
   * renewal that nobody overtook). Rejects once the keeper stops — lost
   * (`LeaseLostError`/`FencedError`), dropped (the drop's reason) or released
   * (an `AbortError`) — or with `signal`'s reason. A worker loop awaits it
   * before each write, so writes pause while renewals are late and resume
   * when one lands.
   */
  whenWritable(options: { signal?: AbortSignal } = {}): Promise<void> {
    try {
      refuseUnknownOptions(options, ['signal'], 'LeaseKeeper.whenWritable');
      options.signal?.throwIfAborted();
    } catch (error) {
      return Promise.reject(error);
    }
    if (this.mayWrite()) return Promise.resolve();
    if (this.#stopping) return Promise.reject(this.#stoppedReason());
    return new Promise((resolve, reject) => {
      const { signal } = options;
      const onAbort = () => {
        this.#writableWaiters.delete(waiter);
        this.#releaseKeepAlive();
        reject(signal?.reason);
      };
      const waiter = {
        resolve: () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
        reject: (reason: unknown) => {
          signal?.removeEventListener('abort', onAbort);
          reject(reason);
        },
      };
      this.#writableWaiters.add(waiter);
      // The renew loop's timers are unref'd; a caller awaiting this keeps the process alive.
      this.#keepAlive ??= setInterval(() => {}, 1 << 30);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /**
   * Stops renewing and releases (nothing when the lease was lost or
   * dropped); the lease lets a renewal in flight finish first. Rejects on a
   * store failure.
   */
  async release(options: { signal?: AbortSignal } = {}): Promise<void> {
    refuseUnknownOptions(options, ['signal'], 'LeaseKeeper.release');
    this.#stop();
    if (this.lease.isLost() || this.isDropped()) return;
    await this.lease.release(options);
    if (!this.lease.isLost()) this.#emit({ type: 'released' });
  }

  /** Releases; a store failure is logged and reported as `release-failed`, not thrown (the record expires after its TTL). */
  async [Symbol.asyncDispose](): Promise<void> {
    try {
      await this.release();
    } catch (error) {
      this.#logger.warn('lease.release_failed', {
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

  #retryDelayMs(): number {
    const exponent = this.#options.renewRetry === 'steady' ? 0 : Math.min(this.#failures, 20);
    return Math.min(RENEW_RETRY_MS * 2 ** exponent, this.lease.renewIntervalMs());
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
    const sentAt = clock.monotonicNow();
    try {
      const currentTerm = this.#options.currentTerm?.();
      await this.lease.renew({
        signal: controller.signal,
        ...(currentTerm === undefined ? {} : { currentTerm }),
      });
      // Dropped or released meanwhile: the owner no longer listens for renewals.
      if (this.#stopping) return;
      this.#failures = 0;
      this.#emit({
        type: 'renewed',
        record: this.lease.record,
        tookMs: Math.round(clock.monotonicNow() - sentAt),
      });
      if (this.mayWrite()) this.#settleWaiters(undefined);
      this.#scheduleNext();
    } catch (error) {
      if (
        LeaseLostError.isInstance(error) ||
        FencedError.isInstance(error) ||
        this.lease.isLost()
      ) {
        if (this.lease.isLost()) this.#lostReason = error;
        if (this.lease.isLost() && !this.#stopping)
          this.#emit({ type: 'lost', error: error as LeaseError });
        this.#stop();
        return;
      }
      if (this.#stopping) return;
      const retryInMs = this.#retryDelayMs();
      this.#failures += 1;
      this.#emit({
        type: 'renewal-failed',
        error,
        retryInMs,
        writesStopped: !this.lease.mayWrite(),
      });
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
    // After the caller's synchronous part: release() aborts the fence right after stopping.
    if (this.#writableWaiters.size > 0)
      queueMicrotask(() => this.#settleWaiters(this.#stoppedReason()));
  }

  /** Why a stopped keeper may not write (the fence may still carry an older deadline reason). */
  #stoppedReason(): unknown {
    if (this.#drop.signal.aborted) return this.#drop.signal.reason;
    if (this.#lostReason !== undefined) return this.#lostReason;
    return new DOMException(`lease ${this.lease.key} was released`, 'AbortError');
  }

  #releaseKeepAlive(): void {
    if (this.#writableWaiters.size > 0 || this.#keepAlive === undefined) return;
    clearInterval(this.#keepAlive);
    this.#keepAlive = undefined;
  }

  #settleWaiters(rejection: unknown): void {
    const waiters = [...this.#writableWaiters];
    this.#writableWaiters.clear();
    this.#releaseKeepAlive();
    for (const waiter of waiters)
      if (rejection === undefined) waiter.resolve();
      else waiter.reject(rejection);
  }

  #emit(event: LeaseEvent): void {
    if (!this.#options.onEvent) return;
    try {
      this.#options.onEvent(event);
    } catch (error) {
      // A listener's bug must not stop the renew loop; it is reported instead.
      this.#logger.warn('lease.event_listener_failed', { event: event.type, error: String(error) });
    }
  }
}
