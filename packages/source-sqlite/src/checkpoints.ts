/**
 * The tap's own checkpoints (see the module comment of tap.ts): a PASSIVE
 * copy without a lock, and the WAL restart under a brief write lock, maybe
 * followed by a TRUNCATE. A restart needs every frame read first, except
 * that an insisting one reads up to one capture budget of backlog under the
 * lock, a forced one any backlog. The write lock is released with a reader
 * of the tap's held (else an application checkpoint could copy and drop
 * uncaptured frames); when the reader cannot begin again it is released all
 * the same and a {@link SqliteReaderLostError} ends the generation. TRUNCATE
 * runs only with everything copied and the reader at mark 0, so it drops
 * captured frames only. The caller refuses checkpoints while the snapshot is pinned.
 */
import type { DatabaseSync } from 'node:sqlite';
import {
  type CheckpointResult,
  checkpointOn,
  copyUnderWriteLock,
  takeWriteLock,
} from './checkpoint-calls.ts';
import type { CopyProgress } from './copy-progress.ts';
import { type HeldReaders, READER_BUSY_TIMEOUT_MS } from './held-readers.ts';
import { SqliteReaderLostError } from './sqlite-errors.ts';
import type { RestartUrgency, SqliteTapOptions } from './tap-options.ts';
import type { WalCapture } from './wal-capture.ts';
import { WAL_FRAME_HEADER_BYTES } from './wal-file.ts';

/** Tries at a restart with nothing left to copy under the lock before copying under it. */
const RESTART_LOCK_ATTEMPTS = 3;
/**
 * How long a forced restart waits, under the write lock, for a checkpoint of
 * the application's to finish. That checkpoint (SQLite's auto-checkpoint,
 * after a commit) copies the very frames the restart needs copied, tens of
 * thousands of them when the application outruns the tap, which takes
 * longer than the ordinary wait; giving up then would leave the WAL growing.
 */
const FORCED_COPY_WAIT_MS = 500;

export interface CheckpointReport {
  readonly mode: 'passive' | 'truncate';
  /** True when SQLite could not copy everything (readers, or the write lock was busy). */
  readonly busy: boolean;
  /** Frames in the WAL and frames copied into the database, as SQLite answered. */
  readonly walFrames: number;
  readonly checkpointedFrames: number;
  /** The longest the tap held the write lock (truncate mode only; `null` when it never got it). */
  readonly writeLockHeldMs: number | null;
  /** How long the final TRUNCATE checkpoint took (it holds the write lock itself, briefly). */
  readonly truncateMs: number | null;
  /**
   * True when everything was copied into the database file and the tap's
   * reader reads the database file only: the next commit restarts the WAL
   * from its start (truncate mode).
   */
  readonly walRestartable: boolean;
  /** True when the WAL file was emptied (`truncateWalFile`). */
  readonly truncated: boolean;
}

/** What a checkpoint needs from the tap. */
export interface CheckpointContext {
  readonly options: Required<SqliteTapOptions>;
  /** The database's path (named in errors). */
  readonly path?: string;
  readonly readers: HeldReaders;
  /** The tap's writer connection: it only takes the write lock. */
  readonly writer: DatabaseSync;
  readonly capture: WalCapture;
  readonly progress: CopyProgress;
  /** The tap's advance: captures, then moves the held reader when caught up. */
  readonly advance: () => void;
  /** Reads the WAL into the generation's log, at most `budgetBytes` (no file checks). */
  readonly captureIntoLog: (budgetBytes: number) => void;
}

/** The report of a checkpoint refused while the snapshot is pinned. */
export function refusedCheckpoint(
  mode: 'passive' | 'truncate',
  walFrames: number,
): CheckpointReport {
  return reportOf(mode, { busy: 1, log: walFrames, checkpointed: 0 });
}

/** A report of SQLite's answer `copy`: busy unless it copied everything, no restart unless `facts` say so. */
function reportOf(
  mode: 'passive' | 'truncate',
  copy: CheckpointResult,
  facts: Partial<CheckpointReport> = {},
): CheckpointReport {
  return {
    mode,
    busy: copy.busy !== 0 || copy.log !== copy.checkpointed,
    walFrames: copy.log,
    checkpointedFrames: copy.checkpointed,
    writeLockHeldMs: null,
    truncateMs: null,
    walRestartable: false,
    truncated: false,
    ...facts,
  };
}

