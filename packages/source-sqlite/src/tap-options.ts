/**
 * The tap's options, their defaults, and the options resolved with them.
 * Every option has a default; nothing here is checked against the database
 * (that happens when the tap opens it).
 */
import { type ByteLockLoad, loadByteLockCall } from './checkpoint-hold.ts';

/** Default of `passiveCheckpointPages`. */
export const DEFAULT_PASSIVE_CHECKPOINT_PAGES = 1000;
/** Default of `truncateCheckpointPages`. */
export const DEFAULT_TRUNCATE_CHECKPOINT_PAGES = 10_000;
/**
 * Past this many times `truncateCheckpointPages` (by the wal-index's count)
 * the restart insists (see {@link RestartUrgency}), so the WAL restarts at
 * the first write lock the tap gets, however seldom it gets one.
 */
export const INSISTENT_RESTART_FACTOR = 1.5;
/**
 * How hard a restart tries past {@link INSISTENT_RESTART_FACTOR} times the
 * threshold: `insist` uses the first write lock it gets and reads up to one
 * capture budget of backlog under it; `force` (the capture behind) goes
 * straight for the lock and reads any backlog, which alone bounds the WAL of
 * an application that commits faster than the tap captures. Why:
 * docs/decisions/2026-12-06-insistent-and-forced-restarts.md.
 */
export type RestartUrgency = 'ordinary' | 'insist' | 'force';
/** Default of `captureBudgetBytes`. */
export const DEFAULT_CAPTURE_BUDGET_BYTES = 16 * 1024 * 1024;
/** Default of `maxHeldLogBytes`. */
export const DEFAULT_MAX_HELD_LOG_BYTES = 64 * 1024 * 1024;
/** Default of `maxHeldLogRecords`. */
export const DEFAULT_MAX_HELD_LOG_RECORDS = 16_384;
/** Default of `maxPageBaseBytes`. */
export const DEFAULT_MAX_PAGE_BASE_BYTES = 32 * 1024 * 1024;

export interface SqliteTapOptions {
  /**
   * Frames landed since the last copy (the tap's or the application's) past
   * which the tap runs a PASSIVE checkpoint (no lock), unless the
   * application's own checkpoints copied since the tap's previous call.
   * Default 1000.
   */
  readonly passiveCheckpointPages?: number;
  /**
   * WAL size in frames past which the tap restarts the WAL under a brief write
   * lock (see `truncateWalFile` to also empty the file). Default 10 000
   * (40 MiB at 4 KiB pages). Every restart costs an application that is
   * committing one wait on the write lock (SQLite's busy handler sleeps at
   * least 1 ms), so restarting seldom costs it less than keeping the WAL
   * under SQLite's auto-checkpoint size (1000 pages); past that size the
   * application's own auto-checkpoints copy up to the tap's reader after its
   * commits, as they would without backupd. Past
   * {@link INSISTENT_RESTART_FACTOR} times this size the restart insists
   * (see there).
   */
  readonly truncateCheckpointPages?: number;
  /**
   * After a restart checkpoint, also empty the `-wal` file with a
   * `wal_checkpoint(TRUNCATE)`. Off by default: SQLite reuses the file from
   * its start at the next commit anyway, and the truncate holds the write
   * lock for as long as the filesystem takes to shrink and sync the file,
   * while the restart needs no lock at all.
   */
  readonly truncateWalFile?: boolean;
  /**
   * How long the tap waits for the write lock before skipping a restart until
   * its next tick. Default 50 ms. Short on purpose: while it waits the tap
   * cannot move its reader, and an application's FULL/RESTART/TRUNCATE
   * checkpoint holds the write lock while it waits for exactly that.
   */
  readonly busyTimeoutMs?: number;
  /**
   * Log bytes held in memory (captured, not yet released as shipped) past
   * which newly captured commits are batched: merged into one record of the
   * newest version of each page they wrote, sealed at the next
   * {@link SqliteTap.sealBatch}. Default {@link DEFAULT_MAX_HELD_LOG_BYTES}
   * (64 MiB). Why: against an application committing faster than the bucket
   * takes the log, a batch (at most one version of each page) keeps memory and
   * bytes shipped bounded and loses nothing; only a commit inside a batch is
   * no longer restorable by itself (README, _When the worker falls behind_).
   */
  readonly maxHeldLogBytes?: number;
  /**
   * Records held in memory (captured, not yet released as shipped) past
   * which newly captured commits are batched, as for `maxHeldLogBytes`.
   * Default {@link DEFAULT_MAX_HELD_LOG_RECORDS} (16 384: about where 64 MiB
   * of one-page commits batched before page patches made records small).
   *
   * Why a count as well as bytes: with page patches a small commit's record
   * is a few hundred bytes, so an application committing faster than the
   * worker ships would take hundreds of thousands of records to reach
   * `maxHeldLogBytes`, each encoded, read and checksummed on its own; past
   * this count the tap merges them instead, which is what keeps up.
   */
  readonly maxHeldLogRecords?: number;
  /**
   * Bytes of page versions the tap keeps, per generation, as the bases of
   * page patches: a page the log wrote before, whose version is still kept,
   * is logged as the byte runs that changed (an SBC3 record, see
   * commit-record.ts) instead of whole, so what a commit ships grows with
   * the bytes it changed, not with its pages × the page size. The least
   * recently written pages are dropped first; a page without a kept version
   * is logged whole. Default {@link DEFAULT_MAX_PAGE_BASE_BYTES} (32 MiB:
   * the whole of a database up to that size, the hot pages of a larger
   * one). 0 logs every page whole (records version 1 and 2 only, as
   * releases before patches wrote).
   */
  readonly maxPageBaseBytes?: number;
  /**
   * WAL bytes one {@link SqliteTap.capture} reads at most; the rest is read
   * by the next. Default {@link DEFAULT_CAPTURE_BUDGET_BYTES} (16 MiB).
   * Captures are synchronous: one that read a backlog of hundreds of
   * megabytes whole (an application writing faster than the tap reads)
   * held the event loop for seconds, and the lease renewals with it. The
   * reader is moved, and the WAL restarted, only once a capture has reached
   * the WAL's end (see {@link SqliteTap.caughtUp}), so a bounded capture
   * never lets SQLite overwrite a frame it has not read.
   */
  readonly captureBudgetBytes?: number;
  /**
   * Hold SQLite's checkpoint lock while commits land on a WAL past SQLite's
   * auto-checkpoint size (1000 frames), so the application's own per-commit
   * checkpoints answer busy at once and the tap's are the only ones (see
   * checkpoint-hold.ts; what it saves: README, _The checkpoint lock_).
   * Default `false`: only for a tap in a process of its own
   * (`backupd replicate` turns it on). A POSIX lock never conflicts within
   * its process, so beside an application connection in the same process
   * it would hold nothing back, and its unlock could drop a checkpoint lock
   * that connection holds from another thread. Leave it off, too, for an
   * application that must run its own checkpoints while it writes.
   */
  readonly holdCheckpointLock?: boolean;
  /** How the hold calls `fcntl` (tests only). Default {@link loadByteLockCall}. */
  readonly checkpointLockCall?: () => ByteLockLoad;
  /** Wall clock for commit times (ms since the epoch). Default `Date.now`. */
  readonly wallNow?: () => number;
  /** Monotonic clock (ms) for lock timings. Default `performance.now`. */
  readonly monotonicNow?: () => number;
}

