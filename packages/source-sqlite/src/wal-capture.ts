/**
 * Capture of the WAL: reads new committed transactions of the `-wal` file,
 * cycle by cycle, into the held log (or, at a generation's start, the
 * snapshot's overlay), at most a byte budget per call. Frames are read only
 * up to the wal-index's committed count (or the first invalid frame) and
 * never skipped; a transaction larger than the budget spans calls. Pages are
 * copied out of the very bytes whose checksums were verified, never read
 * again by offset: under a mark-0 reader the application's next commit may
 * restart the WAL and overwrite them. A replaced `-wal` file or another page
 * size is {@link SqliteWalRestartedUnderneathError}; a bad committed frame,
 * `SqliteCaptureStoppedError` (`SQLITE_CORRUPT_WAL_FRAME`) after keeping every commit before it.
 */
import { closeSync, fstatSync } from 'node:fs';
import type { CopyProgress } from './copy-progress.ts';
import type { HeldLog } from './held-log.ts';
import {
  lockedFileDescriptors,
  maybeUnlinked,
  type QuietOpener,
  type SharedDescriptor,
} from './quiet-descriptors.ts';
import { SqliteCaptureStoppedError, SqliteWalRestartedUnderneathError } from './sqlite-errors.ts';
import {
  parseWalHeader,
  readAt,
  readInto,
  readWalIndexCommitted,
  scanWalFrames,
  WAL_FRAME_HEADER_BYTES,
  WAL_HEADER_BYTES,
  type WalHeader,
  type WalPosition,
  type WalTransaction,
  walCycleId,
} from './wal-file.ts';

/** Frames read from the WAL per piece (about 4 MiB at 4 KiB pages). */
export const READ_CHUNK_FRAMES = 1024;

/**
 * A committed transaction read in part: its frames up to `verified`, whose
 * checksums were verified, and the newest version of each page they wrote
 * (copies: the read buffer is reused).
 */
interface OpenTransaction {
  readonly verified: WalPosition;
  readonly pages: Map<number, Uint8Array>;
}

/** What a {@link WalCapture} needs from the tap that owns it. */
export interface WalCaptureContext {
  /** The database's path (the `-wal` and `-shm` files are beside it). */
  readonly path: string;
  readonly pageSize: number;
  readonly opener: QuietOpener;
  /** Wall clock for commit times (ms since the epoch). */
  readonly wallNow: () => number;
  /** Told the wal-index's copy count at each read, and reset with each cycle. */
  readonly progress: CopyProgress;
  /** Commits kept in the current generation (for `SqliteCaptureStoppedError` (`SQLITE_CORRUPT_WAL_FRAME`)). */
  readonly keptCommits: () => number;
}

export class WalCapture {
  readonly #context: WalCaptureContext;
  readonly #walPath: string;
  /** The `-wal` file, kept open across captures (see quiet-descriptors.ts); `null` until read. */
  #walFd: number | null = null;
  readonly #shmPath: string;
  /**
   * The `-shm` file's descriptor, from the process's registry
   * (quiet-descriptors.ts) and given back at {@link close}: closing any
   * descriptor of a file drops every POSIX lock this process holds on it,
   * SQLite's read marks included.
   */
  #shm: SharedDescriptor | null = null;

  // The WAL cycle being read.
  #walHeader: WalHeader | null = null;
  /**
   * Inode of the WAL file. SQLite restarts and truncates the WAL in place; a
   * WAL file with another inode was deleted or replaced by someone else, and
   * frames may have gone with the old one.
   */
  #walInode: number | null = null;
  /** Right after the last commit captured of the cycle (its header before any). */
  #committed: WalPosition = { offset: WAL_HEADER_BYTES, frame: 0, checksum: [0, 0] };
  /**
   * Pages the current WAL cycle holds a committed version of (the database
   * file may lack them: see checkDatabaseUnchanged). Numbers only: the hot path
   * copies each page once, into its commit record.
   */
  #walPages = new Set<number>();
  #databasePages = 0;
  /** See #readInto. */
  #readBuffer = new Uint8Array(0);
  /** See {@link caughtUp}. */
  #caughtUp = true;
  #closed = false;
  /**
   * A transaction larger than the last call's budget, read in part: the next
   * call goes on from its last verified frame. Only one the wal-index counts
   * as committed in this cycle (so never rolled back, nor its frames
   * overwritten before the cycle ends); dropped with the cycle.
   */
  #open: OpenTransaction | null = null;

