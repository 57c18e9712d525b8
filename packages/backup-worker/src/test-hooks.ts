/**
 * Test hooks for a {@link BackupWorker}, kept out of the production class:
 * pass `hooks: new TestHooks()` in the worker's options, then drive it
 * (a crash after some writes, a panic, LIST counts).
 */
import { SimulatedCrashError, WorkerPanicError } from './errors.ts';
import type { WorkerHooks } from './worker-options.ts';

export class TestHooks implements WorkerHooks {
  #writeBudget: number | null = null;
  #panicNext = false;
  #lists = 0;

  /** Allow `n` more requests that change the bucket, then fail each as if the process were killed just before it. */
  failAfterWrites(n: number): void {
    this.#writeBudget = n;
  }

  /** The next step throws {@link WorkerPanicError}, which ends a started worker. */
  panicOnNextStep(): void {
    this.#panicNext = true;
  }

  /** LIST requests made so far. */
  listRequests(): number {
    return this.#lists;
  }

  beforeWrite(): void {
    if (this.#writeBudget === null) return;
    if (this.#writeBudget <= 0) throw new SimulatedCrashError();
    this.#writeBudget -= 1;
  }

  beforeStep(): void {
    if (!this.#panicNext) return;
    this.#panicNext = false;
    throw new WorkerPanicError();
  }

  beforeList(): void {
    this.#lists += 1;
  }
}
