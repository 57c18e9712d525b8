/**
 * The commit log of one generation, held in memory from the first byte the
 * worker has not confirmed in the bucket: one record per commit, or, past
 * `maxHeldLogBytes` or `maxHeldLogRecords`, one batch per
 * {@link HeldLog.sealBatch}. Each record is encoded once, when added (a page
 * with a kept version as a patch, page-patch.ts), so the log is one fixed
 * byte stream however it is read, and a restore meets each patch's base
 * where the patch expects it. Records stay in commit order (an open batch
 * takes every commit until sealed); reads return whole records, and reads
 * and releases find their first record by binary search.
 */
import {
  type CommitRecord,
  commitsOfFrame,
  encodeCommitFrame,
  logCrc32,
  pageHash,
} from './commit-record.ts';
import { copyOf, diffPage, PageBases, type PatchRun } from './page-patch.ts';
import type { WalHeader, WalTransaction } from './wal-file.ts';

/** What a held log batches past, and what it patches against (see tap-options.ts for each). */
export interface HeldLogOptions {
  /** Log bytes held past which new commits are batched. */
  readonly maxHeldLogBytes: number;
  /** Records held past which new commits are batched. Default: no bound. */
  readonly maxHeldLogRecords?: number;
  /** Bytes of page versions kept as the bases of patches. Default 0: every page whole (SBC1/SBC2 only). */
  readonly maxPageBaseBytes?: number;
  /** Pages whose version in the generation's snapshot is known (its overlay): bases from the start. */
  readonly snapshotPages?: ReadonlyMap<number, Uint8Array>;
  /**
   * The snapshot's size in pages: an overlay page above it is not in the
   * snapshot a restore starts from (the WAL cycle held it before a shrink),
   * so it is no base. Default: no bound.
   */
  readonly snapshotDatabasePages?: number;
}

/** A record's fields but its pages, as one captured transaction gives them. */
type RecordFields = Omit<CommitRecord, 'pages' | 'patches' | 'patchHashes' | 'commits'>;

function fieldsOf(
  header: WalHeader,
  transaction: WalTransaction,
  capturedAt: number,
): RecordFields {
  return {
    pageSize: header.pageSize,
    databasePages: transaction.databasePages,
    commitTime: capturedAt,
    walSalt1: header.salt1,
    walSalt2: header.salt2,
    commitFrame: transaction.commitFrame,
  };
}

/** Commits being merged into one batch record (see `maxHeldLogBytes`, `maxHeldLogRecords`). */
interface OpenBatch {
  /** Newest version of each page the batched commits wrote (copies, owned by the batch). */
  readonly pages: Map<number, Uint8Array>;
  commits: number;
  /** The last batched commit's: the record's size, time, salts and commit frame. */
  last: RecordFields;
}

/** Log bytes read by {@link HeldLog.read}. */
export interface HeldLogRange {
  bytes: Uint8Array;
  commits: number;
  end: number;
  crc32: number;
}

export class HeldLog {
  readonly #pageSize: number;
  readonly #maxHeldLogBytes: number;
  readonly #maxHeldLogRecords: number;
  /** Log bytes from `logStart` on, in chunks (one per commit). */
  #chunks: Uint8Array[] = [];
  /**
   * Log offset of each chunk, in step with `chunks`: a read or release finds
   * its first record by binary search, so its cost does not grow with the
   * records held (hundreds of thousands under a writer that outruns the
   * worker; a linear scan made every read quadratic).
   */
  #chunkOffsets: number[] = [];
  #logStart = 0;
  #logEnd = 0;
  /** Commits in the log (sealed records only; see `batch`). */
  #commits = 0;
  /** Commits captured while the held log was over one of its bounds, not yet sealed into the log. */
  #batch: OpenBatch | null = null;

  /** The newest version of each page the log wrote: the bases of its patches. */
  readonly #bases: PageBases;
  readonly #patching: boolean;
  /** Database size after the last record encoded (the snapshot's before any). */
  #basesDatabasePages: number;

