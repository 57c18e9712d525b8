/**
 * The SQLite calls the tap's checkpoints are made of: a checkpoint on one
 * connection, the write lock tried back to back (SQLite's busy handler
 * mostly misses the gaps between an application's commits), and the
 * restart's last copy, which waits briefly for a checkpoint of another
 * connection's. Each call is bounded in time by the limits named here.
 */
import type { DatabaseSync } from 'node:sqlite';

/** How long a restart, holding the write lock, waits for another connection's checkpoint to end. */
const CHECKPOINT_LOCK_WAIT_MS = 10;
const CHECKPOINT_LOCK_RETRY_MS = 0.05;
/** How long a restart tries the write lock back to back before resting. */
const LOCK_SPIN_MS = 1;
const LOCK_REST_MS = 0.5;
const SQLITE_BUSY = 5;

/** SQLite's answer to `PRAGMA wal_checkpoint`. */
export interface CheckpointResult {
  /** Not 0 when SQLite could not copy everything. */
  readonly busy: number;
  /** Frames in the WAL (-1: the checkpoint lock was busy; nothing was looked at). */
  readonly log: number;
  /** Frames copied into the database file. */
  readonly checkpointed: number;
}

export function checkpointOn(
  connection: DatabaseSync,
  mode: 'PASSIVE' | 'TRUNCATE',
): CheckpointResult {
  const row = connection.prepare(`PRAGMA wal_checkpoint(${mode})`).get() as Record<
    keyof CheckpointResult,
    number
  >;
  return { busy: Number(row.busy), log: Number(row.log), checkpointed: Number(row.checkpointed) };
}

/**
 * Takes the write lock (`BEGIN IMMEDIATE`) on `writer` within `busyTimeoutMs`. An
 * application committing back to back frees the lock only for a few
 * microseconds between two transactions; SQLite's busy handler retries
 * after 1, 2, 5, 10 ms and mostly misses those gaps (the WAL then grows
 * past the threshold until a retry happens to land in one). So the tap
 * tries back to back for {@link LOCK_SPIN_MS}, then rests
 * {@link LOCK_REST_MS}, and again, until the timeout.
 */
export function takeWriteLock(
  writer: DatabaseSync,
  busyTimeoutMs: number,
  monotonicNow: () => number,
): boolean {
  const deadline = monotonicNow() + busyTimeoutMs;
  for (;;) {
    const spinUntil = Math.min(deadline, monotonicNow() + LOCK_SPIN_MS);
    for (;;) {
      try {
        writer.exec('BEGIN IMMEDIATE');
        return true;
      } catch (error) {
        if (!isBusy(error)) throw error;
      }
      if (monotonicNow() >= spinUntil) break;
    }
    if (monotonicNow() >= deadline) return false;
    sleepMs(LOCK_REST_MS);
  }
}

/**
 * The restart's last copy (on `reader`), with the write lock held. An
 * application's auto-checkpoint may be running (SQLite answers a second one
 * busy at once) and cannot last with the lock held, so it is waited for, up
 * to `waitMs`: without the wait, a WAL the application checkpoints after
 * every commit would seldom be restarted.
 */
export function copyUnderWriteLock(
  reader: DatabaseSync,
  monotonicNow: () => number,
  waitMs = CHECKPOINT_LOCK_WAIT_MS,
): CheckpointResult {
  const deadline = monotonicNow() + waitMs;
  for (;;) {
    const copy = checkpointOn(reader, 'PASSIVE');
    // -1: the checkpoint lock was busy; nothing was looked at.
    if (copy.log !== -1 || monotonicNow() >= deadline) return copy;
    sleepMs(CHECKPOINT_LOCK_RETRY_MS);
  }
}

/** True for SQLite's SQLITE_BUSY (and its extended codes) from `node:sqlite`. */
function isBusy(error: unknown): boolean {
  const code = (error as { errcode?: unknown }).errcode;
  return typeof code === 'number' && (code & 0xff) === SQLITE_BUSY;
}

const sleepCell = new Int32Array(new SharedArrayBuffer(4));

/** Blocks the thread for `ms` (SQLite's busy handler blocks it the same way). */
function sleepMs(ms: number): void {
  Atomics.wait(sleepCell, 0, 0, ms);
}
