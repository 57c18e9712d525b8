/**
 * The triggers of a started worker: the wait between steps, which a trigger
 * ends early, and the shutdown request. A trigger that arrives while no wait
 * is pending (a step runs) makes the next wait end at once, so none is lost.
 * Waits run on the injected clock.
 */
import type { Clock } from '@x/lease';

export class Triggers {
  readonly #clock: Clock;
  #wake: (() => void) | null = null;
  #triggered = false;
  #shutdownRequested = false;
  #resolveShutdown: () => void = () => {};
  /** Resolves when a shutdown is requested. */
  readonly shutdownSignal: Promise<void>;

  constructor(clock: Clock) {
    this.#clock = clock;
    this.shutdownSignal = new Promise<void>((resolve) => {
      this.#resolveShutdown = resolve;
    });
  }

  get shutdownRequested(): boolean {
    return this.#shutdownRequested;
  }

  /** `snapshot`: end the current (or next) wait. `shutdown`: that, and request the shutdown. */
  trigger(kind: 'snapshot' | 'shutdown'): void {
    if (kind === 'shutdown' && !this.#shutdownRequested) {
      this.#shutdownRequested = true;
      this.#resolveShutdown();
    }
    if (this.#wake) this.#wake();
    else this.#triggered = true;
  }

  /** Waits `ms`, or until a trigger (at once if one arrived since the last wait). */
  sleep(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      if (this.#triggered) {
        this.#triggered = false;
        resolve();
        return;
      }
      const cancel = this.#clock.setTimer(ms, () => {
        this.#wake = null;
        resolve();
      });
      this.#wake = () => {
        cancel();
        this.#wake = null;
        resolve();
      };
    });
  }
}
