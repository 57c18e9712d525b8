/**
 * The SQLite tap: captures every committed transaction of a live WAL-mode
 * database, written by any process, and keeps SQLite from overwriting a frame
 * before it is captured. SQLite overwrites frames only at a WAL restart, which
 * needs every frame checkpointed and no reader at a mark 1..N; a checkpoint
 * never copies past a live reader's mark, nor anything under mark 0. The tap
 * always holds a reader, moved right after each capture by beginning the new
 * one before ending the old, so a restart can only drop captured frames. Its
 * own checkpoints: checkpoints.ts; the checkpoint lock: checkpoint-hold.ts;
 * closing a database or `-shm` descriptor would drop its read marks, so they
 * stay open (quiet-descriptors.ts). Why, detection, limits: README, _How it works_.
 */
import { fstatSync } from 'node:fs';
import type { DatabaseSync } from 'node:sqlite';
import { CheckpointLockHold, type CheckpointLockState } from './checkpoint-hold.ts';
import { type CheckpointReport, refusedCheckpoint, runCheckpoint } from './checkpoints.ts';
import { encodeCommitFrame } from './commit-record.ts';
import { CopyProgress } from './copy-progress.ts';
import { checkDatabaseUnchanged } from './database-file.ts';
import {
  type Generation,
  releaseSnapshotOf,
  type SnapshotPins,
  type SqliteSnapshot,
  snapshotOf,
  startGenerationUnderReader,
} from './generation.ts';
import type { HeldLogRange } from './held-log.ts';
import { HeldReaders, READER_BUSY_TIMEOUT_MS } from './held-readers.ts';
import { checkDatabaseFile, openTapConnection, openWriterConnection } from './open-database.ts';
import { lockedFileDescriptors, QuietOpener, type SharedDescriptor } from './quiet-descriptors.ts';
import { SqliteReaderLostError } from './sqlite-errors.ts';
import {
  INSISTENT_RESTART_FACTOR,
  type RestartUrgency,
  resolveTapOptions,
  type SqliteTapOptions,
} from './tap-options.ts';
import { WalCapture } from './wal-capture.ts';
import { walCycleId } from './wal-file.ts';

export type { CheckpointReport } from './checkpoints.ts';
export type { SqliteSnapshot } from './generation.ts';
export {
  DEFAULT_CAPTURE_BUDGET_BYTES,
  DEFAULT_MAX_HELD_LOG_BYTES,
  DEFAULT_PASSIVE_CHECKPOINT_PAGES,
  DEFAULT_TRUNCATE_CHECKPOINT_PAGES,
  type SqliteTapOptions,
} from './tap-options.ts';

/**
 * How long no commit may land before the tap lets the checkpoint lock go
 * (see #holdCheckpointLockWhileBusy): a few capture ticks, so that two
 * calls of {@link SqliteTap.maintain} in a row (the timer's and the
 * worker's) do not let it go between two commits.
 */
export const CHECKPOINT_LOCK_QUIET_MS = 250;

/**
 * The WAL size past which an application checkpoints after every commit:
 * SQLite's default auto-checkpoint (`PRAGMA wal_autocheckpoint`, 1000
 * frames). An application's own setting cannot be read from outside it;
 * one set lower only checkpoints more before the tap holds the lock.
 */
export const APPLICATION_AUTO_CHECKPOINT_FRAMES = 1000;

export class SqliteTap {
  readonly path: string;
  readonly walPath: string;
  readonly shmPath: string;
  readonly pageSize: number;
  readonly options: Required<SqliteTapOptions>;

  readonly #readers: HeldReaders;
  readonly #writer: DatabaseSync;
  readonly #identity: { readonly dev: number; readonly ino: number };
  /**
   * Descriptor of the database file, held for the tap's whole life and given
   * back only after its SQLite connections close: closing any descriptor of
   * a file drops every POSIX lock this process holds on it, which would
   * silently end the tap's read transactions, or an embedding application's
   * locks (the registry closes it only when nothing else has the file open).
   */
  readonly #database: SharedDescriptor;
  /**
   * Descriptor of the `-shm` file (SQLite's read marks are locks on it): the
   * capture reads the wal-index through it and the checkpoint-lock hold
   * locks through it. Kept and given back like {@link #database}.
   */
  readonly #shm: SharedDescriptor;
  readonly #checkpointLock: CheckpointLockHold;
  /** Opens the `-wal` file (SQLite keeps no lock on it, so closing is harmless). */
  readonly #opener = new QuietOpener();
  #closed = false;
  /** Set by a restart that could not hold a reader again, until {@link startGeneration}. */
  #readerLost: SqliteReaderLostError | null = null;

