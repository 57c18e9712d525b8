/**
 * One limit on a directory's requests: at most `max` at once across all its
 * databases. A turn that frees goes to the next database in rotation, each
 * database's own requests in the order it asked, so a database shipping back
 * to back gets one turn in as many as there are databases waiting instead
 * of holding the store's connections. A lease record (`<prefix>/LEASE`)
 * never waits: a renewal stuck behind uploads could let the lease lapse.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { ObjectStore } from '@x/store';
import { ForwardingStore, type StoreOperation } from '@x/store/adapter';

/**
 * Whose requests run in this asynchronous context: a directory runs each
 * database's worker inside `requestOwner.run(database, …)`, so every request
 * of that worker shares one place in the rotation.
 */
export const requestOwner = new AsyncLocalStorage<object>();

/** Requests a directory has in flight at most. */
export const DEFAULT_MAX_REQUESTS = 32;

/** A limit on requests in flight, turns shared round-robin among their owners. */
export class RequestLimit {
  readonly max: number;
  #inFlight = 0;
  #waitingCount = 0;
  /** Owners with requests waiting, in rotation order; each owner's turns first-come first-served. */
  readonly #waiting = new Map<object, (() => void)[]>();
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
    return this.#waitingCount;
  }

  /** Resolves when it is this request of `owner`'s turn; the caller then calls `release()` once. */
  async acquire(owner: object, signal?: AbortSignal): Promise<void> {
    signal?.throwIfAborted();
    if (this.#inFlight < this.max && this.#waitingCount === 0) {
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
        const turns = this.#waiting.get(owner);
        const at = turns?.indexOf(turn) ?? -1;
        if (turns !== undefined && at !== -1) {
          turns.splice(at, 1);
          this.#waitingCount -= 1;
          if (turns.length === 0) this.#waiting.delete(owner);
        }
        reject(signal?.reason);
      };
      const turns = this.#waiting.get(owner);
      if (turns === undefined) this.#waiting.set(owner, [turn]);
      else turns.push(turn);
      this.#waitingCount += 1;
      signal?.addEventListener('abort', abandon, { once: true });
    });
  }

  release(): void {
    this.#inFlight -= 1;
    this.#nextTurn()?.();
  }

  /** The first waiting turn of the owner first in rotation; that owner goes to the back. */
  #nextTurn(): (() => void) | undefined {
    const first = this.#waiting.entries().next();
    if (first.done) return undefined;
    const [owner, turns] = first.value;
    const turn = turns.shift();
    this.#waiting.delete(owner);
    if (turns.length > 0) this.#waiting.set(owner, turns);
    this.#waitingCount -= 1;
    return turn;
  }

  #start(): void {
    this.#inFlight += 1;
    if (this.#inFlight > this.#highest) this.#highest = this.#inFlight;
  }
}

/**
 * `inner` with every request but a lease record's taken through `limit`,
 * each as its {@link requestOwner}'s (this store's own, outside any).
 */
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
    await this.#limit.acquire(requestOwner.getStore() ?? this, signal);
    try {
      return await proceed();
    } finally {
      this.#limit.release();
    }
  }
}