/**
 * `options` with every default filled in.
 * @throws RangeError naming `maxHeldLogRecords` (not a whole number of at
 *   least 1) or `maxPageBaseBytes` (not a whole number of at least 0).
 */
export function resolveTapOptions(options: SqliteTapOptions): Required<SqliteTapOptions> {
  const wholeAtLeast = (value: number | undefined, least: number, rule: string) => {
    if (value !== undefined && !(Number.isSafeInteger(value) && value >= least))
      throw new RangeError(`${rule}, not ${value}`);
  };
  wholeAtLeast(
    options.maxHeldLogRecords,
    1,
    'maxHeldLogRecords must be a whole number of at least 1',
  );
  wholeAtLeast(
    options.maxPageBaseBytes,
    0,
    'maxPageBaseBytes must be a whole number of bytes (0 or more)',
  );
  return {
    passiveCheckpointPages: options.passiveCheckpointPages ?? DEFAULT_PASSIVE_CHECKPOINT_PAGES,
    truncateCheckpointPages: options.truncateCheckpointPages ?? DEFAULT_TRUNCATE_CHECKPOINT_PAGES,
    busyTimeoutMs: options.busyTimeoutMs ?? 50,
    maxHeldLogBytes: options.maxHeldLogBytes ?? DEFAULT_MAX_HELD_LOG_BYTES,
    maxHeldLogRecords: options.maxHeldLogRecords ?? DEFAULT_MAX_HELD_LOG_RECORDS,
    maxPageBaseBytes: options.maxPageBaseBytes ?? DEFAULT_MAX_PAGE_BASE_BYTES,
    captureBudgetBytes: options.captureBudgetBytes ?? DEFAULT_CAPTURE_BUDGET_BYTES,
    truncateWalFile: options.truncateWalFile ?? false,
    holdCheckpointLock: options.holdCheckpointLock ?? false,
    checkpointLockCall: options.checkpointLockCall ?? loadByteLockCall,
    wallNow: options.wallNow ?? Date.now,
    monotonicNow: options.monotonicNow ?? (() => performance.now()),
  };
}
