/**
 * Time, injected. The lease reads two clocks: the wall clock (what it writes
 * into the record and compares with other instances' records) and the
 * monotonic clock (what bounds its own right to write, immune to wall-clock
 * jumps). Timers run on the monotonic clock.
 */
import { refuseUnknownOptions } from './known-options.ts';

export interface Clock {
  /** Wall-clock time, milliseconds since the Unix epoch. May jump either way. */
  wallNow(): number;
  /** Monotonic time in milliseconds from an arbitrary origin. Never goes backwards. */
  monotonicNow(): number;
  /**
   * Calls `callback` once after `ms` milliseconds of monotonic time.
   * @returns a function that cancels the timer (harmless after it fired).
   */
  setTimer(ms: number, callback: () => void): () => void;
}

/**
 * The process's clocks: `Date.now()` and `performance.now()`. Its timers are
 * unref'd, so a forgotten lease does not keep the process alive.
 */
export const systemClock: Clock = {
  wallNow: () => Date.now(),
  monotonicNow: () => performance.now(),
  setTimer(ms, callback) {
    const handle = setTimeout(callback, Math.max(0, ms));
    handle.unref?.();
    return () => clearTimeout(handle);
  },
};

interface FakeTimer {
  readonly id: number;
  readonly due: number;
  readonly callback: () => void;
}

/**
 * A clock for tests: time moves only when told to. `advance` moves both
 * clocks and fires the timers that fall due, each at its own due time, in
 * order; `jumpWall` moves the wall clock alone (a clock step or NTP slew
 * gone wrong). Exported so other packages' tests can drive a lease too.
 */
export class FakeClock implements Clock {
  #wall: number;
  #monotonic: number;
  #timers: FakeTimer[] = [];
  #nextId = 0;

  /** Defaults: wall 2026-01-01T00:00:00Z, monotonic 1 000 000 ms. */
  constructor(start: { wallMs?: number; monotonicMs?: number } = {}) {
    refuseUnknownOptions(start, ['wallMs', 'monotonicMs'], 'new FakeClock');
    this.#wall = start.wallMs ?? Date.UTC(2026, 0, 1);
    this.#monotonic = start.monotonicMs ?? 1_000_000;
  }

  wallNow(): number {
    return this.#wall;
  }

  monotonicNow(): number {
    return this.#monotonic;
  }

  setTimer(ms: number, callback: () => void): () => void {
    const timer: FakeTimer = {
      id: this.#nextId++,
      due: this.#monotonic + Math.max(0, ms),
      callback,
    };
    this.#timers.push(timer);
    return () => {
      this.#timers = this.#timers.filter((t) => t !== timer);
    };
  }

  /**
   * Moves both clocks forward by `ms`, firing due timers in due order (ties
   * in the order they were set). A timer set by a callback fires in the same
   * call if it falls due within the advance.
   */
  advance(ms: number): void {
    if (!(ms >= 0)) throw new RangeError('FakeClock.advance: ms must be >= 0');
    const target = this.#monotonic + ms;
    for (;;) {
      const next = this.#earliestDue(target);
      if (!next) break;
      this.#timers = this.#timers.filter((t) => t !== next);
      this.#wall += next.due - this.#monotonic;
      this.#monotonic = next.due;
      next.callback();
    }
    this.#wall += target - this.#monotonic;
    this.#monotonic = target;
  }

  /** Moves the wall clock alone, forward (positive) or backward (negative). */
  jumpWall(ms: number): void {
    this.#wall += ms;
  }

  /** How many timers are waiting (for tests that check a loop stopped). */
  pendingTimers(): number {
    return this.#timers.length;
  }

  #earliestDue(limit: number): FakeTimer | undefined {
    let best: FakeTimer | undefined;
    for (const timer of this.#timers) {
      if (timer.due > limit) continue;
      if (!best || timer.due < best.due || (timer.due === best.due && timer.id < best.id))
        best = timer;
    }
    return best;
  }
}
