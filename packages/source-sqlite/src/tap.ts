/**
 * The SQLite tap: captures every committed transaction of a live SQLite
 * database in WAL mode, written by any process with any SQLite library, and
 * keeps SQLite from overwriting a WAL frame before it has been captured.
 *
 * # How SQLite could lose frames for us, and why it cannot
 *
 * SQLite overwrites WAL frames only when it restarts the WAL (a writer starting
 * over at the beginning of the file, or a TRUNCATE checkpoint). A restart
 * needs every frame checkpointed into the database file, and no reader holding
 * one of the read marks 1..N. A checkpoint never copies a frame past the mark
 * of a live reader, and copies nothing at all while a reader holds read mark 0
 * (the mark a reader gets when the WAL was completely checkpointed when it
 * began: it reads the database file only).
 *
 * The tap holds a read transaction at all times, on one of two connections,
 * and moves it forward by beginning the new one before ending the old one,
 * each time right after a capture. So:
 * - while the held reader has a mark ≥ 1, no restart can happen at all;
 * - a reader gets mark 0 only when everything is checkpointed, and a
 *   checkpoint could only have reached frames at or below the previous
 *   reader's mark, which the capture before it had already read;
 * - while it holds mark 0 nothing can be checkpointed, so the only WAL that can
 *   be restarted is one whose every frame was captured.
 * Measured with `node:sqlite` (see the README): with a reader held, another
 * connection's `wal_checkpoint(TRUNCATE)` answers busy, copies only up to the
 * reader's mark and keeps the WAL's salts; with a mark-0 reader it copies
 * nothing new. The application's checkpoints, in any mode and at any rate,
 * therefore never cost a commit.
 *
 * # The tap's own checkpoints
 *
 * Without help the WAL would only restart when the application pauses, so
 * the tap checkpoints itself: PASSIVE once `passiveCheckpointPages` frames
 * landed since the last copy (no lock: it copies up to the held reader's
 * mark; one copy per that many frames, not one per tick, since each copy
 * costs two fsyncs that share the disk with the application's; and none
 * while the wal-index shows the application's own checkpoints copying up to
 * the reader, see maintain), and past `truncateCheckpointPages` a restart
 * under a brief write lock: it takes the write lock
 * (`BEGIN IMMEDIATE`, so no commit can land), captures the last frames, ends
 * its reader, runs a PASSIVE checkpoint of what is left (most was copied just
 * before, without the lock), begins a new reader (mark 0 when everything was
 * copied) and releases the lock; the next commit starts the WAL over. The
 * lock is tried back to back rather than through SQLite's busy handler (an
 * application committing back to back frees it only for microseconds), and
 * the copy under it waits for a checkpoint of the application's that may be
 * running at that moment (SQLite runs one at a time and would answer busy). With
 * `truncateWalFile`, a TRUNCATE checkpoint with no busy wait then empties the
 * file; the mark-0 reader makes sure it can only drop frames that were
 * captured. The tap never writes to the database and creates no tables in it.
 *
 * The tap keeps its own descriptors of the database and `-shm` files open
 * for its whole life: POSIX locks belong to a process and a file, so closing
 * any descriptor of those files would silently drop SQLite's read marks.
 *
 * # What is detected
 *
 * - `journal_mode` not WAL: {@link SqliteNotWalError} at open; never switched.
 *   Before it, open names the other causes with their own errors (missing
 *   file, directory, not SQLite's header magic, corrupt header, read-only
 *   location) and never creates a missing database file.
 * - The WAL restarted in a way SQLite's own restarts cannot explain (its
 *   checkpoint sequence and salt-1 must advance together):
 *   {@link SqliteWalRestartedUnderneathError}; the owner starts a new generation.
 * - The database file replaced (another inode at the path):
 *   {@link SqliteDatabaseReplacedError}; the owner reopens.
 * - The database file truncated below the size its header records:
 *   {@link SqliteDatabaseTruncatedError}.
 * - A committed frame failing its checksum (the wal-index counts frames past
 *   it): {@link SqliteCorruptWalFrameError}, after keeping every commit before it.
 *
 * # Limits
 *
 * - Same machine only (the read marks live in the `-shm` shared memory) and
 *   the unix VFS; not `locking_mode=EXCLUSIVE` databases.
 * - Commit times are the wall-clock time the tap first saw a commit (SQLite
 *   records none), so they trail the real commit by up to one capture interval.
 * - A crash of the tap ends its read transaction; commits captured but not yet
 *   shipped may then be checkpointed away, and the next generation's snapshot
 *   holds them (their individual restore points are lost, never their content).
 */
import {
  accessSync,
  closeSync,
  constants,
  fstatSync,
  openSync,
  readSync,
  type Stats,
  statSync,
} from 'node:fs';
import { dirname } from 'node:path';
import { DatabaseSync, type StatementSync } from 'node:sqlite';
import { commitsOfFrame, encodeCommitFrame, logCrc32 } from './commit-record.ts';
import { maybeUnlinked, QuietOpener } from './quiet-descriptors.ts';
import {
  SqliteCorruptWalFrameError,
  SqliteDatabaseMissingError,
  SqliteDatabaseReplacedError,
  SqliteDatabaseTruncatedError,
  SqliteDatabaseUnreadableError,
  SqliteNotADatabaseError,
  SqliteNotAFileError,
  SqliteNotWalError,
  SqliteReadOnlyLocationError,
  SqliteWalRestartedUnderneathError,
} from './sqlite-errors.ts';
import {
  parseWalHeader,
  readAt,
  readWalIndexCommitted,
  scanWalFrames,
  WAL_FRAME_HEADER_BYTES,
  WAL_HEADER_BYTES,
  type WalHeader,
  walCycleId,
} from './wal-file.ts';