  constructor(context: WalCaptureContext) {
    this.#context = context;
    this.#walPath = `${context.path}-wal`;
    this.#shmPath = `${context.path}-shm`;
  }

  /** The database's page size (every WAL frame holds one page). */
  get pageSize(): number {
    return this.#context.pageSize;
  }

  /** Frames in the WAL cycle being read, up to its last captured commit. */
  get walFrames(): number {
    return this.#committed.frame;
  }

  /** Pages the current WAL cycle holds a committed version of. */
  get walPages(): ReadonlySet<number> {
    return this.#walPages;
  }

  /** Database size in pages after the last captured commit. */
  get databasePages(): number {
    return this.#databasePages;
  }

  /** Header of the WAL cycle being read (`null` before the first, or when there is none). */
  get walHeader(): WalHeader | null {
    return this.#walHeader;
  }

  /**
   * True when the last read reached every frame the WAL index counted as
   * committed (false after one that stopped at its byte budget, which
   * includes one that left a transaction read in part).
   */
  get caughtUp(): boolean {
    return this.#caughtUp;
  }

  /** The database size before any WAL frame is read (a generation's start: the file's header). */
  startFromDatabasePages(pages: number): void {
    this.#databasePages = pages;
  }

  /** Forgets the WAL cycle: the next read starts at the WAL's beginning. */
  reset(): void {
    this.#walInode = null;
    this.#closeWal();
    this.#rewind(null);
    this.#walPages = new Set();
  }

  /**
   * Closes the `-wal` descriptor and stops using the `-shm` one (the tap
   * gives that back); any later read fails instead of reading a descriptor
   * number the process may have given to another file since.
   */
  close(): void {
    this.#closed = true;
    this.#shm?.release();
    this.#shm = null;
    this.#closeWal();
  }