/**
 * Runs one of the tap's own checkpoints now; the snapshot must not be pinned.
 * `urgency` of a restart: `insist` (the WAL past 1.5 times its threshold)
 * uses the first write lock it gets to the end (see
 * {@link restartUnderWriteLock}), and reads a capture backlog of up to one
 * capture budget under it; `force` (insisting with the capture behind the
 * wal-index's count) does the same with a backlog of any size.
 */
export function runCheckpoint(
  mode: 'passive' | 'truncate',
  context: CheckpointContext,
  urgency: RestartUrgency = 'ordinary',
): CheckpointReport {
  const insist = urgency !== 'ordinary';
  if (mode === 'truncate' && urgency === 'force') return forcedRestart(context);
  context.advance();
  const passive = checkpointOn(context.readers.idle(), 'PASSIVE');
  context.progress.noteCopied(passive, context.capture.walFrames);
  // A restart needs every frame read, else the application waits for the
  // lock while the backlog is read under it: insisting, a backlog of up to
  // one capture budget is read anyway; forced, any backlog (why:
  // docs/decisions/2026-12-06-insistent-and-forced-restarts.md).
  const restartable =
    context.capture.caughtUp ||
    urgency === 'force' ||
    (insist && backlogBytes(context) <= context.options.captureBudgetBytes);
  if (mode === 'passive' || !restartable)
    return reportOf(mode, passive, { busy: passive.busy !== 0 || mode !== 'passive' });
  return finishRestart(
    context,
    restartUnderWriteLock(context, passive, insist ? 1 : RESTART_LOCK_ATTEMPTS),
  );
}

/** The report of a restart, after the TRUNCATE (`truncateWalFile`) and a capture of what landed since. */
function finishRestart(context: CheckpointContext, restart: RestartOutcome): CheckpointReport {
  const { copy, writeLockHeldMs } = restart;
  // Not locked: the application held the write lock for longer than
  // busyTimeoutMs; skip this time, the WAL stays bounded by the next attempt.
  if (!restart.locked)
    return reportOf('truncate', copy, {
      busy: true,
      writeLockHeldMs: writeLockHeldMs === 0 ? null : writeLockHeldMs,
    });
  const walRestartable = copy.busy === 0 && copy.log === copy.checkpointed;
  const truncation = walRestartable && context.options.truncateWalFile ? truncateWal(context) : {};
  context.captureIntoLog(context.options.captureBudgetBytes);
  return reportOf('truncate', copy, { writeLockHeldMs, walRestartable, ...truncation });
}

/**
 * The forced restart: straight for the write lock, without the capture and
 * the copy made first otherwise. Every millisecond before the lock is a
 * hundred more frames from an application that outruns the tap, and the
 * copy under the lock copies them anyway. Under the lock it reads the whole
 * backlog and copies everything (see {@link restartUnderWriteLock}).
 */
function forcedRestart(context: CheckpointContext): CheckpointReport {
  const before = context.capture.readWalIndex();
  const frames = before?.committedFrames ?? context.capture.walFrames;
  const nothingCopied: CheckpointResult = { busy: 1, log: frames, checkpointed: 0 };
  return finishRestart(
    context,
    restartUnderWriteLock(context, nothingCopied, 1, FORCED_COPY_WAIT_MS),
  );
}

/**
 * How a restart ended: `locked` false when the write lock could not be
 * taken (`copy` is then the last copy made without it), else `copy` is the
 * last copy, made under the lock.
 */
interface RestartOutcome {
  readonly locked: boolean;
  readonly copy: CheckpointResult;
  readonly writeLockHeldMs: number;
}

/**
 * The restart, under the write lock, after the PASSIVE copy `passive`, in at
 * most `lockAttempts` takes of the lock. Each take but the last lets go when
 * commits landed since the copy before it; the last reads and copies
 * whatever is left under the lock. A restart that insists takes the lock
 * once: a tap that gets the write lock only now and then would seldom get it
 * that many times in a row (docs/decisions/2026-12-06-insistent-and-forced-restarts.md).
 */