/** Default of `passiveCheckpointPages`. */
export const DEFAULT_PASSIVE_CHECKPOINT_PAGES = 1000;
/** Default of `truncateCheckpointPages`. */
export const DEFAULT_TRUNCATE_CHECKPOINT_PAGES = 10_000;
/** Default of `captureBudgetBytes`. */
export const DEFAULT_CAPTURE_BUDGET_BYTES = 16 * 1024 * 1024;
/** Default of `maxHeldLogBytes`. */
export const DEFAULT_MAX_HELD_LOG_BYTES = 64 * 1024 * 1024;

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
   * commits, as they would without backupd.
   */
  readonly truncateCheckpointPages?: number;
  /**
   * After a restart checkpoint, also empty the `-wal` file with a
   * `wal_checkpoint(TRUNCATE)`. Off by default: SQLite reuses the file from
   * its start at the next commit anyway, and the truncate holds the write
   * lock for as long as the filesystem takes to shrink and sync the file
   * (tens of ms measured here), while the restart needs no lock at all.
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
   * which newly captured commits are batched: merged into one record holding
   * the newest version of each page they wrote, sealed at the next
   * {@link SqliteTap.sealBatch}, instead of one record each. Default
   * {@link DEFAULT_MAX_HELD_LOG_BYTES} (64 MiB).
   *
   * Why: an application that commits faster than the bucket takes the log
   * (tens of thousands of small commits a second, each a whole page image)
   * would otherwise grow the held log, and what the worker must ship,
   * without limit. A batch is bounded by the database's size (one version of
   * each page at most), so memory and the bytes shipped stay bounded however
   * far behind the worker is, and nothing committed is lost: what is given
   * up is restoring to a commit inside a batch (its edges stay restorable).
   */
  readonly maxHeldLogBytes?: number;
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
  /** Wall clock for commit times (ms since the epoch). Default `Date.now`. */
  readonly wallNow?: () => number;
  /** Monotonic clock (ms) for lock timings. Default `performance.now`. */
  readonly monotonicNow?: () => number;
}

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

/** The database image at the start of a generation, read under the tap's pinned reader. */
export interface SqliteSnapshot {
  readonly pageSize: number;
  readonly databasePages: number;
  /** `pageSize × databasePages`. */
  readonly size: number;
  /** Streams the image, page for page, in chunks; each call starts from the beginning. */
  read(options?: { signal?: AbortSignal }): AsyncIterable<Uint8Array>;
}

interface FileIdentityOfDatabase {
  readonly dev: number;
  readonly ino: number;
}

const SNAPSHOT_CHUNK_PAGES = 256;
/** Overlay reads at a generation's start before a WAL that keeps restarting is an error. */
const SNAPSHOT_READ_ATTEMPTS = 5;
const READER_BUSY_TIMEOUT_MS = 5000;
/** Tries at a restart with nothing left to copy under the lock before copying under it. */
const RESTART_LOCK_ATTEMPTS = 3;
/** How long a restart, holding the write lock, waits for another connection's checkpoint to end. */
const CHECKPOINT_LOCK_WAIT_MS = 10;
const CHECKPOINT_LOCK_RETRY_MS = 0.05;
/** How long a restart tries the write lock back to back before resting. */
const LOCK_SPIN_MS = 1;
const LOCK_REST_MS = 0.5;
/** Frames read from the WAL per piece (about 4 MiB at 4 KiB pages). */
const READ_CHUNK_FRAMES = 1024;

/** The held-reader query: any read of the schema starts the read transaction. */
const READER_QUERY = 'SELECT count(*) AS n FROM sqlite_schema';

/**
 * One generation: a snapshot image (the database at the generation's start)
 * and the commit log after it, held in memory from the first byte the worker
 * has not yet confirmed in the bucket.
 */
interface Generation {
  readonly id: string;
  /** Overlay of the snapshot: pages newer than the database file, at the generation's start. */
  readonly snapshotPages: Map<number, Uint8Array>;
  readonly snapshotDatabasePages: number;
  /** The snapshot is still readable (the reader it needs is pinned). */
  snapshotAvailable: boolean;
  /** Log bytes from `logStart` on, in chunks (one per commit). */
  chunks: Uint8Array[];
  /**
   * Log offset of each chunk, in step with `chunks`: a read or release finds
   * its first record by binary search, so its cost does not grow with the
   * records held (hundreds of thousands under a writer that outruns the
   * worker; a linear scan made every read quadratic).
   */
  chunkOffsets: number[];
  logStart: number;
  logEnd: number;
  /** Commits in the log (sealed records only; see `batch`). */
  commits: number;
  /** Commits captured while the held log was over `maxHeldLogBytes`, not yet sealed into the log. */
  batch: OpenBatch | null;
}

/** Commits being merged into one batch record (see `maxHeldLogBytes`). */
interface OpenBatch {
  /** Newest version of each page the batched commits wrote (copies, owned by the batch). */
  readonly pages: Map<number, Uint8Array>;
  commits: number;
  databasePages: number;
  commitTime: number;
  walSalt1: number;
  walSalt2: number;
  commitFrame: number;
}

/** The first 16 bytes of every SQLite database file. */
const SQLITE_HEADER_MAGIC = Buffer.from('SQLite format 3\0', 'latin1');
/** SQLite's result codes for a file it cannot read as a database. */
const SQLITE_CORRUPT = 11;
const SQLITE_NOTADB = 26;

function kindOf(stat: Stats): string {
  if (stat.isDirectory()) return 'directory';
  if (stat.isSocket()) return 'socket';
  if (stat.isFIFO()) return 'named pipe';
  if (stat.isCharacterDevice() || stat.isBlockDevice()) return 'device';
  return 'special file';
}

/**
 * Checks what is at `path` before any SQLite connection opens it, so each
 * failure names its cause and a missing path is never created (opening a
 * connection on a missing path creates an empty database):
 * missing, not a regular file, not SQLite's header magic, and a location
 * where the files kept beside the database cannot be written. A header that
 * carries the magic but is corrupt is SQLite's to find (see
 * {@link unreadableOr}).
 */
