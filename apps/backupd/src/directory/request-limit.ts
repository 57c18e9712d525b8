/**
 * One queue for a directory's requests: at most `max` at once across all
 * its databases, served in the order they were asked for, so a database
 * shipping back to back waits its turn behind the others' uploads instead
 * of filling the store's connections. A lease record (`<prefix>/LEASE`)
 * never waits: a renewal stuck behind uploads could let the lease lapse.
 */
import type { ObjectStore } from '@x/store';
import { ForwardingStore, type StoreOperation } from '@x/store/adapter';

/** Requests a directory has in flight at most. */
export const DEFAULT_MAX_REQUESTS = 32;

/** A first-come, first-served limit on requests in flight. */
export class RequestLimit {
  readonly max: number;
  #inFlight = 0;
  readonly #waiting: (() => void)[] = [];
  #highest = 0;

  constructor(max: number) {
    if (!Number.isInteger(max) || max < 1) throw new RangeError(`max must be ≥ 1, got ${max}`);
    this.max = max;
  }

  /** Requests in flight now. */
  get inFlight(): number {
    return this.#inFlight;
  }

  /** The most that were ever in flight at once. */
  get highest(): number {
    return this.#highest;
  }

  /** Requests waiting for a turn. */
  get waiting(): number {
    return this.#waiting.length;
  }

  /** Resolves when it is this request's turn; the caller then calls `release()` once. */
  async acquire(signal?: AbortSignal): Promise<void> {
    signal?.throwIfAborted();
    if (this.#inFlight < this.max && this.#waiting.length === 0) {
      this.#start();
      return;
    }
    await new Promise<void>((resolve, reject) => {
      const turn = () => {
        signal?.removeEventListener('abort', abandon);
        this.#start();
        resolve();
      };
      const abandon = () => {
        const at = this.#waiting.indexOf(turn);
        if (at !== -1) this.#waiting.splice(at, 1);
        reject(signal?.reason);
      };
      this.#waiting.push(turn);
      signal?.addEventListener('abort', abandon, { once: true });
    });
  }

  release(): void {
    this.#inFlight -= 1;
    const next = this.#waiting.shift();
    next?.();
  }

  #start(): void {
    this.#inFlight += 1;
    if (this.#inFlight > this.#highest) this.#highest = this.#inFlight;
  }
}

/** `inner` with every request but a lease record's taken through `limit`. */
export class LimitedStore extends ForwardingStore {
  readonly #limit: RequestLimit;

  constructor(inner: ObjectStore, limit: RequestLimit) {
    super(inner);
    this.#limit = limit;
  }

  protected override async intercept<T>(
    _operation: StoreOperation,
    key: string,
    signal: AbortSignal | undefined,
    proceed: () => Promise<T>,
  ): Promise<T> {
    if (key === 'LEASE' || key.endsWith('/LEASE')) return proceed();
    await this.#limit.acquire(signal);
    try {
      return await proceed();
    } finally {
      this.#limit.release();
    }
  }
}