function restartUnderWriteLock(
  context: CheckpointContext,
  passive: CheckpointResult,
  lockAttempts: number,
  copyWaitMs?: number,
): RestartOutcome {
  const { options, readers, writer, capture } = context;
  // While the write lock is held no commit can land,
  // so the capture inside reaches the WAL's true end. When commits landed
  // after the copy just made, copying them under the lock would put a
  // checkpoint's fsyncs inside it: let go, copy them without the lock, and
  // try again; only the last attempt copies under the lock.
  let passiveBefore = passive;
  let last = passive;
  let writeLockHeldMs = 0;
  for (let attempt = 1; ; attempt += 1) {
    if (!takeWriteLock(writer, options.busyTimeoutMs, options.monotonicNow))
      return { locked: false, copy: passiveBefore, writeLockHeldMs };
    const lockedAt = options.monotonicNow();
    let retry = false;
    let failure: { readonly error: unknown } | null = null;
    try {
      // Cheapest first: when the wal-index already counts commits the copy
      // just made did not include, let go at once (an application that
      // meets the held lock sleeps at least 1 ms, so every microsecond it
      // is held counts), before reading anything.
      if (attempt < lockAttempts && !nothingNewSince(capture, passiveBefore)) {
        retry = true;
      } else {
        // Unbounded: the restart below needs every frame read.
        context.captureIntoLog(Number.POSITIVE_INFINITY);
        const copiedAlready =
          passiveBefore.busy === 0 &&
          passiveBefore.checkpointed === passiveBefore.log &&
          capture.walFrames === passiveBefore.log;
        if (!copiedAlready && attempt < lockAttempts) {
          retry = true;
        } else {
          readers.letGo();
          last = copyUnderWriteLock(readers.first, options.monotonicNow, copyWaitMs);
          context.progress.noteCopied(last, context.capture.walFrames);
        }
      }
    } catch (error) {
      failure = { error };
    }
    // Never release the write lock without a reader held: between the two
    // an application checkpoint could copy and drop uncaptured frames. But
    // release it whatever threw: held, every commit of the application's
    // would answer busy until backupd restarts.
    let readerLost: { readonly error: unknown } | null = null;
    try {
      readers.holdAgain();
    } catch (error) {
      readerLost = { error };
    }
    writer.exec('ROLLBACK');
    writeLockHeldMs = Math.max(writeLockHeldMs, options.monotonicNow() - lockedAt);
    // A reader not held again outranks whatever the work under the lock threw.
    if (readerLost !== null)
      throw new SqliteReaderLostError(context.path ?? 'the database', { cause: readerLost.error });
    if (failure !== null) throw failure.error;
    if (!retry) return { locked: true, copy: last, writeLockHeldMs };
    context.advance();
    passiveBefore = checkpointOn(readers.idle(), 'PASSIVE');
    context.progress.noteCopied(passiveBefore, context.capture.walFrames);
  }
}

/** Empties the `-wal` file after a restart that copied everything. */
function truncateWal(context: CheckpointContext): { truncateMs: number; truncated: boolean } {
  const { options } = context;
  // Everything is in the database file and the held reader has mark 0:
  // a TRUNCATE now can only drop captured frames. No busy wait: it holds
  // the write lock while it waits, which would stall the application.
  const other = context.readers.second;
  other.exec('PRAGMA busy_timeout=0');
  const started = options.monotonicNow();
  let truncated = false;
  let truncateMs: number;
  try {
    const result = checkpointOn(other, 'TRUNCATE');
    truncated = result.busy === 0;
  } finally {
    truncateMs = options.monotonicNow() - started;
    other.exec(`PRAGMA busy_timeout=${READER_BUSY_TIMEOUT_MS}`);
  }
  return { truncateMs, truncated };
}

/**
 * True when the wal-index counts no frame past the ones a checkpoint saw,
 * and that checkpoint copied them all (or the index cannot be read: the
 * caller then finds out by capturing).
 */
function nothingNewSince(capture: WalCapture, copy: CheckpointResult): boolean {
  if (copy.busy !== 0 || copy.checkpointed !== copy.log) return false;
  const index = capture.readWalIndex();
  return index === null || index.committedFrames === copy.log;
}

/** WAL bytes the wal-index counts as committed past what was captured (0 when it cannot be read). */
function backlogBytes(context: CheckpointContext): number {
  const index = context.capture.readWalIndex();
  if (index === null) return 0;
  const frames = Math.max(0, index.committedFrames - context.capture.walFrames);
  return frames * (WAL_FRAME_HEADER_BYTES + context.capture.pageSize);
}
