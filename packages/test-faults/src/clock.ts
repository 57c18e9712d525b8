/**
 * The time source of the store wrapper. Its shape matches `@x/lease`'s
 * `Clock` (`monotonicNow`, `setTimer`), so the lease's `FakeClock` can drive
 * the wrapper and the lease together.
 */
export interface FaultClock {
  /** Milliseconds on a clock that never goes back. */
  monotonicNow(): number;
  /** Calls `callback` once after `ms`; returns a function that cancels it. */
  setTimer(ms: number, callback: () => void): () => void;
}

/** Real time: `performance.now()` and `setTimeout`. */
export const systemFaultClock: FaultClock = {
  monotonicNow: () => performance.now(),
  setTimer: (ms, callback) => {
    const timer = setTimeout(callback, ms);
    return () => clearTimeout(timer);
  },
};

interface Timer {
  readonly at: number;
  readonly order: number;
  readonly callback: () => void;
}

/**
 * A clock that moves only when told, for tests that must not sleep. Timers
 * due at the same time fire in the order they were set.
 */
export class ManualClock implements FaultClock {
  #now: number;
  #order = 0;
  #timers: Timer[] = [];

  constructor(startMs = 0) {
    this.#now = startMs;
  }

  monotonicNow(): number {
    return this.#now;
  }

  setTimer(ms: number, callback: () => void): () => void {
    const timer: Timer = { at: this.#now + Math.max(0, ms), order: this.#order++, callback };
    this.#timers.push(timer);
    return () => {
      this.#timers = this.#timers.filter((candidate) => candidate !== timer);
    };
  }

  /** Timers set and not yet fired or cancelled. */
  pendingTimers(): number {
    return this.#timers.length;
  }

  /** Moves time forward by `ms`, firing every timer that falls due, in time order. */
  advance(ms: number): void {
    const end = this.#now + ms;
    for (;;) {
      const due = this.#timers
        .filter((timer) => timer.at <= end)
        .sort((a, b) => a.at - b.at || a.order - b.order)[0];
      if (due === undefined) break;
      this.#timers = this.#timers.filter((timer) => timer !== due);
      this.#now = Math.max(this.#now, due.at);
      due.callback();
    }
    this.#now = end;
  }

  /**
   * Lets pending promise callbacks run (so calls in flight reach their
   * timers), advances by `ms`, and lets the woken callbacks run.
   */
  async tick(ms: number): Promise<void> {
    await settle();
    this.advance(ms);
    await settle();
  }
}

/** Resolves after the microtasks and I/O callbacks already queued have run. */
export function settle(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