  constructor(pageSize: number, options: HeldLogOptions) {
    this.#pageSize = pageSize;
    this.#maxHeldLogBytes = options.maxHeldLogBytes;
    this.#maxHeldLogRecords = options.maxHeldLogRecords ?? Number.POSITIVE_INFINITY;
    const maxPageBaseBytes = options.maxPageBaseBytes ?? 0;
    this.#bases = new PageBases(maxPageBaseBytes);
    this.#patching = maxPageBaseBytes > 0;
    this.#basesDatabasePages = options.snapshotDatabasePages ?? Number.POSITIVE_INFINITY;
    if (this.#patching)
      for (const [pageNumber, page] of options.snapshotPages ?? [])
        if (page.byteLength === pageSize && pageNumber <= this.#basesDatabasePages)
          this.#bases.set(pageNumber, page);
  }

  /** Commits in the log (not counting an unsealed batch). */
  get commits(): number {
    return this.#commits;
  }

  /** Commits captured into the open batch, not yet in the log (0 without one). */
  get batchedCommits(): number {
    return this.#batch?.commits ?? 0;
  }

  /** Offset of the first log byte still held in memory. */
  get logStart(): number {
    return this.#logStart;
  }

  /** Offset after the last commit record. */
  get logEnd(): number {
    return this.#logEnd;
  }

  /** Adds one captured transaction: a record of its own, or into the open batch. */
  add(header: WalHeader, transaction: WalTransaction, capturedAt: number): void {
    // Once a batch is open, every commit joins it until it is sealed:
    // records stay in commit order.
    if (
      this.#batch !== null ||
      this.#logEnd - this.#logStart >= this.#maxHeldLogBytes ||
      this.#chunks.length >= this.#maxHeldLogRecords
    ) {
      this.#batchTransaction(header, transaction, capturedAt);
    } else {
      const record = { ...fieldsOf(header, transaction, capturedAt), pages: transaction.pages };
      this.#appendRecord(this.#encode(record), 1);
    }
  }

  /** Ends the open batch (if any): its commits become one record at the end of the log. */
  sealBatch(): void {
    const batch = this.#batch;
    if (batch === null) return;
    this.#batch = null;
    const { pages, commits, last } = batch;
    this.#appendRecord(
      this.#encode({ ...last, pageSize: this.#pageSize, pages, commits }),
      commits,
    );
  }

  /**
   * Puts `frame` (a whole commit record standing for `commits` commits)
   * before every record held, shifting their offsets by its length. Only
   * while nothing was released (`logStart` 0): offsets already handed to a
   * reader would move under it otherwise. A restart's delta uses it (the
   * changes made while backupd was not running come before every commit
   * captured since it opened).
   * @throws RangeError once anything was released.
   */
  prepend(frame: Uint8Array, commits: number): void {
    if (this.#logStart !== 0)
      throw new RangeError(
        `a record can only be put first before any release (log starts at ${this.#logStart})`,
      );
    this.#chunks.unshift(frame);
    this.#chunkOffsets = [0, ...this.#chunkOffsets.map((offset) => offset + frame.byteLength)];
    this.#logEnd += frame.byteLength;
    this.#commits += commits;
  }

  /**
   * The record as one frame, each page a patch against its base when it has
   * one and the patch is smaller than the page; every page becomes its own
   * base for the records after it, as long as the database keeps it (a
   * page above the record's size is dropped: see PatchablePages).
   */
  #encode(record: CommitRecord): Uint8Array {
    // Patches off: the pages as they are, records version 1 and 2 only.
    if (!this.#patching || record.pageSize !== this.#pageSize) return encodeCommitFrame(record);
    const whole = new Map<number, Uint8Array>();
    const patches = new Map<number, PatchRun[]>();
    const patchHashes = new Map<number, Uint8Array>();
    let shrunk = record.databasePages < this.#basesDatabasePages;
    for (const [pageNumber, page] of record.pages) {
      // An aligned copy of our own: compared word by word, then kept as the next base.
      const version = copyOf(page);
      const base = this.#bases.get(pageNumber);
      const runs = base === undefined ? null : diffPage(base, version, this.#pageSize);
      if (runs === null) whole.set(pageNumber, version);
      else {
        patches.set(pageNumber, runs);
        patchHashes.set(pageNumber, pageHash(version));
      }
      this.#bases.set(pageNumber, version);
      if (pageNumber > record.databasePages) shrunk = true;
    }
    // Only on a shrink (or a page written above the size): a scan of every
    // base per commit would cost the hot path.
    if (shrunk) this.#bases.dropAbove(record.databasePages);
    this.#basesDatabasePages = record.databasePages;
    return encodeCommitFrame({ ...record, pages: whole, patches, patchHashes });
  }

  #appendRecord(frame: Uint8Array, commits: number): void {
    this.#chunks.push(frame);
    this.#chunkOffsets.push(this.#logEnd);
    this.#logEnd += frame.byteLength;
    this.#commits += commits;
  }

  /** Merges one captured transaction into the open batch (its pages are copied). */
  #batchTransaction(header: WalHeader, transaction: WalTransaction, capturedAt: number): void {
    const last = fieldsOf(header, transaction, capturedAt);
    const batch = this.#batch ?? { pages: new Map<number, Uint8Array>(), commits: 0, last };
    this.#batch = batch;
    for (const [pageNumber, page] of transaction.pages) {
      const kept = batch.pages.get(pageNumber);
      if (kept) kept.set(page);
      else batch.pages.set(pageNumber, copyOf(page));
    }
    batch.commits += 1;
    batch.last = last;
  }

  /**
   * Log bytes in `[start, end)`, whole records only; with `atLeast`, that
   * many records even when they reach past `end`. `crc32` is the CRC-32 of
   * `bytes`, combined from the CRC each record carries in its header (see
   * {@link logCrc32}) rather than read again.
   */
  read(start: number, end: number, atLeast = 0): HeldLogRange | null {
    const chunks = this.#chunks;
    const offsets = this.#chunkOffsets;
    if (start < this.#logStart)
      throw new RangeError(`log bytes before ${this.#logStart} were released (asked for ${start})`);
    const first = firstChunkAtOrAfter(offsets, start);
    if (first > 0) {
      const before = offsets[first - 1]! + chunks[first - 1]!.byteLength;
      if (before > start) throw new RangeError(`offset ${start} is inside a commit record`);
    }
    const parts: Uint8Array[] = [];
    let commits = 0;
    let reached = start;
    for (let index = first; index < chunks.length; index += 1) {
      const chunk = chunks[index]!;
      const chunkEnd = offsets[index]! + chunk.byteLength;
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
  release(offset: number): void {
    const chunks = this.#chunks;
    const offsets = this.#chunkOffsets;
    // Records that end at or before `offset`: those that start before it,
    // less the last of them when `offset` falls inside it.
    let drop = firstChunkAtOrAfter(offsets, offset);
    if (drop > 0 && offsets[drop - 1]! + chunks[drop - 1]!.byteLength > offset) drop -= 1;
    if (drop === 0) return;
    const start = offsets[drop - 1]! + chunks[drop - 1]!.byteLength;
    // One splice, not a shift per record: tens of thousands of records per step.
    chunks.splice(0, drop);
    offsets.splice(0, drop);
    this.#logStart = start;
  }
}

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
