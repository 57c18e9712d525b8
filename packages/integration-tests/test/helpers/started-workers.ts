/**
 * The setup the lease, source and health tests share: a temporary directory
 * with a framed test engine in it (three commits unless told otherwise), one
 * fake clock, and the workers started on them, each stopped by driving that
 * clock until its shutdown ends.
 *
 * Only the clock, the framed source on the directory (unless the options name
 * `source` or `openSource`) and a restore point at every step
 * (`manifestIntervalMs: 0`) are filled in; every timing a test reasons about
 * (lease TTL, WAL interval, operation deadline, shutdown grace) is the
 * caller's to give.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type BackupHandle, BackupWorker, type BackupWorkerOptions } from '@x/backup-worker';
import { FakeClock } from '@x/lease';
import { FramedDirSource } from '@x/source-framed';
import type { ObjectStore } from '@x/store';
import { waitFor } from './drive.ts';
import { FramedTestEngine } from './framed-engine.ts';

/** What a test gives for one worker: everything but the store and the shared clock. */
export type WorkerOptions = Omit<BackupWorkerOptions, 'store' | 'clock'>;

/** How long to drive the fake clock for a shutdown, in which steps, named how when it times out (see `waitFor`). */
export interface ShutdownWait {
  readonly stepMs?: number;
  readonly maxMs?: number;
  /** Default `shutdown`. */
  readonly what?: string;
}

export class StartedWorkers {
  readonly directory: string;
  readonly engine: FramedTestEngine;
  readonly clock = new FakeClock();
  /** Started by `start` and not yet stopped, in the order started. */
  readonly #handles: BackupHandle[] = [];

  private constructor(directory: string, engine: FramedTestEngine) {
    this.directory = directory;
    this.engine = engine;
  }

  /**
   * A fresh temporary directory named from `name`, with an engine that has
   * made `commits` commits (default 3).
   */
  static async create(name: string, options: { commits?: number } = {}): Promise<StartedWorkers> {
    const directory = await mkdtemp(join(tmpdir(), name));
    const engine = await FramedTestEngine.create(directory);
    await engine.commit(options.commits ?? 3);
    return new StartedWorkers(directory, engine);
  }

  /** A worker on `store` and this clock, not started (for tests that step it by hand). */
  worker(store: ObjectStore, options: WorkerOptions): BackupWorker {
    const source =
      options.source === undefined && options.openSource === undefined
        ? { source: new FramedDirSource({ directory: this.directory, engine: this.engine }) }
        : {};
    return new BackupWorker({
      store,
      clock: this.clock,
      manifestIntervalMs: 0,
      ...source,
      ...options,
    });
  }

  /** Starts a worker; `stopAll` (or `stop`) shuts it down. */
  start(
    store: ObjectStore,
    options: WorkerOptions,
  ): { worker: BackupWorker; handle: BackupHandle } {
    const worker = this.worker(store, options);
    const handle = worker.start();
    this.#handles.push(handle);
    return { worker, handle };
  }

  /**
   * Shuts `handle` down, advancing the fake clock until it has; resolves to
   * the fake milliseconds that took (a multiple of the step).
   */
  async stop(handle: BackupHandle, wait: ShutdownWait = {}): Promise<number> {
    const index = this.#handles.indexOf(handle);
    if (index !== -1) this.#handles.splice(index, 1);
    let stopped = false;
    void handle.shutdown().then(() => {
      stopped = true;
    });
    return waitFor(this.clock, () => stopped, { what: 'shutdown', ...wait });
  }

  /** Stops every started worker still running, one after another in the order started. */
  async stopAll(wait: ShutdownWait = {}): Promise<void> {
    for (const handle of [...this.#handles]) await this.stop(handle, wait);
  }

  /** `stopAll`, then removes the directory. */
  async dispose(wait: ShutdownWait = {}): Promise<void> {
    await this.stopAll(wait);
    await rm(this.directory, { recursive: true, force: true });
  }
}