  readonly #progress = new CopyProgress();
  readonly #capture: WalCapture;
  #generation: Generation;
  readonly #pins: SnapshotPins = { count: 0 };
  /** True once the reader was moved to mark 0 after the WAL went quiet (see maintain). */
  #settled = false;
  /** {@link capturePoint} at the last {@link maintain}, and when it last changed there (monotonic ms). */
  #capturePointAtLastMaintain = '';
  #lastLandedAt = Number.NEGATIVE_INFINITY;
  readonly #checkpointReports: CheckpointReport[] = [];
  readonly #checkpointCounts = { passive: 0, truncate: 0 };
  #insistentRestarts = 0;
  #forcedRestarts = 0;
  /**
   * The wal-index (salts and committed frames) right after the last restart
   * that left the WAL restartable; see #restartUrgency.
   */
  #restartableAt: string | null = null;

  private constructor(path: string, options: SqliteTapOptions) {
    this.path = path;
    this.walPath = `${path}-wal`;
    this.shmPath = `${path}-shm`;
    this.options = resolveTapOptions(options);
    // What opened so far is closed again when a later step throws (a
    // source retrying a replaced database opens again and again).
    const undo: (() => void)[] = [];
    try {
      this.#database = checkDatabaseFile(path, (at) => lockedFileDescriptors.acquire(at));
      undo.push(() => this.#database.release());
      this.#identity = fstatSync(this.#database.fd);
      this.#writer = openWriterConnection(path, this.options.busyTimeoutMs);
      undo.push(() => this.#writer.close());
      // Beginning a read transaction never waits on writers in WAL mode; the
      // timeout only covers SQLite's own brief WAL-index recovery locks.
      const first = openTapConnection(path, READER_BUSY_TIMEOUT_MS);
      undo.push(() => first.close());
      const second = openTapConnection(path, READER_BUSY_TIMEOUT_MS);
      undo.push(() => second.close());
      this.pageSize = Number(
        (this.#writer.prepare('PRAGMA page_size').get() as { page_size: number }).page_size,
      );
      // From now on the write lock is taken without SQLite's busy handler
      // (see takeWriteLock).
      this.#writer.exec('PRAGMA busy_timeout=0');
      // SQLite created the -shm file when the writer read the schema.
      this.#shm = lockedFileDescriptors.acquire(this.shmPath);
      undo.push(() => this.#shm.release());
      this.#capture = new WalCapture({
        path,
        pageSize: this.pageSize,
        opener: this.#opener,
        wallNow: this.options.wallNow,
        progress: this.#progress,
        keptCommits: () => this.#generation?.log.commits ?? 0,
      });
      undo.push(() => this.#capture.close());
      this.#readers = new HeldReaders([first, second]);
      this.#generation = this.#startGenerationUnderReader();
    } catch (error) {
      for (const step of undo.reverse()) {
        try {
          step();
        } catch {
          // The first error is the one to report.
        }
      }
      throw error;
    }
    this.#checkpointLock = new CheckpointLockHold(
      this.#shm.fd,
      this.options.holdCheckpointLock
        ? this.options.checkpointLockCall()
        : { unavailable: 'turned off (holdCheckpointLock: false)' },
    );
  }

  /**
   * Opens the database and starts the first generation (its snapshot is
   * pinned until {@link releaseSnapshot}). Never creates the database file.
   * @throws SqliteDatabaseMissingError when nothing is at `path`.
   * @throws SqliteOpenRefusedError: `SQLITE_NOT_A_FILE` when `path` is a directory or another
   *   non-file; `SQLITE_NOT_A_DATABASE` when the file lacks SQLite's header magic;
   *   `SQLITE_DATABASE_UNREADABLE` when SQLite cannot read it (corrupt header or schema);
   *   `SQLITE_READ_ONLY_LOCATION` when the files kept beside it cannot be written.
   * @throws SqliteNotWalError when it is a valid database in another journal mode.
   * @throws RangeError for a `maxHeldLogRecords` or `maxPageBaseBytes` out of range (before anything is opened).
   */
  static open(path: string, options: SqliteTapOptions = {}): SqliteTap {
    return new SqliteTap(path, options);
  }

  /** Id of the current generation (random; changes at every new generation). */
  get generationId(): string {
    return this.#generation.id;
  }

  /** Commits captured in the current generation, in its log (not counting an unsealed batch). */
  get commits(): number {
    return this.#generation.log.commits;
  }

  /** Commits captured into the open batch, not yet in the log (0 without one). */
  get batchedCommits(): number {
    return this.#generation.log.batchedCommits;
  }

  /** Log bytes held in memory: captured, not yet released as shipped. */
  get heldLogBytes(): number {
    return this.#generation.log.logEnd - this.#generation.log.logStart;
  }

  /**
   * Ends the open batch (if any): its commits become one record at the end
   * of the log, counted in {@link commits} and {@link logLength}. Called by
   * the owner when it reads the log's end for shipping, so each batch holds
   * what was captured between two such reads.
   */
  sealBatch(): void {
    this.#generation.log.sealBatch();
  }

  /** Log bytes captured in the current generation (offset after the last commit record). */
  get logLength(): number {
    return this.#generation.log.logEnd;
  }

  /** Offset of the first log byte still held in memory. */
  get logStart(): number {
    return this.#generation.log.logStart;
  }

  /** Frames currently in the WAL cycle being read (its size in pages, past its header). */
  get walFrames(): number {
    return this.#capture.walFrames;
  }

  /** True while the generation's snapshot can still be read. */
  get snapshotAvailable(): boolean {
    return this.#generation.snapshotAvailable;
  }

  /** Checkpoints the tap has run since it opened, by mode (busy ones included); never drained. */
  get checkpointCounts(): { readonly passive: number; readonly truncate: number } {
    return { ...this.#checkpointCounts };
  }

  /**
   * Restarts tried with the WAL past {@link INSISTENT_RESTART_FACTOR} times
   * the threshold since the tap opened (see tap-options.ts); never drained.
   */
  get insistentRestarts(): number {
    return this.#insistentRestarts;
  }

  /**
   * Restarts forced (see `RestartUrgency` in tap-options.ts) since the tap
   * opened, a subset of {@link insistentRestarts}; never drained.
   */
  get forcedRestarts(): number {
    return this.#forcedRestarts;
  }

  /**
   * The checkpoint-lock hold (see checkpoint-hold.ts): its state, why it is
   * unavailable (`null` while available), and how many takes got the lock or
   * gave up on another process's checkpoint.
   */
  get checkpointLock(): {
    readonly state: CheckpointLockState;
    readonly unavailableReason: string | null;
    readonly taken: number;
    readonly missed: number;
  } {
    const hold = this.#checkpointLock;
    return { state: hold.state, unavailableReason: hold.unavailableReason, ...hold.counts };
  }

  /** Checkpoint reports since the last call (for metrics and benchmarks). */
  takeCheckpointReports(): CheckpointReport[] {
    return this.#checkpointReports.splice(0);
  }

  /**
   * Starts a new generation: the database as it is now (captured up to the
   * WAL's last commit) becomes the snapshot, the log starts empty. Used after
   * a {@link SqliteWalRestartedUnderneathError}, or when the worker needs a
   * restore point the tap no longer holds.
   */
  startGeneration(): string {
    this.#assertOpen();
    // After a SqliteReaderLostError: the snapshot is read under a reader.
    this.#readers.holdAgain();
    this.#readerLost = null;
    this.#capture.reset();
    this.#generation = this.#startGenerationUnderReader();
    return this.#generation.id;
  }

  /**
   * Reads every new committed transaction from the WAL into the log.
   * Synchronous, so it never interleaves with another call of this tap.
   * @returns the number of commits captured.
   * @throws SqliteDatabaseReplacedError, SqliteWalRestartedUnderneathError,
   *   SqliteCaptureStoppedError (a truncated database; a corrupt frame, after keeping
   *   every valid commit before it).
   */
  capture(): number {
    this.#assertOpen();
    if (this.#readerLost !== null) throw this.#readerLost;
    checkDatabaseUnchanged({
      path: this.path,
      identity: this.#identity,
      pageSize: this.pageSize,
      databasePages: this.#capture.databasePages,
      walPages: this.#capture.walPages,
    });
    return this.#captureIntoLog(this.options.captureBudgetBytes);
  }

  /**
   * Where the capture stands in the WAL: its cycle (the header's salts) and
   * the frames up to its last captured commit. Two equal values bracket no
   * commit: frames only grow within a cycle, and a new cycle has new salts.
   */
  get capturePoint(): string {
    const header = this.#capture.walHeader;
    return `${header === null ? 'none' : walCycleId(header)}:${this.#capture.walFrames}`;
  }

  /**
   * True when the last capture read every frame the WAL index counted as
   * committed (false after one that stopped at its byte budget: call
   * {@link capture} again).
   */
  get caughtUp(): boolean {
    return this.#capture.caughtUp;
  }

  /**
   * Moves the held read transaction to the WAL's current end (capturing
   * first), so checkpoints can copy what was captured. Does nothing while the
   * snapshot is pinned.
   */
  advance(): number {
    const captured = this.capture();
    if (this.#pinned()) return captured;
    // A reader moved past frames not read yet could let a checkpoint copy
    // them and, once it holds read mark 0, a restart overwrite them.
    if (!this.#capture.caughtUp) return captured;
    // Begins the new reader before ending the old one: at no moment is there
    // no reader of the tap's holding the WAL.
    this.#readers.moveForward();
    return captured;
  }

  /**
   * Advances, then checkpoints when the WAL is past a threshold: PASSIVE once
   * `passiveCheckpointPages` frames have landed since the last copy (unless
   * the application copied since the previous call), a
   * restart once the WAL holds `truncateCheckpointPages` frames. Nothing
   * while the snapshot is pinned.
   */
  maintain(): CheckpointReport | null {
    // Forced (an application outrunning the capture): straight for the
    // write lock, before a capture that would let a hundred more frames land
    // each millisecond it takes.
    if (!this.#pinned() && this.#restartUrgency() === 'force') return this.checkpoint('truncate');
    // Moving the reader at every call costs two read transactions and lets
    // an application's FULL/RESTART/TRUNCATE checkpoint (which waits for
    // exactly that) go on at once.
    const captured = this.advance();
    this.#holdCheckpointLockWhileBusy();
    if (this.#pinned()) return null;
    if (captured > 0) this.#settled = false;
    // A capture behind the WAL counts fewer frames than it holds: past the
    // insistent size by the wal-index's count, try the restart anyway (it
    // reads a backlog of up to one capture budget under the write lock).
    if (
      (this.#capture.walFrames >= this.options.truncateCheckpointPages &&
        !this.#restartAlreadyMade()) ||
      (!this.#capture.caughtUp && this.#restartUrgency() !== 'ordinary')
    )
      return this.checkpoint('truncate');
    // An application that checkpoints on its own (SQLite's auto-checkpoint,
    // on by default) copies up to the tap's reader within a commit of each
    // move. A copy of the tap's then runs beside the application's commits,
    // its two fsyncs sharing the disk with theirs, for frames the
    // application copies anyway: leave it to the application while the
    // wal-index shows it copying, and count the threshold from the last copy
    // by anyone. The WAL stays bounded either way: the restart above does not
    // depend on it.
    const walFrames = this.#capture.walFrames;
    const othersCopied = this.#progress.othersCopiedSinceLastLook();
    const copied = this.#progress.copiedOf(walFrames);
    if (!othersCopied && walFrames - copied >= this.options.passiveCheckpointPages)
      return this.checkpoint('passive');
    if (captured === 0 && walFrames > 0 && !this.#settled) {
      // Nothing was committed since the last call: copy what is left and
      // move the reader once more, so it reads the database file only (read
      // mark 0). An application's FULL, RESTART or TRUNCATE checkpoint waits
      // for exactly that, holding the write lock (so nothing commits), and
      // finishes within about two calls instead of running into its busy
      // timeout.
      const report = this.checkpoint('passive');
      if (!report.busy && report.checkpointedFrames === report.walFrames) {
        this.advance();
        this.#settled = true;
      }
      return report;
    }
    return null;
  }

  /**
   * Runs one of the tap's own checkpoints now (see the module comment).
   * Refused (returns a busy report) while the snapshot is pinned.
   */
  checkpoint(mode: 'passive' | 'truncate'): CheckpointReport {
    this.#assertOpen();
    if (this.#pinned()) return this.#report(refusedCheckpoint(mode, this.#capture.walFrames));
    const urgency = mode === 'truncate' ? this.#restartUrgency() : 'ordinary';
    if (urgency !== 'ordinary') this.#insistentRestarts += 1;
    if (urgency === 'force') this.#forcedRestarts += 1;
    // The checkpoint's own unlock, in this process, drops the hold: take it back after.
    const lockWasHeld = this.#checkpointLock.state === 'held';
    try {
      const context = {
        options: this.options,
        path: this.path,
        readers: this.#readers,
        writer: this.#writer,
        capture: this.#capture,
        progress: this.#progress,
        advance: () => this.advance(),
        captureIntoLog: (budgetBytes: number) => this.#captureIntoLog(budgetBytes),
      };
      return this.#report(runCheckpoint(mode, context, urgency));
    } catch (error) {
      // Frames may have gone uncaptured: nothing more is captured into this generation.
      if (SqliteReaderLostError.isInstance(error)) this.#readerLost = error;
      throw error;
    } finally {
      if (lockWasHeld) this.#checkpointLock.take();
    }
  }

  /**
   * The generation's snapshot: the database at the generation's start, page
   * for page. Readable until {@link releaseSnapshot}; `null` after.
   */
  snapshot(): SqliteSnapshot | null {
    this.#assertOpen();
    return snapshotOf(
      this.#generation,
      { path: this.path, databaseFd: this.#database.fd, pageSize: this.pageSize },
      this.#pins,
    );
  }

  /**
   * Lets the generation's snapshot go (it is safely in the bucket): the held
   * reader may move forward and checkpoints may run again.
   */
  releaseSnapshot(): void {
    releaseSnapshotOf(this.#generation);
  }

  /**
   * Log bytes of the current generation in `[start, end)`, whole records
   * only; with `atLeast`, that many records even when they reach past `end`.
   * `crc32` is the CRC-32 of `bytes`, combined from the CRC each record
   * carries in its header (see logCrc32 in commit-record.ts) rather than read again.
   */
  readLog(start: number, end: number, atLeast = 0): HeldLogRange | null {
    return this.#generation.log.read(start, end, atLeast);
  }

  /**
   * Puts one commit record first in the current generation's log: `pages`
   * (page number → bytes) and the database size in pages after it, dated
   * now. For a restart that continues a bucket's generation, the changes
   * the database went through while backupd was not running (see
   * `SqliteSource.continueGeneration`). Only before any log byte was released.
   */
  prependRecord(pages: ReadonlyMap<number, Uint8Array>, databasePages: number): void {
    this.#assertOpen();
    this.#generation.log.prepend(
      encodeCommitFrame({
        pageSize: this.pageSize,
        databasePages,
        commitTime: (this.options.wallNow ?? Date.now)(),
        walSalt1: 0,
        walSalt2: 0,
        commitFrame: 0,
        pages,
      }),
      1,
    );
  }

  /** Drops log bytes before `offset` (they are in the bucket). */
  releaseLog(offset: number): void {
    this.#generation.log.release(offset);
  }

  /**
   * Ends the read transactions and closes the connections. Commits not yet
   * shipped are not shipped after this; the next open starts a new
   * generation whose snapshot holds them. (If these were the last
   * connections to the database, SQLite checkpoints it on close, as always.)
   */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    // The registry may keep the -shm descriptor open: let the lock go first.
    this.#checkpointLock.letGo();
    try {
      this.#readers.close();
    } finally {
      try {
        this.#writer.close();
      } finally {
        // Only now: see #database.
        this.#capture.close();
        this.#database.release();
        this.#shm.release();
      }
    }
  }

  // ---------------------------------------------------------------------------

  #assertOpen(): void {
    if (this.#closed) throw new Error(`the SQLite tap for ${this.path} is closed`);
  }

  /** While a snapshot read runs or the snapshot is kept, the held reader stays where it is. */
  #pinned(): boolean {
    return this.#pins.count > 0 || this.#generation.snapshotAvailable;
  }

  /**
   * Takes the checkpoint lock (checkpoint-hold.ts) once commits land on a WAL
   * of at least {@link APPLICATION_AUTO_CHECKPOINT_FRAMES}, keeps it while
   * they land (across restarts: taking it back often fails), and lets it go
   * after {@link CHECKPOINT_LOCK_QUIET_MS} without one, so a quiet
   * database's own checkpoints run as without the tap.
   */
  #holdCheckpointLockWhileBusy(): void {
    const now = this.options.monotonicNow();
    // Commits landed since the last call, whoever captured them (the owner
    // captures between calls too, so what this call captured would miss them).
    const capturePoint = this.capturePoint;
    if (capturePoint !== this.#capturePointAtLastMaintain) this.#lastLandedAt = now;
    this.#capturePointAtLastMaintain = capturePoint;
    const lock = this.#checkpointLock;
    if (now - this.#lastLandedAt >= CHECKPOINT_LOCK_QUIET_MS) lock.letGo();
    else if (lock.state === 'held' || this.#capture.walFrames >= APPLICATION_AUTO_CHECKPOINT_FRAMES)
      lock.take();
  }

  #report(report: CheckpointReport): CheckpointReport {
    if (report.mode === 'truncate' && report.walRestartable) {
      const index = this.#capture.readWalIndex();
      this.#restartableAt =
        index === null ? null : `${index.salt1}:${index.salt2}:${index.committedFrames}`;
    }
    this.#checkpointReports.push(report);
    this.#checkpointCounts[report.mode] += 1;
    return report;
  }

  /**
   * How hard a restart must try (see `RestartUrgency` in tap-options.ts), by
   * the wal-index's count of this cycle's committed frames (the captured
   * count may still be the previous cycle's, or behind), or the captured
   * count when the index cannot be read.
   */
  #restartUrgency(): RestartUrgency {
    const limit = this.options.truncateCheckpointPages * INSISTENT_RESTART_FACTOR;
    const index = this.#capture.readWalIndex();
    if (index === null) return this.#capture.walFrames >= limit ? 'insist' : 'ordinary';
    if (this.#restartAlreadyMade(index)) return 'ordinary';
    if (index.committedFrames < limit) return 'ordinary';
    // Caught up to the index's count: nothing to read under the lock.
    const header = this.#capture.walHeader;
    const caughtUp =
      header !== null &&
      header.salt1 === index.salt1 &&
      header.salt2 === index.salt2 &&
      this.#capture.walFrames >= index.committedFrames;
    return caughtUp ? 'insist' : 'force';
  }

  /**
   * True when a restart already made the WAL restartable and nothing was
   * committed since (the wal-index unchanged): the next commit starts the
   * WAL over, and taking the write lock again at every tick of an idle
   * database would be for nothing.
   */
  #restartAlreadyMade(index = this.#capture.readWalIndex()): boolean {
    return (
      index !== null &&
      this.#restartableAt === `${index.salt1}:${index.salt2}:${index.committedFrames}`
    );
  }

  #captureIntoLog(budgetBytes: number): number {
    return this.#capture.read(this.#generation.log, budgetBytes);
  }

  #startGenerationUnderReader(): Generation {
    const { path, pageSize, options } = this;
    return startGenerationUnderReader({
      path,
      pageSize,
      options,
      databaseFd: this.#database.fd,
      capture: this.#capture,
    });
  }
}