  /**
   * Reads new commits from the WAL file. Given the held log, appends them to
   * it; given a map instead (generation start), copies the newest version of
   * each page into it, the snapshot's overlay. Reads at most `budgetBytes`
   * (whole pieces); see {@link caughtUp}. A transaction larger than that goes
   * on in the next call from the last frame verified (pages, running checksum
   * and offset kept), but only if the wal-index counts it committed in this
   * cycle: frames it does not count (still being written, or rolled back) are
   * never taken, and when the index cannot tell, the next call reads them again.
   * @returns the number of commits read.
   */
  read(into: HeldLog | Map<number, Uint8Array>, budgetBytes: number): number {
    this.#caughtUp = true;
    const fd = this.#walDescriptor();
    if (fd === null) {
      this.#rewind(null);
      return 0;
    }
    const header = parseWalHeader(readAt(fd, 0, WAL_HEADER_BYTES));
    if (header === null) {
      // Empty (after TRUNCATE) or being created: nothing committed in it.
      this.#rewind(null);
      return 0;
    }
    if (this.#walHeader === null || walCycleId(header) !== walCycleId(this.#walHeader))
      this.#enterCycle(header);
    // Read before the WAL bytes: frames the index counts as committed now
    // were completely written before the reads below.
    const index = this.readWalIndex();
    const indexOfThisCycle =
      index !== null && index.salt1 === header.salt1 && index.salt2 === header.salt2;
    if (indexOfThisCycle) this.#context.progress.noteBackfilled(index.backfilledFrames);
    const frameBytes = WAL_FRAME_HEADER_BYTES + header.pageSize;
    // Only as far as the index counts committed frames of this cycle: past
    // them a restarted file keeps the previous cycle's frames, and reading
    // that tail each capture was most of the tap's reads. Without an index
    // of this cycle, to the first invalid frame (never asking the size:
    // quiet-descriptors.ts).
    const readEnd = indexOfThisCycle
      ? WAL_HEADER_BYTES + index.committedFrames * frameBytes
      : Number.POSITIVE_INFINITY;
    let open = this.#open;
    this.#open = null;
    let position = open?.verified ?? this.#committed;
    if (readEnd <= position.offset) {
      this.#keepOpen(open, indexOfThisCycle ? index.committedFrames : 0);
      return 0;
    }
    // In pieces of one size, so a large WAL is never read whole into
    // memory; at most `budgetBytes` per call (whole pieces), so the event
    // loop is not held.
    const pieceBytes = READ_CHUNK_FRAMES * frameBytes;
    let captured = 0;
    let spent = 0;
    const capturedAt = this.#context.wallNow();
    for (;;) {
      const start = position.offset;
      const wanted = Math.min(readEnd - start, pieceBytes);
      const bytes = this.#readInto(fd, start, wanted);
      const scan = scanWalFrames(header, bytes, position);
      for (const transaction of scan.transactions) {
        this.#take(header, withOpenPages(open, transaction), into, capturedAt);
        open = null;
      }
      captured += scan.transactions.length;
      if (scan.committed !== null) this.#committed = scan.committed;
      position = scan.verified;
      if (scan.open.size > 0) open = keepPages(open, scan.open, position);
      if (scan.badFrame !== null && indexOfThisCycle && index.committedFrames >= scan.badFrame)
        throw SqliteCaptureStoppedError.corruptWalFrame(
          this.#context.path,
          scan.badFrame,
          WAL_HEADER_BYTES + (scan.badFrame - 1) * frameBytes,
          this.#context.keptCommits(),
        );
      // Stop at an invalid frame, at the end asked for, or at the file's end.
      if (scan.stoppedEarly || start + bytes.byteLength >= readEnd || bytes.byteLength < wanted)
        break;
      spent += bytes.byteLength;
      if (spent >= budgetBytes) {
        this.#caughtUp = false;
        break;
      }
    }
    this.#keepOpen(open, indexOfThisCycle ? index.committedFrames : 0);
    return captured;
  }

  /**
   * Keeps a transaction read in part for the next call when every frame of
   * it is one the wal-index counts as committed in this cycle (`committed`
   * frames; 0 when the index is of another cycle or unreadable): such frames
   * are never rolled back nor overwritten before the cycle ends. Others are
   * read again, from the last commit, by the next call. Either way the
   * capture is not caught up.
   */
  #keepOpen(open: OpenTransaction | null, committed: number): void {
    if (open === null) return;
    this.#caughtUp = false;
    if (open.verified.frame <= committed) this.#open = open;
  }

