/**
 * What the worker's parts call back into the worker for: one object the
 * worker builds once; each part takes the members it uses.
 */
export interface WorkerCallbacks {
  /** The signal a shutdown aborts, read at every use (it is replaced after an abandoned step). */
  runSignal(): AbortSignal;
  /**
   * The fence a write runs under: `null` without a lease (`runOnce`, tests);
   * throws a `WRITE_FENCED` `BackupError` when writes are stopped.
   */
  writeFence(): AbortSignal | null;
  /** A refused write: another writer is active. Drops the lease; returns the error to throw. */
  conflict(what: string, key?: string, cause?: unknown): Error;
  /** Whether the worker was started (only then may a failed acquisition have left a record). */
  started(): boolean;
  /** Counts a failed lease attempt; returns the back-off to wait. */
  leaseFailed(error: unknown): number;
  /** A new tenure begins (the lease was taken again): forget what was known about the bucket. */
  newTenure(): void;
  /** Why this step defers (not a failure). */
  defer(why: string): void;
  /** A `.seg` segment was stored: its key and stored bytes (a compaction may merge it). */
  segmentStored(key: string, bytes: Uint8Array): void;
}
