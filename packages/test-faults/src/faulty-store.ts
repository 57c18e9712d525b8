/**
 * An `ObjectStore` wrapper that injects the proxy's fault kinds at the store
 * level, for unit tests that need failures without a network.
 *
 * Each call (in the order calls are made) asks the seeded schedule what to do
 * (see `schedule.ts`; rules match operation names and keys):
 * - `latency`: waits on the injected clock, then proceeds;
 * - `reset`: `StoreError` (connection reset); the inner store is not called;
 * - `error500`, `error503`: `StoreError` naming the status; not called;
 * - `conflict`: `ConflictError`; not called;
 * - `lostResponse`: the inner store IS called (and its effect stays), then
 *   the call fails with a `StoreError` (the answer timed out), whatever the
 *   inner store answered;
 * - `stall`: `getStream`'s body stops for `stallMs` after `stallAfterBytes`;
 *   any other call is applied and its answer held back for `stallMs`;
 * - `partition`: this call and every call until the partition ends hang;
 *   they reject with the caller's signal's reason when it fires, or with a
 *   `StoreError` (connection dropped, nothing applied) when the partition ends.
 *
 * Every made-up error has an `InjectedFaultError` as its `cause`. Every wait
 * is on the injected clock and honours the call's signal, so tests never sleep.
 */
import { ConflictError, type GetStreamResult, type ObjectStore, StoreError } from '@x/store';
import { ForwardingStore, type StoreOperation as ObjectStoreOperation } from '@x/store/adapter';
import { type FaultClock, systemFaultClock } from './clock.ts';
import { InjectedFaultError } from './injected-fault.ts';
import {
  emptyCounts,
  type FaultCounts,
  type FaultEvent,
  type FaultKind,
  type FaultSchedule,
  FaultScheduleError,
  ScheduleRunner,
} from './schedule.ts';

/**
 * The operation names a rule's `methods` can list for the store wrapper.
 * Each page request of `listPages` is a `list`, as it is one list request
 * to a service.
 */
export type StoreOperation = 'get' | 'getStream' | 'head' | 'put' | 'delete' | 'list' | 'upload';

export interface FaultyStoreOptions {
  readonly schedule: FaultSchedule;
  /** Integer; the same seed and call order give the same faults. */
  readonly seed: number;
  /** Time for latency, stalls and partitions. Default: real time. */
  readonly clock?: FaultClock;
}

export interface FaultyStore extends ObjectStore {
  /** Faults injected so far, by kind. */
  counts(): FaultCounts;
  /** Every fault injected so far, in order (times are `Date.now()`). */
  faults(): readonly FaultEvent[];
  /** How many calls arrived so far. */
  requests(): number;
  /**
   * Starts (or moves the end of) a partition until `untilMs` on the clock's
   * `monotonicNow()` scale (`Infinity`: until further notice); `false` ends it
   * now, failing every hung call with a `StoreError`.
   */
  setPartition(untilMs: number | false): void;
  /** `setPartition(clock.monotonicNow() + durationMs)`. */
  partitionFor(durationMs: number): void;
  partitioned(): boolean;
  /** Replaces the schedule; every rule's match count starts again. */
  setSchedule(schedule: FaultSchedule): void;
}

function injected(kind: FaultKind, message: string): InjectedFaultError {
  return new InjectedFaultError(kind, `injected fault: ${message}`);
}

function sleepOn(clock: FaultClock, ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      cancel();
      reject(signal?.reason);
    };
    const cancel = clock.setTimer(ms, () => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    });
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

interface HungCall {
  readonly fail: (error: unknown) => void;
}

/** Every call of every method passes `intercept`, so none escapes the schedule. */
class FaultyStoreImplementation extends ForwardingStore implements FaultyStore {
  readonly #runner: ScheduleRunner;
  readonly #clock: FaultClock;
  readonly #counts = emptyCounts();
  readonly #faults: FaultEvent[] = [];
  readonly #hung = new Set<HungCall>();
  #requests = 0;
  #partitionUntil = Number.NEGATIVE_INFINITY;
  #cancelPartitionTimer: (() => void) | undefined;