function checkDatabaseFile(path: string): void {
  let stat: Stats;
  try {
    stat = statSync(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT')
      throw new SqliteDatabaseMissingError(path, { cause: error });
    throw error;
  }
  if (!stat.isFile()) throw new SqliteNotAFileError(path, kindOf(stat));
  const header = Buffer.alloc(SQLITE_HEADER_MAGIC.length);
  const fd = openSync(path, 'r');
  let read: number;
  try {
    read = readSync(fd, header, 0, header.length, 0);
  } finally {
    closeSync(fd);
  }
  if (read === 0) throw new SqliteNotADatabaseError(path, 'the file is empty');
  if (read < header.length || !header.equals(SQLITE_HEADER_MAGIC))
    throw new SqliteNotADatabaseError(
      path,
      'its first 16 bytes are not the SQLite header "SQLite format 3\\0"',
    );
  // access(2) answers EROFS for a read-only filesystem even to root.
  const writable = (location: string) => {
    try {
      accessSync(location, constants.W_OK);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') return;
      if (code === 'EROFS' || code === 'EACCES' || code === 'EPERM')
        throw new SqliteReadOnlyLocationError(path, location, { cause: error });
      throw error;
    }
  };
  writable(dirname(path));
  writable(path);
  writable(`${path}-shm`);
}

/** SQLite's "not a database" / "corrupt" as {@link SqliteDatabaseUnreadableError}; anything else as it is. */
function unreadableOr(path: string, error: unknown): unknown {
  const errcode = (error as { errcode?: unknown }).errcode;
  if (
    typeof errcode === 'number' &&
    ((errcode & 0xff) === SQLITE_NOTADB || (errcode & 0xff) === SQLITE_CORRUPT)
  )
    return new SqliteDatabaseUnreadableError(path, (error as Error).message, { cause: error });
  return error;
}

export class SqliteTap {
  readonly path: string;
  readonly walPath: string;
  readonly shmPath: string;
  readonly pageSize: number;
  readonly options: Required<SqliteTapOptions>;

  readonly #readers: [DatabaseSync, DatabaseSync];
  readonly #readerQueries: [StatementSync, StatementSync];
  readonly #writer: DatabaseSync;
  #held: 0 | 1 | -1 = -1;
  readonly #identity: FileIdentityOfDatabase;
  /**
   * Descriptors of the database and `-shm` files, open for the tap's whole
   * life and closed only after its SQLite connections: closing any descriptor
   * of a file drops every POSIX lock this process holds on it, which would
   * silently end the tap's read transactions (SQLite's read marks are locks
   * on `-shm`).
   */
  readonly #databaseFd: number;
  #shmFd: number | null = null;
  /** The `-wal` file, kept open across captures (see quiet-descriptors.ts); `null` until read. */
  #walFd: number | null = null;
  readonly #opener = new QuietOpener();
  #closed = false;

  // The WAL cycle being read.
  #walHeader: WalHeader | null = null;
  /**
   * Inode of the WAL file. SQLite restarts and truncates the WAL in place; a
   * WAL file with another inode was deleted or replaced by someone else, and
   * frames may have gone with the old one.
   */
  #walInode: number | null = null;
  #walOffset = WAL_HEADER_BYTES;
  #walFrame = 0;
  #walChecksum: [number, number] = [0, 0];
  /**
   * Pages the current WAL cycle holds a committed version of (the database
   * file may lack them: see #checkDatabaseFile). Numbers only: the hot path
   * copies each page once, into its commit record.
   */
  #walPages = new Set<number>();
  #databasePages: number;

  #generation: Generation;
  #pins = 0;
  /** Frames of the current WAL cycle SQLite reported copied at the tap's last checkpoint. */
  #copiedFrames = 0;
  /**
   * Frames of the current WAL cycle the wal-index counted as copied into the
   * database file at the last capture (by any connection's checkpoint), and
   * that count as of the previous maintain call (or the tap's own copy). When
   * it moved in between, the application is checkpointing on its own.
   */
  #backfilledFrames = 0;
  #backfilledSeen = 0;
  /** See #readInto. */
  #readBuffer = new Uint8Array(0);
  /** True once the reader was moved to mark 0 after the WAL went quiet (see maintain). */
  #settled = false;
  /** See {@link caughtUp}. */
  #caughtUp = true;
  #checkpointReports: CheckpointReport[] = [];

  private constructor(path: string, options: SqliteTapOptions) {
    this.path = path;
    this.walPath = `${path}-wal`;
    this.shmPath = `${path}-shm`;
    this.options = {
      passiveCheckpointPages: options.passiveCheckpointPages ?? DEFAULT_PASSIVE_CHECKPOINT_PAGES,
      truncateCheckpointPages: options.truncateCheckpointPages ?? DEFAULT_TRUNCATE_CHECKPOINT_PAGES,
      busyTimeoutMs: options.busyTimeoutMs ?? 50,
      maxHeldLogBytes: options.maxHeldLogBytes ?? DEFAULT_MAX_HELD_LOG_BYTES,
      captureBudgetBytes: options.captureBudgetBytes ?? DEFAULT_CAPTURE_BUDGET_BYTES,
      truncateWalFile: options.truncateWalFile ?? false,
      wallNow: options.wallNow ?? Date.now,
      monotonicNow: options.monotonicNow ?? (() => performance.now()),
    };
    checkDatabaseFile(path);
    const open = (timeout: number) => {
      const connection = new DatabaseSync(path, { timeout });
      try {
        // The tap's connections never checkpoint by themselves.
        connection.exec('PRAGMA wal_autocheckpoint=0');
      } catch (error) {
        connection.close();
        throw unreadableOr(path, error);
      }
      return connection;
    };
    this.#writer = open(this.options.busyTimeoutMs);
    let mode: string;
    try {
      // Read the schema first: `PRAGMA journal_mode` alone answers the
      // connection's default ("delete") without reading the file, so a
      // corrupt header would pass for a database in another journal mode.
      this.#writer.prepare('PRAGMA schema_version').get();
      const row = this.#writer.prepare('PRAGMA journal_mode').get() as { journal_mode: string };
      mode = String(row.journal_mode).toLowerCase();
    } catch (error) {
      this.#writer.close();
      throw unreadableOr(path, error);
    }
    if (mode !== 'wal') {
      this.#writer.close();
      throw new SqliteNotWalError(path, mode);
    }
    // Beginning a read transaction never waits on writers in WAL mode; the
    // timeout only covers SQLite's own brief WAL-index recovery locks.
    this.#readers = [open(READER_BUSY_TIMEOUT_MS), open(READER_BUSY_TIMEOUT_MS)];
    this.#readerQueries = [
      this.#readers[0].prepare(READER_QUERY),
      this.#readers[1].prepare(READER_QUERY),
    ];
    this.pageSize = Number(
      (this.#writer.prepare('PRAGMA page_size').get() as { page_size: number }).page_size,
    );
    // From now on the write lock is taken without SQLite's busy handler
    // (see #takeWriteLock).
    this.#writer.exec('PRAGMA busy_timeout=0');
    this.#databaseFd = this.#opener.open(path);
    const stat = fstatSync(this.#databaseFd);
    this.#identity = { dev: stat.dev, ino: stat.ino };
    this.#databasePages = 0;
    this.#beginReader(0);
    this.#held = 0;
    this.#generation = this.#startGenerationUnderReader();
  }

  /**
   * Opens the database and starts the first generation (its snapshot is
   * pinned until {@link releaseSnapshot}). Never creates the database file.
   * @throws SqliteDatabaseMissingError when nothing is at `path`.
   * @throws SqliteNotAFileError when `path` is a directory or another non-file.
   * @throws SqliteNotADatabaseError when the file lacks SQLite's header magic.
   * @throws SqliteDatabaseUnreadableError when SQLite cannot read it (corrupt header or schema).
   * @throws SqliteReadOnlyLocationError when the files kept beside it cannot be written.
   * @throws SqliteNotWalError when it is a valid database in another journal mode.
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
    return this.#generation.commits;
  }

  /** Commits captured into the open batch, not yet in the log (0 without one). */
  get batchedCommits(): number {
    return this.#generation.batch?.commits ?? 0;
  }

  /** Log bytes held in memory: captured, not yet released as shipped. */
  get heldLogBytes(): number {
    return this.#generation.logEnd - this.#generation.logStart;
  }

  /**
   * Ends the open batch (if any): its commits become one record at the end
   * of the log, counted in {@link commits} and {@link logLength}. Called by
   * the owner when it reads the log's end for shipping, so each batch holds
   * what was captured between two such reads.
   */
  sealBatch(): void {
    const generation = this.#generation;
    const batch = generation.batch;
    if (batch === null) return;
    generation.batch = null;
    this.#appendRecord(
      encodeCommitFrame({
        pageSize: this.pageSize,
        databasePages: batch.databasePages,
        commitTime: batch.commitTime,
        walSalt1: batch.walSalt1,
        walSalt2: batch.walSalt2,
        commitFrame: batch.commitFrame,
        pages: batch.pages,
        commits: batch.commits,
      }),
      batch.commits,
    );
  }

  #appendRecord(frame: Uint8Array, commits: number): void {
    const generation = this.#generation;
    generation.chunks.push(frame);
    generation.chunkOffsets.push(generation.logEnd);
    generation.logEnd += frame.byteLength;
    generation.commits += commits;
  }

  /** Merges one captured transaction into the open batch (its pages are copied). */
  #batchTransaction(
    header: WalHeader,
    transaction: { databasePages: number; commitFrame: number; pages: Map<number, Uint8Array> },
    capturedAt: number,
  ): void {
    const generation = this.#generation;
    let batch = generation.batch;
    if (batch === null) {
      batch = {
        pages: new Map(),
        commits: 0,
        databasePages: transaction.databasePages,
        commitTime: capturedAt,
        walSalt1: header.salt1,
        walSalt2: header.salt2,
        commitFrame: transaction.commitFrame,
      };
      generation.batch = batch;
    }
    for (const [pageNumber, page] of transaction.pages) {
      const kept = batch.pages.get(pageNumber);
      if (kept) kept.set(page);
      else batch.pages.set(pageNumber, page.slice());
    }
    batch.commits += 1;
    batch.databasePages = transaction.databasePages;
    batch.commitTime = capturedAt;
    batch.walSalt1 = header.salt1;
    batch.walSalt2 = header.salt2;
    batch.commitFrame = transaction.commitFrame;
  }

  /** Log bytes captured in the current generation (offset after the last commit record). */
  get logLength(): number {
    return this.#generation.logEnd;
  }

  /** Offset of the first log byte still held in memory. */
  get logStart(): number {
    return this.#generation.logStart;
  }

  /** Frames currently in the WAL cycle being read (its size in pages, past its header). */
  get walFrames(): number {
    return this.#walFrame;
  }

  /** True while the generation's snapshot can still be read. */
  get snapshotAvailable(): boolean {
    return this.#generation.snapshotAvailable;
  }

  /** Checkpoint reports since the last call (for metrics and benchmarks). */
  takeCheckpointReports(): CheckpointReport[] {
    const reports = this.#checkpointReports;
    this.#checkpointReports = [];
    return reports;
  }

  /**
   * Starts a new generation: the database as it is now (captured up to the
   * WAL's last commit) becomes the snapshot, the log starts empty. Used after
   * a {@link SqliteWalRestartedUnderneathError}, or when the worker needs a
   * restore point the tap no longer holds.
   */
  startGeneration(): string {
    this.#assertOpen();
    this.#resetWalState();
    this.#generation = this.#startGenerationUnderReader();
    return this.#generation.id;
  }

  /**
   * Reads every new committed transaction from the WAL into the log.
   * Synchronous, so it never interleaves with another call of this tap.
   * @returns the number of commits captured.
   * @throws SqliteDatabaseReplacedError, SqliteDatabaseTruncatedError,
   *   SqliteWalRestartedUnderneathError, SqliteCorruptWalFrameError (after
   *   keeping every valid commit before the bad frame).
   */
  capture(): number {
    this.#assertOpen();
    this.#checkDatabaseFile();
    return this.#readWal('record', this.options.captureBudgetBytes);
  }

  /**
   * True when the last capture read every frame the WAL index counted as
   * committed (false after one that stopped at its byte budget: call
   * {@link capture} again).
   */
  get caughtUp(): boolean {
    return this.#caughtUp;
  }

  /**
   * Moves the held read transaction to the WAL's current end (capturing
   * first), so checkpoints can copy what was captured. Does nothing while the
   * snapshot is pinned.
   */
  advance(): number {
    const captured = this.capture();
    if (this.#pins > 0 || this.#generation.snapshotAvailable) return captured;
    // A reader moved past frames not read yet could let a checkpoint copy
    // them and, once it holds read mark 0, a restart overwrite them.
    if (!this.#caughtUp) return captured;
    // Begin the new reader before ending the old one: at no moment is there
    // no reader of the tap's holding the WAL.
    const previous = this.#held;
    const next = previous === 0 ? 1 : 0;
    this.#beginReader(next);
    if (previous !== -1) this.#endReader(previous);
    this.#held = next;
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
    // Moving the reader at every call costs two read transactions and lets
    // an application's FULL/RESTART/TRUNCATE checkpoint (which waits for
    // exactly that) go on at once.
    const captured = this.advance();
    if (this.#pins > 0 || this.#generation.snapshotAvailable) return null;
    if (captured > 0) this.#settled = false;
    if (this.#walFrame >= this.options.truncateCheckpointPages) return this.checkpoint('truncate');
    // An application that checkpoints on its own (SQLite's auto-checkpoint,
    // on by default) copies up to the tap's reader within a commit of each
    // move. A copy of the tap's then runs beside the application's commits,
    // its two fsyncs sharing the disk with theirs, for frames the
    // application copies anyway: leave it to the application while the
    // wal-index shows it copying, and count the threshold from the last copy
    // by anyone. The WAL stays bounded either way: the restart above does not
    // depend on it.
    const othersCopied = this.#backfilledFrames > this.#backfilledSeen;
    this.#backfilledSeen = this.#backfilledFrames;
    const copied = Math.max(this.#copiedFrames, Math.min(this.#backfilledFrames, this.#walFrame));
    if (!othersCopied && this.#walFrame - copied >= this.options.passiveCheckpointPages)
      return this.checkpoint('passive');
    if (captured === 0 && this.#walFrame > 0 && !this.#settled) {
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
    if (this.#pins > 0 || this.#generation.snapshotAvailable) {
      return this.#report({
        mode,
        busy: true,
        walFrames: this.#walFrame,
        checkpointedFrames: 0,
        writeLockHeldMs: null,
        truncateMs: null,
        walRestartable: false,
        truncated: false,
      });
    }
    this.advance();
    const idle = this.#idleReader();
    const passive = this.#checkpointOn(idle, 'PASSIVE');
    this.#noteCopied(passive);
    // A restart is tried only once every frame was read: otherwise the
    // capture under the write lock would read the backlog while the
    // application waits for the lock.
    if (mode === 'passive' || !this.#caughtUp) {
      return this.#report({
        mode,
        busy: passive.busy !== 0 || mode !== 'passive',
        walFrames: passive.log,
        checkpointedFrames: passive.checkpointed,
        writeLockHeldMs: null,
        truncateMs: null,
        walRestartable: false,
        truncated: false,
      });
    }
    // The restart, under the write lock. While it is held no commit can land,
    // so the capture inside reaches the WAL's true end. When commits landed
    // after the copy just made, copying them under the lock would put a
    // checkpoint's fsyncs inside it: let go, copy them without the lock, and
    // try again; only the last attempt copies under the lock.
    let passiveBefore = passive;
    let last = passive;
    let writeLockHeldMs = 0;
    for (let attempt = 1; ; attempt += 1) {
      if (!this.#takeWriteLock()) {
        // The application held the write lock for longer than busyTimeoutMs:
        // skip this time; the WAL stays bounded by the next attempt.
        return this.#report({
          mode,
          busy: true,
          walFrames: passiveBefore.log,
          checkpointedFrames: passiveBefore.checkpointed,
          writeLockHeldMs: writeLockHeldMs === 0 ? null : writeLockHeldMs,
          truncateMs: null,
          walRestartable: false,
          truncated: false,
        });
      }
      const lockedAt = this.options.monotonicNow();
      let retry = false;
      try {
        // Cheapest first: when the wal-index already counts commits the copy
        // just made did not include, let go at once (an application that
        // meets the held lock sleeps at least 1 ms, so every microsecond it
        // is held counts), before reading anything.
        if (attempt < RESTART_LOCK_ATTEMPTS && !this.#nothingNewSince(passiveBefore)) {
          retry = true;
        } else {
          // Unbounded: the restart below needs every frame read.
          this.#readWal('record', Number.POSITIVE_INFINITY);
          const copiedAlready =
            passiveBefore.busy === 0 &&
            passiveBefore.checkpointed === passiveBefore.log &&
            this.#walFrame === passiveBefore.log;
          if (!copiedAlready && attempt < RESTART_LOCK_ATTEMPTS) {
            retry = true;
          } else {
            if (this.#held !== -1) this.#endReader(this.#held);
            this.#held = -1;
            last = this.#copyUnderWriteLock();
            this.#noteCopied(last);
          }
        }
      } finally {
        // Never release the write lock without a reader held: between the two
        // an application checkpoint could copy and drop uncaptured frames.
        if (this.#held === -1) {
          this.#beginReader(0);
          this.#held = 0;
        }
        this.#writer.exec('ROLLBACK');
        writeLockHeldMs = Math.max(writeLockHeldMs, this.options.monotonicNow() - lockedAt);
      }
      if (!retry) break;
      this.advance();
      passiveBefore = this.#checkpointOn(this.#idleReader(), 'PASSIVE');
      this.#noteCopied(passiveBefore);
    }
    let truncateMs: number | null = null;
    let truncated = false;
    const walRestartable = last.busy === 0 && last.log === last.checkpointed;
    if (walRestartable && this.options.truncateWalFile) {
      // Everything is in the database file and the held reader has mark 0:
      // a TRUNCATE now can only drop captured frames. No busy wait: it holds
      // the write lock while it waits, which would stall the application.
      const other = this.#readers[1];
      other.exec('PRAGMA busy_timeout=0');
      const started = this.options.monotonicNow();
      try {
        const result = this.#checkpointOn(other, 'TRUNCATE');
        truncated = result.busy === 0;
      } finally {
        truncateMs = this.options.monotonicNow() - started;
        other.exec(`PRAGMA busy_timeout=${READER_BUSY_TIMEOUT_MS}`);
      }
    }
    this.#readWal('record', this.options.captureBudgetBytes);
    return this.#report({
      mode,
      busy: last.busy !== 0 || last.log !== last.checkpointed,
      walFrames: last.log,
      checkpointedFrames: last.checkpointed,
      writeLockHeldMs,
      truncateMs,
      walRestartable,
      truncated,
    });
  }

  /**
   * The generation's snapshot: the database at the generation's start, page
   * for page. Readable until {@link releaseSnapshot}; `null` after.
   */
  snapshot(): SqliteSnapshot | null {
    this.#assertOpen();
    const generation = this.#generation;
    if (!generation.snapshotAvailable) return null;
    const pageSize = this.pageSize;
    const databasePages = generation.snapshotDatabasePages;
    const path = this.path;
    const tap = this;
    return {
      pageSize,
      databasePages,
      size: pageSize * databasePages,
      async *read(options: { signal?: AbortSignal } = {}) {
        tap.#pins += 1;
        const fd = tap.#databaseFd;
        try {
          const stat = fstatSync(fd);
          for (let first = 1; first <= databasePages; first += SNAPSHOT_CHUNK_PAGES) {
            options.signal?.throwIfAborted();
            if (!generation.snapshotAvailable)
              throw new Error('the snapshot was released while it was being read');
            const count = Math.min(SNAPSHOT_CHUNK_PAGES, databasePages - first + 1);
            const chunk = new Uint8Array(count * pageSize);
            const fromFile = readAt(fd, (first - 1) * pageSize, count * pageSize);
            chunk.set(fromFile);
            for (let i = 0; i < count; i += 1) {
              const page = generation.snapshotPages.get(first + i);
              if (page) chunk.set(page, i * pageSize);
              else if ((i + 1) * pageSize > fromFile.byteLength)
                throw new SqliteDatabaseTruncatedError(path, stat.size, databasePages * pageSize);
            }
            yield chunk;
          }
        } finally {
          tap.#pins -= 1;
        }
      },
    };
  }

  /**
   * Lets the generation's snapshot go (it is safely in the bucket): the held
   * reader may move forward and checkpoints may run again.
   */
  releaseSnapshot(): void {
    const generation = this.#generation;
    if (!generation.snapshotAvailable) return;
    generation.snapshotAvailable = false;
    generation.snapshotPages.clear();
  }

  /**
   * Log bytes of the current generation in `[start, end)`, whole records
   * only; with `atLeast`, that many records even when they reach past `end`.
   * `crc32` is the CRC-32 of `bytes`, combined from the CRC each record
   * carries in its header (see {@link logCrc32}) rather than read again.
   */
  readLog(
    start: number,
    end: number,
    atLeast = 0,
  ): { bytes: Uint8Array; commits: number; end: number; crc32: number } | null {
    const generation = this.#generation;
    if (start < generation.logStart)
      throw new RangeError(
        `log bytes before ${generation.logStart} were released (asked for ${start})`,
      );
    const first = firstChunkAtOrAfter(generation.chunkOffsets, start);
    if (first > 0) {
      const before = generation.chunkOffsets[first - 1]! + generation.chunks[first - 1]!.byteLength;
      if (before > start) throw new RangeError(`offset ${start} is inside a commit record`);
    }
    const parts: Uint8Array[] = [];
    let commits = 0;
    let reached = start;
    for (let index = first; index < generation.chunks.length; index += 1) {
      const chunk = generation.chunks[index]!;
      const chunkEnd = generation.chunkOffsets[index]! + chunk.byteLength;
      if (chunkEnd > end && parts.length >= atLeast) break;
      parts.push(chunk);
      commits += commitsOfFrame(chunk);
      reached = chunkEnd;
    }
    if (parts.length === 0) return null;
    const bytes = new Uint8Array(reached - start);
    let at = 0;
    for (const part of parts) {
      bytes.set(part, at);
      at += part.byteLength;
    }
    return { bytes, commits, end: reached, crc32: logCrc32(parts) };
  }

  /** Drops log bytes before `offset` (they are in the bucket). */
  releaseLog(offset: number): void {
    const generation = this.#generation;
    // Records that end at or before `offset`: those that start before it,
    // less the last of them when `offset` falls inside it.
    let drop = firstChunkAtOrAfter(generation.chunkOffsets, offset);
    if (
      drop > 0 &&
      generation.chunkOffsets[drop - 1]! + generation.chunks[drop - 1]!.byteLength > offset
    )
      drop -= 1;
    if (drop === 0) return;
    const start = generation.chunkOffsets[drop - 1]! + generation.chunks[drop - 1]!.byteLength;
    // One splice, not a shift per record: tens of thousands of records per step.
    generation.chunks.splice(0, drop);
    generation.chunkOffsets.splice(0, drop);
    generation.logStart = start;
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
    for (const reader of this.#readers) {
      if (reader.isTransaction) reader.exec('ROLLBACK');
    }
    this.#readers[0].close();
    this.#readers[1].close();
    this.#writer.close();
    // Only now: see #databaseFd.
    closeSync(this.#databaseFd);
    if (this.#shmFd !== null) closeSync(this.#shmFd);
    this.#closeWal();
  }

  // ---------------------------------------------------------------------------

  #assertOpen(): void {
    if (this.#closed) throw new Error(`the SQLite tap for ${this.path} is closed`);
  }

  #report(report: CheckpointReport): CheckpointReport {
    this.#checkpointReports.push(report);
    return report;
  }

  #idleReader(): DatabaseSync {
    return this.#readers[this.#held === 0 ? 1 : 0];
  }

  #beginReader(index: 0 | 1): void {
    const reader = this.#readers[index];
    reader.exec('BEGIN');
    try {
      this.#readerQueries[index].get();
    } catch (error) {
      reader.exec('ROLLBACK');
      throw error;
    }
  }

  #endReader(index: 0 | 1): void {
    const reader = this.#readers[index];
    if (reader.isTransaction) reader.exec('ROLLBACK');
  }

  #checkpointOn(
    connection: DatabaseSync,
    mode: 'PASSIVE' | 'TRUNCATE',
  ): { busy: number; log: number; checkpointed: number } {
    const row = connection.prepare(`PRAGMA wal_checkpoint(${mode})`).get() as {
      busy: number;
      log: number;
      checkpointed: number;
    };
    return { busy: Number(row.busy), log: Number(row.log), checkpointed: Number(row.checkpointed) };
  }

  /**
   * Takes the write lock (`BEGIN IMMEDIATE`) within `busyTimeoutMs`. An
   * application committing back to back frees the lock only for a few
   * microseconds between two transactions; SQLite's busy handler retries
   * after 1, 2, 5, 10 ms and mostly misses those gaps (the WAL then grows
   * past the threshold until a retry happens to land in one). So the tap
   * tries back to back for {@link LOCK_SPIN_MS}, then rests
   * {@link LOCK_REST_MS}, and again, until the timeout.
   */
  #takeWriteLock(): boolean {
    const deadline = this.options.monotonicNow() + this.options.busyTimeoutMs;
    for (;;) {
      const spinUntil = Math.min(deadline, this.options.monotonicNow() + LOCK_SPIN_MS);
      for (;;) {
        try {
          this.#writer.exec('BEGIN IMMEDIATE');
          return true;
        } catch (error) {
          if (!isBusy(error)) throw error;
        }
        if (this.options.monotonicNow() >= spinUntil) break;
      }
      if (this.options.monotonicNow() >= deadline) return false;
      sleepMs(LOCK_REST_MS);
    }
  }

  /**
   * The restart's last copy, with the write lock held. SQLite runs one
   * checkpoint at a time and answers any other at once with busy (its busy
   * handler is not used for this). An application's own auto-checkpoint
   * runs right after its commit, once the write lock is free, so it may be
   * in progress just when the tap takes the lock; it cannot last (nothing can
   * commit meanwhile), so wait for it, up to {@link CHECKPOINT_LOCK_WAIT_MS}.
   * Without this wait, a WAL past the application's auto-checkpoint size
   * (where it checkpoints after every commit) would seldom be restarted.
   */
  #copyUnderWriteLock(): { busy: number; log: number; checkpointed: number } {
    const deadline = this.options.monotonicNow() + CHECKPOINT_LOCK_WAIT_MS;
    for (;;) {
      const copy = this.#checkpointOn(this.#readers[0], 'PASSIVE');
      // -1: the checkpoint lock was busy; nothing was looked at.
      if (copy.log !== -1 || this.options.monotonicNow() >= deadline) return copy;
      sleepMs(CHECKPOINT_LOCK_RETRY_MS);
    }
  }

  /**
   * True when the wal-index counts no frame past the ones a checkpoint saw,
   * and that checkpoint copied them all (or the index cannot be read: the
   * caller then finds out by capturing).
   */
  #nothingNewSince(copy: { busy: number; log: number; checkpointed: number }): boolean {
    if (copy.busy !== 0 || copy.checkpointed !== copy.log) return false;
    const index = this.#readWalIndex();
    return index === null || index.committedFrames === copy.log;
  }

  /** Remembers how much of the WAL SQLite says is copied (the PASSIVE threshold counts from there). */
  #noteCopied(result: { busy: number; log: number; checkpointed: number }): void {
    // Only a heuristic: SQLite may count commits the tap has not captured
    // yet, or (rarely) a cycle restarted in between.
    if (result.log >= this.#walFrame) {
      this.#copiedFrames = Math.min(result.checkpointed, this.#walFrame);
      // The tap's own copy is not the application checkpointing.
      this.#backfilledSeen = Math.max(this.#backfilledSeen, result.checkpointed);
    }
  }

  #forgetCopies(): void {
    this.#copiedFrames = 0;
    this.#backfilledFrames = 0;
    this.#backfilledSeen = 0;
  }

  #resetWalState(): void {
    this.#walHeader = null;
    this.#walInode = null;
    this.#closeWal();
    this.#walOffset = WAL_HEADER_BYTES;
    this.#walFrame = 0;
    this.#walChecksum = [0, 0];
    this.#walPages = new Set();
    this.#forgetCopies();
  }

  /** Reads the database size from the file's header (page 1 on disk). */
  #databasePagesOnDisk(fileBytes: number): number {
    const header = readAt(this.#databaseFd, 0, 100);
    if (header.byteLength < 100) return 0;
    const view = new DataView(header.buffer, header.byteOffset, 100);
    const inHeader = view.getUint32(28);
    const valid = inHeader !== 0 && view.getUint32(24) === view.getUint32(92);
    return valid ? inHeader : Math.floor(fileBytes / this.pageSize);
  }

  #checkDatabaseFile(): void {
    let stat: ReturnType<typeof statSync>;
    try {
      stat = statSync(this.path);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT')
        throw new SqliteDatabaseReplacedError(this.path, 'the file is gone');
      throw error;
    }
    if (stat.ino !== this.#identity.ino || stat.dev !== this.#identity.dev)
      throw new SqliteDatabaseReplacedError(
        this.path,
        `inode ${this.#identity.ino} became ${stat.ino}`,
      );
    // Every page of the database that is not in the WAL must be in the file.
    // (Page 1 on disk may record more pages than the file has: a checkpoint
    // copies each page's newest frame only, so it can copy page 1 and leave a
    // new page for later. Hence no check against the on-disk header.)
    let needed = this.#databasePages;
    while (needed > 1 && this.#walPages.has(needed)) needed -= 1;
    const expected = Math.max(needed, 1) * this.pageSize;
    if (stat.size < expected || stat.size % this.pageSize !== 0)
      throw new SqliteDatabaseTruncatedError(this.path, stat.size, expected);
  }

  #startGenerationUnderReader(): Generation {
    // The current WAL's committed transactions are part of the snapshot, not
    // of the log: read them as the snapshot's overlay.
    let snapshotPages = new Map<number, Uint8Array>();
    for (let attempt = 1; ; attempt += 1) {
      const stat = statSync(this.path);
      this.#databasePages = this.#databasePagesOnDisk(stat.size);
      snapshotPages = new Map<number, Uint8Array>();
      this.#readWal(snapshotPages, Number.POSITIVE_INFINITY);
      // A restart while the overlay was read (possible only while the reader
      // holds read mark 0, when every frame of the old cycle is already in
      // the database file) can leave it holding a prefix of the old cycle
      // only, read before the new cycle's frames overwrote the rest: older
      // versions of pages that the database file has newer. Read again,
      // from the new cycle (which nothing can copy into the database file
      // while the reader holds mark 0).
      const read = this.#walHeader;
      const now = this.#walHeaderOnDisk();
      if (read === null || now === null || walCycleId(read) === walCycleId(now)) break;
      if (attempt >= SNAPSHOT_READ_ATTEMPTS)
        throw new SqliteWalRestartedUnderneathError(
          this.path,
          `the WAL restarted ${attempt} times while the snapshot was read`,
        );
      this.#resetWalState();
    }
    return {
      id: `${Date.now().toString(36)}-${Math.random().toString(16).slice(2, 10)}`,
      snapshotPages,
      snapshotDatabasePages: this.#databasePages,
      snapshotAvailable: true,
      chunks: [],
      chunkOffsets: [],
      logStart: 0,
      logEnd: 0,
      commits: 0,
      batch: null,
    };
  }

  /**
   * The `-wal` file's descriptor, kept open across captures (`null`: there
   * is no file). Opened again when the file it refers to was unlinked; an
   * inode other than the one this cycle was read from means the file was
   * replaced underneath.
   * @throws SqliteWalRestartedUnderneathError when it was replaced.
   */
  #walDescriptor(): number | null {
    if (this.#walFd !== null) {
      if (!maybeUnlinked(this.#walFd)) return this.#walFd;
      this.#closeWal();
    }
    const fd = this.#opener.openIfExists(this.walPath);
    if (fd === null) return null;
    const { ino } = fstatSync(fd);
    if (this.#walInode !== null && ino !== this.#walInode) {
      closeSync(fd);
      const before = this.#walInode;
      this.#resetWalState();
      throw new SqliteWalRestartedUnderneathError(
        this.path,
        `the -wal file was replaced (inode ${before} became ${ino})`,
      );
    }
    this.#walInode = ino;
    this.#walFd = fd;
    return fd;
  }

  #closeWal(): void {
    if (this.#walFd !== null) closeSync(this.#walFd);
    this.#walFd = null;
  }

  /** The `-wal` file's header as it is now (`null`: no file, empty, or being written). */
  #walHeaderOnDisk(): WalHeader | null {
    const fd = this.#opener.openIfExists(this.walPath);
    if (fd === null) return null;
    try {
      return parseWalHeader(readAt(fd, 0, WAL_HEADER_BYTES));
    } finally {
      closeSync(fd);
    }
  }

  /**
   * Reads new commits from the WAL file. With `'record'`, appends them to the
   * generation's log; given a map instead (generation start), copies the
   * newest version of each page into it, the snapshot's overlay.
   *
   * Pages are copied out of the very bytes whose checksums were verified,
   * never read again later by offset: while the tap's reader holds read mark
   * 0 (the WAL completely checkpointed when it began), the application's next
   * commit may restart the WAL and overwrite its frames at any moment, and a
   * second read could return another page's bytes.
   */
  #readWal(into: 'record' | Map<number, Uint8Array>, budgetBytes: number): number {
    const record = into === 'record';
    this.#caughtUp = true;
    const fd = this.#walDescriptor();
    if (fd === null) {
      this.#walEmptied();
      return 0;
    }
    const header = parseWalHeader(readAt(fd, 0, WAL_HEADER_BYTES));
    if (header === null) {
      // Empty (after TRUNCATE) or being created: nothing committed in it.
      this.#walEmptied();
      return 0;
    }
    if (this.#walHeader === null || walCycleId(header) !== walCycleId(this.#walHeader)) {
      this.#enterCycle(header);
    }
    // Read before the WAL bytes: frames the index counts as committed now
    // were completely written before the reads below.
    const index = this.#readWalIndex();
    const indexOfThisCycle =
      index !== null && index.salt1 === header.salt1 && index.salt2 === header.salt2;
    if (indexOfThisCycle) this.#backfilledFrames = index.backfilledFrames;
    const frameBytes = WAL_FRAME_HEADER_BYTES + header.pageSize;
    // Read only as far as the index counts committed frames of this cycle:
    // after a restart the file keeps the previous cycle's frames past the
    // new end, and reading that tail on every capture (megabytes per tick
    // at high commit rates) was most of the tap's reads and allocations.
    // Nothing is skipped: frames past the count are read by the next
    // capture, and the count never goes back within a cycle. When the
    // index describes another cycle (a restart between the two reads) or
    // cannot be read, read to the file's end, stopping at the first
    // invalid frame. (The file's size is not asked for: see
    // quiet-descriptors.ts.)
    const readEnd = indexOfThisCycle
      ? WAL_HEADER_BYTES + index.committedFrames * frameBytes
      : Number.POSITIVE_INFINITY;
    if (readEnd <= this.#walOffset) return 0;
    // In pieces, so a large WAL is never read whole into memory; at most
    // `budgetBytes` per call (whole pieces), so the event loop is not held.
    let chunkBytes = READ_CHUNK_FRAMES * frameBytes;
    let captured = 0;
    let spent = 0;
    const capturedAt = this.options.wallNow();
    for (;;) {
      const start = this.#walOffset;
      const wanted = Math.min(readEnd - start, chunkBytes);
      const bytes = this.#readInto(fd, start, wanted);
      const scan = scanWalFrames(header, bytes, start, this.#walFrame, this.#walChecksum);
      for (const transaction of scan.transactions) {
        for (const [pageNumber, page] of transaction.pages) {
          this.#walPages.add(pageNumber);
          if (!record) into.set(pageNumber, page.slice());
        }
        this.#databasePages = transaction.databasePages;
        if (record) {
          const generation = this.#generation;
          // Once a batch is open, every commit joins it until it is sealed:
          // records stay in commit order.
          if (
            generation.batch !== null ||
            generation.logEnd - generation.logStart >= this.options.maxHeldLogBytes
          ) {
            this.#batchTransaction(header, transaction, capturedAt);
          } else {
            this.#appendRecord(
              encodeCommitFrame({
                pageSize: header.pageSize,
                databasePages: transaction.databasePages,
                commitTime: capturedAt,
                walSalt1: header.salt1,
                walSalt2: header.salt2,
                commitFrame: transaction.commitFrame,
                pages: transaction.pages,
              }),
              1,
            );
          }
        }
      }
      captured += scan.transactions.length;
      this.#walOffset = scan.endOffset;
      this.#walFrame = scan.endFrame;
      this.#walChecksum = scan.checksum;
      if (scan.badFrame !== null) {
        if (indexOfThisCycle && index.committedFrames >= scan.badFrame) {
          throw new SqliteCorruptWalFrameError(
            this.path,
            scan.badFrame,
            scan.endOffset,
            this.#generation?.commits ?? 0,
          );
        }
      }
      // Stop at an invalid frame, at the end asked for, or at the file's end.
      if (scan.stoppedEarly || start + bytes.byteLength >= readEnd || bytes.byteLength < wanted)
        break;
      spent += bytes.byteLength;
      if (spent >= budgetBytes) {
        this.#caughtUp = false;
        break;
      }
      // A transaction larger than the piece: read a bigger one.
      if (scan.transactions.length === 0) chunkBytes *= 2;
    }
    return captured;
  }

  /**
   * Reads into one buffer kept across captures (grown as needed): the bytes
   * are only valid until the next read, which is enough, because every page
   * taken from them is copied (into a commit record, or the snapshot's
   * overlay) before it.
   */
  #readInto(fd: number, offset: number, length: number): Uint8Array {
    if (this.#readBuffer.byteLength < length) this.#readBuffer = new Uint8Array(length);
    const buffer = this.#readBuffer;
    let done = 0;
    while (done < length) {
      const n = readSync(fd, buffer, done, length - done, offset + done);
      if (n === 0) break;
      done += n;
    }
    return buffer.subarray(0, done);
  }

  #readWalIndex(): ReturnType<typeof readWalIndexCommitted> {
    if (this.#shmFd === null) {
      try {
        this.#shmFd = this.#opener.open(this.shmPath);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
        throw error;
      }
    }
    return readWalIndexCommitted(this.#shmFd);
  }

  #walEmptied(): void {
    this.#walHeader = null;
    this.#walOffset = WAL_HEADER_BYTES;
    this.#walFrame = 0;
    this.#forgetCopies();
  }

  #enterCycle(header: WalHeader): void {
    // A new cycle (new salts) needs no check of its own: SQLite restarts the
    // WAL only when every frame is in the database file and no read mark
    // above 0 is held, which the tap's readers allow only for captured frames
    // (see the module comment). The header's checkpoint sequence cannot be
    // used as a check: SQLite keeps it per connection, and a connection that
    // has not restarted the WAL itself writes 0 and fresh salts.
    if (header.pageSize !== this.pageSize) {
      throw new SqliteWalRestartedUnderneathError(
        this.path,
        `WAL page size ${header.pageSize} differs from the database's ${this.pageSize}`,
      );
    }
    // The previous cycle was completely checkpointed before SQLite restarted
    // it, so the database file now holds all of it.
    this.#walHeader = header;
    this.#walOffset = WAL_HEADER_BYTES;
    this.#walFrame = 0;
    this.#walChecksum = [header.checksum1, header.checksum2];
    this.#walPages = new Set();
    this.#forgetCopies();
  }
}

/** Frames of `pageSize` bytes a WAL of `bytes` bytes holds. */
/** Index of the first offset in the ascending `offsets` that is `>= at` (`offsets.length` when none is). */
function firstChunkAtOrAfter(offsets: readonly number[], at: number): number {
  let low = 0;
  let high = offsets.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if (offsets[middle]! < at) low = middle + 1;
    else high = middle;
  }
  return low;
}

export function walFramesOf(bytes: number, pageSize: number): number {
  return bytes <= WAL_HEADER_BYTES
    ? 0
    : Math.floor((bytes - WAL_HEADER_BYTES) / (WAL_FRAME_HEADER_BYTES + pageSize));
}

const SQLITE_BUSY = 5;

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