  /** One verified transaction: its pages into the overlay (copies), or the transaction into the log. */
  #take(
    header: WalHeader,
    transaction: WalTransaction,
    into: HeldLog | Map<number, Uint8Array>,
    capturedAt: number,
  ): void {
    const overlay = into instanceof Map ? into : null;
    const readBuffer = this.#readBuffer.buffer;
    for (const [pageNumber, page] of transaction.pages) {
      this.#walPages.add(pageNumber);
      // Pages kept from earlier pieces are copies already: moved, not copied again.
      if (overlay !== null)
        overlay.set(pageNumber, page.buffer === readBuffer ? page.slice() : page);
    }
    this.#databasePages = transaction.databasePages;
    if (!(into instanceof Map)) into.add(header, transaction, capturedAt);
  }

  /** The `-wal` file's header as it is now (`null`: no file, empty, or being written). */
  walHeaderOnDisk(): WalHeader | null {
    const fd = this.#context.opener.openIfExists(this.#walPath);
    if (fd === null) return null;
    try {
      return parseWalHeader(readAt(fd, 0, WAL_HEADER_BYTES));
    } finally {
      closeSync(fd);
    }
  }

  /** The wal-index header's counts (`null` when the `-shm` file is missing or unreadable). */
  readWalIndex(): ReturnType<typeof readWalIndexCommitted> {
    if (this.#closed) throw new Error(`the WAL capture of ${this.#context.path} is closed`);
    if (this.#shm === null) {
      try {
        this.#shm = lockedFileDescriptors.acquire(this.#shmPath);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
        throw error;
      }
    }
    return readWalIndexCommitted(this.#shm.fd);
  }

  /**
   * The `-wal` file's descriptor, kept open across captures (`null`: there
   * is no file). Opened again when the file it refers to was unlinked; an
   * inode other than the one this cycle was read from means the file was
   * replaced underneath.
   * @throws SqliteWalRestartedUnderneathError when it was replaced.
   */
  #walDescriptor(): number | null {
    if (this.#closed) throw new Error(`the WAL capture of ${this.#context.path} is closed`);
    if (this.#walFd !== null) {
      if (!maybeUnlinked(this.#walFd)) return this.#walFd;
      this.#closeWal();
    }
    const fd = this.#context.opener.openIfExists(this.#walPath);
    if (fd === null) return null;
    const { ino } = fstatSync(fd);
    if (this.#walInode !== null && ino !== this.#walInode) {
      closeSync(fd);
      const before = this.#walInode;
      this.reset();
      throw new SqliteWalRestartedUnderneathError(
        this.#context.path,
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

  /**
   * Reads into one buffer kept across captures (grown as needed): the bytes
   * are only valid until the next read, which is enough, because every page
   * taken from them is copied (into a commit record, or the snapshot's
   * overlay) before it.
   */
  #readInto(fd: number, offset: number, length: number): Uint8Array {
    if (this.#readBuffer.byteLength < length) this.#readBuffer = new Uint8Array(length);
    return readInto(fd, this.#readBuffer.subarray(0, length), offset);
  }

  /** Back to the start of the cycle of `header` (`null`: none, the WAL is empty or missing). */
  #rewind(header: WalHeader | null): void {
    this.#walHeader = header;
    // The running checksum starts from the header's.
    const checksum: [number, number] =
      header === null ? [0, 0] : [header.checksum1, header.checksum2];
    this.#committed = { offset: WAL_HEADER_BYTES, frame: 0, checksum };
    // A transaction read in part belongs to the cycle before, and was not
    // committed in it (a restart waits for every committed frame to be read).
    this.#open = null;
    this.#context.progress.forget();
  }

  #enterCycle(header: WalHeader): void {
    // A new cycle (new salts) needs no check of its own: SQLite restarts the
    // WAL only when every frame is in the database file and no read mark
    // above 0 is held, which the tap's readers allow only for captured frames
    // (see the module comment of tap.ts). The header's checkpoint sequence cannot be
    // used as a check: SQLite keeps it per connection, and a connection that
    // has not restarted the WAL itself writes 0 and fresh salts.
    if (header.pageSize !== this.#context.pageSize)
      throw new SqliteWalRestartedUnderneathError(
        this.#context.path,
        `WAL page size ${header.pageSize} differs from the database's ${this.#context.pageSize}`,
      );
    // The previous cycle was completely checkpointed before SQLite restarted
    // it, so the database file now holds all of it.
    this.#rewind(header);
    this.#walPages = new Set();
  }
}

/**
 * `transaction` (its frames of the last piece), completed by the pages its
 * earlier frames wrote, read by earlier pieces (`open`): a later version of
 * a page is written over the kept copy.
 */
function withOpenPages(open: OpenTransaction | null, transaction: WalTransaction): WalTransaction {
  if (open === null) return transaction;
  const pages = open.pages;
  for (const [pageNumber, page] of transaction.pages) {
    const kept = pages.get(pageNumber);
    if (kept !== undefined) kept.set(page);
    else pages.set(pageNumber, page);
  }
  return { ...transaction, pages };
}

/** `open` extended by the frames after the last commit of one piece (their pages copied out of it). */
function keepPages(
  open: OpenTransaction | null,
  pages: ReadonlyMap<number, Uint8Array>,
  verified: WalPosition,
): OpenTransaction {
  const kept = open?.pages ?? new Map<number, Uint8Array>();
  for (const [pageNumber, page] of pages) {
    const copy = kept.get(pageNumber);
    if (copy !== undefined) copy.set(page);
    else kept.set(pageNumber, page.slice());
  }
  return { verified, pages: kept };
}