  constructor(inner: ObjectStore, options: FaultyStoreOptions) {
    super(inner, { description: `${inner.description} (with injected faults)` });
    this.#runner = new ScheduleRunner(options.schedule, options.seed, {
      caseInsensitiveMethods: false,
    });
    this.#clock = options.clock ?? systemFaultClock;
  }

  counts(): FaultCounts {
    return { ...this.#counts };
  }

  faults(): readonly FaultEvent[] {
    return [...this.#faults];
  }

  requests(): number {
    return this.#requests;
  }

  partitioned(): boolean {
    return this.#clock.monotonicNow() < this.#partitionUntil;
  }

  setSchedule(schedule: FaultSchedule): void {
    this.#runner.replace(schedule);
  }

  partitionFor(durationMs: number): void {
    this.setPartition(this.#clock.monotonicNow() + durationMs);
  }

  setPartition(untilMs: number | false): void {
    if (untilMs !== false && (typeof untilMs !== 'number' || Number.isNaN(untilMs))) {
      throw new FaultScheduleError('setPartition takes a time in ms (clock scale) or false');
    }
    this.#partitionUntil = untilMs === false ? Number.NEGATIVE_INFINITY : untilMs;
    this.#schedulePartitionEnd();
  }

  #schedulePartitionEnd(): void {
    this.#cancelPartitionTimer?.();
    this.#cancelPartitionTimer = undefined;
    const remaining = this.#partitionUntil - this.#clock.monotonicNow();
    if (remaining <= 0) {
      this.#partitionUntil = Number.NEGATIVE_INFINITY;
      for (const call of this.#hung) {
        call.fail(
          new StoreError('the connection dropped when the partition ended; nothing was applied', {
            cause: injected('partition', 'the call was held by a partition'),
          }),
        );
      }
      this.#hung.clear();
      return;
    }
    if (Number.isFinite(remaining)) {
      this.#cancelPartitionTimer = this.#clock.setTimer(remaining, () =>
        this.#schedulePartitionEnd(),
      );
    }
  }

  #record(
    sequence: number,
    kind: FaultKind,
    method: string,
    path: string,
    rule: number,
    ms?: number,
  ) {
    this.#counts[kind] += 1;
    this.#faults.push(
      ms === undefined || !Number.isFinite(ms)
        ? { request: sequence, time: Date.now(), kind, method, path, rule }
        : { request: sequence, time: Date.now(), kind, method, path, rule, ms },
    );
  }

  /** Hangs until the partition ends (StoreError) or the signal fires (its reason). */
  #hang(signal: AbortSignal | undefined): Promise<never> {
    return new Promise<never>((_resolve, reject) => {
      if (signal?.aborted) {
        reject(signal.reason);
        return;
      }
      const call: HungCall = {
        fail: (error) => {
          signal?.removeEventListener('abort', onAbort);
          reject(error);
        },
      };
      const onAbort = () => {
        this.#hung.delete(call);
        reject(signal?.reason);
      };
      this.#hung.add(call);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  async #run<T>(
    operation: StoreOperation,
    key: string,
    signal: AbortSignal | undefined,
    call: () => Promise<T>,
    stallResult?: (result: T, stallMs: number, stallAfterBytes: number) => T,
  ): Promise<T> {
    signal?.throwIfAborted();
    const sequence = ++this.#requests;
    if (this.partitioned()) {
      this.#record(sequence, 'partition', operation, key, -1);
      return this.#hang(signal);
    }
    const decision = this.#runner.decide(operation, key);
    for (const latency of decision.latencies) {
      this.#record(sequence, 'latency', operation, key, latency.rule, latency.ms);
    }
    if (decision.latencyMs > 0) {
      await sleepOn(this.#clock, decision.latencyMs, signal);
      if (this.partitioned()) {
        this.#record(sequence, 'partition', operation, key, -1);
        return this.#hang(signal);
      }
    }
    const fault = decision.fault;
    const where = `${operation} ${key}`;
    switch (fault?.kind) {
      case undefined:
        return call();
      case 'reset':
        this.#record(sequence, 'reset', operation, key, fault.rule);
        throw new StoreError(`${where}: connection reset before an answer`, {
          key,
          cause: injected('reset', 'connection reset'),
        });
      case 'error500':
        this.#record(sequence, 'error500', operation, key, fault.rule);
        throw new StoreError(`${where}: the service answered 500 Internal Server Error`, {
          key,
          cause: injected('error500', 'answer 500'),
        });
      case 'error503':
        this.#record(sequence, 'error503', operation, key, fault.rule);
        throw new StoreError(`${where}: the service answered 503 Service Unavailable`, {
          key,
          cause: injected('error503', 'answer 503'),
        });
      case 'conflict':
        this.#record(sequence, 'conflict', operation, key, fault.rule);
        throw new ConflictError(key, { cause: injected('conflict', 'answer 409') });
      case 'partition':
        this.#record(sequence, 'partition', operation, key, fault.rule, fault.durationMs);
        this.partitionFor(fault.durationMs);
        return this.#hang(signal);
      case 'lostResponse':
        try {
          await call();
        } catch {
          // The caller never sees the inner answer, success or failure: that
          // is the fault. Whatever the inner store did, it did.
        }
        this.#record(sequence, 'lostResponse', operation, key, fault.rule);
        throw new StoreError(
          `${where}: no answer before the timeout (the request may have been applied)`,
          {
            key,
            cause: injected('lostResponse', 'the answer was lost'),
          },
        );
      case 'stall': {
        const result = await call();
        this.#record(sequence, 'stall', operation, key, fault.rule, fault.stallMs);
        if (stallResult !== undefined) {
          return stallResult(result, fault.stallMs, fault.stallAfterBytes);
        }
        await sleepOn(this.#clock, fault.stallMs, signal);
        return result;
      }
    }
  }

  protected override intercept<T>(
    operation: ObjectStoreOperation,
    key: string,
    signal: AbortSignal | undefined,
    proceed: () => Promise<T>,
  ): Promise<T> {
    if (operation === 'getStream') {
      const clock = this.#clock;
      // A stalled download answers at once and holds its body back.
      const stalled = (result: T, stallMs: number, stallAfterBytes: number): T => {
        const stream = result as GetStreamResult | null;
        return (
          stream === null
            ? null
            : { ...stream, body: stalledBody(stream.body, stallAfterBytes, stallMs, clock, signal) }
        ) as T;
      };
      return this.#run('getStream', key, signal, proceed, stalled);
    }
    // A page is a listing request; a batch delete is a delete request.
    const faultAs =
      operation === 'listPages' ? 'list' : operation === 'deleteMany' ? 'delete' : operation;
    return this.#run(faultAs, key, signal, proceed);
  }
}

async function* stalledBody(
  body: AsyncIterable<Uint8Array>,
  afterBytes: number,
  stallMs: number,
  clock: FaultClock,
  signal: AbortSignal | undefined,
): AsyncIterable<Uint8Array> {
  let delivered = 0;
  let stalled = false;
  for await (const chunk of body) {
    if (!stalled && delivered + chunk.byteLength >= afterBytes) {
      const head = chunk.subarray(0, afterBytes - delivered);
      if (head.byteLength > 0) yield head;
      stalled = true;
      await sleepOn(clock, stallMs, signal);
      const rest = chunk.subarray(head.byteLength);
      if (rest.byteLength > 0) yield rest;
    } else {
      yield chunk;
    }
    delivered += chunk.byteLength;
  }
  if (!stalled) await sleepOn(clock, stallMs, signal);
}

/**
 * Wraps `inner` so that calls fail, wait or hang as the seeded schedule says.
 * @throws FaultScheduleError for a bad seed or schedule.
 */
export function faultyStore(inner: ObjectStore, options: FaultyStoreOptions): FaultyStore {
  return new FaultyStoreImplementation(inner, options);
}
