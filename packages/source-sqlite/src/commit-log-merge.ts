/**
 * Log compaction for the SQLite commit log: a run of consecutive records (the
 * decoded bodies of consecutive log objects) merged into ONE record: the
 * newest version of every page the run wrote, pages above its final size
 * included (a later record may grow over them without writing them), the
 * last record's size, time, salts and commit frame, and the run's commit
 * count. Replayed, it gives the run's file, and merged records merge again;
 * it is restorable at its end only, like a batch. Why:
 * docs/decisions/2026-12-06-commit-log-replay.md.
 */
import {
  COMMIT_RECORD_HEADER_BYTES,
  type CommitRecord,
  decodeCommitRecord,
  encodeCommitFrame,
  LOG_FRAME_HEADER_BYTES,
  PAGE_HASH_BYTES,
  splitLogFrames,
} from './commit-record.ts';
import { PageWrites, type PatchOverlay } from './page-patch.ts';
import { PatchablePages } from './patchable-pages.ts';

/** Default of `maxPageBytes`: 512 MiB of distinct pages held. */
export const DEFAULT_MAX_MERGE_PAGE_BYTES = 512 * 1024 * 1024;

/** The most commits one record can stand for (its u32 count field). */
const MAX_RECORD_COMMITS = 0xffffffff;
/** The largest payload one frame can carry (its u32 length field). */
const MAX_FRAME_PAYLOAD_BYTES = 0xffffffff;

/** A log the merger refuses, or a merge it cannot finish; the message names the input and why. */
export class CommitLogMergeError extends Error {
  /** Whether the same call, made again later, may succeed with nothing else changed. */
  get retryable(): boolean {
    return false;
  }

  constructor(message: string, options: { cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'CommitLogMergeError';
  }
}

export interface CommitLogMergerOptions {
  /**
   * Bytes of distinct pages the merger may hold (pages × page size); an
   * `add` that would pass it throws {@link CommitLogMergeError}. Default
   * {@link DEFAULT_MAX_MERGE_PAGE_BYTES} (512 MiB).
   */
  readonly maxPageBytes?: number;
}

/** The fields of the last record the merged one takes over (its pages are merged apart). */
type LastRecord = Pick<
  CommitRecord,
  'databasePages' | 'commitTime' | 'walSalt1' | 'walSalt2' | 'commitFrame'
>;

/** `action()`, a `RangeError` it throws turned into a {@link CommitLogMergeError} led by `where`. */
function refusing<T>(where: string, action: () => T): T {
  try {
    return action();
  } catch (error) {
    if (!(error instanceof RangeError)) throw error;
    throw new CommitLogMergeError(`${where}: ${error.message}`, { cause: error });
  }
}

/** The page size of the run after `record` (`pageSize` so far, `null` before any). */
function runPageSize(record: CommitRecord, pageSize: number | null, where: string): number {
  const size = record.pageSize;
  if (pageSize === null && (size < 512 || size > 65536 || (size & (size - 1)) !== 0))
    throw new CommitLogMergeError(
      `${where} has ${size}-byte pages, not a SQLite page size (a power of two from 512 to 65536)`,
    );
  if (pageSize !== null && size !== pageSize)
    throw new CommitLogMergeError(
      `${where} has ${size}-byte pages, the records before it ${pageSize}-byte pages`,
    );
  return size;
}

/**
 * Merges consecutive commit-log bodies, fed in log order, into one record
 * (see the module comment). One use: `add` each body, then `finish` once.
 */
export class CommitLogMerger {
  readonly #maxPageBytes: number;
  #pageSize: number | null = null;
  /** What the run wrote: each page's newest version, or its patches overlaid; set by the first record. */
  #writes: PageWrites | null = null;
  /** Pages a patch of the run may be put over (from an unknown start: every page until a size drops it). */
  #patchable = new PatchablePages(Number.POSITIVE_INFINITY);
  #commits = 0;
  #last: LastRecord | null = null;
  /** `add` calls so far, failed ones too: the input number errors name. */
  #inputs = 0;
  #finished = false;

  constructor(options: CommitLogMergerOptions = {}) {
    const max = options.maxPageBytes ?? DEFAULT_MAX_MERGE_PAGE_BYTES;
    if (!Number.isSafeInteger(max) || max < 0)
      throw new RangeError(`maxPageBytes must be a non-negative integer, not ${max}`);
    this.#maxPageBytes = max;
  }

  /** Commits of the bodies added so far (a batch counts all of its commits). */
  get commits(): number {
    return this.#commits;
  }

  /** Page size of the records added, `null` before any. */
  get pageSize(): number | null {
    return this.#pageSize;
  }

  /** Commit time of the last record added, `null` before any. */
  get lastCommitTime(): number | null {
    return this.#last?.commitTime ?? null;
  }

  /**
   * Adds the next body: whole frames, concatenated, as a log object decodes
   * to (a merged output is one). All or nothing: the body is checked whole
   * before any of it is merged, so a throw leaves the merger as it was.
   * @throws CommitLogMergeError (naming the input and record) on a frame
   *   failing its CRC-32, a partial frame at the end, a body without records,
   *   a record that does not decode, a page size other than the earlier
   *   records', more than `maxPageBytes` of distinct pages, more commits than
   *   a record counts or bytes than a frame carries (u32 fields), a patch of
   *   a page an earlier size dropped with no write since (patchable-pages.ts:
   *   merged, the drop would vanish), or a call after {@link finish}.
   */
  add(body: Uint8Array): void {
    if (this.#finished)
      throw new CommitLogMergeError('add() after finish(): this merger has already merged its run');
    this.#inputs += 1;
    const input = `input ${this.#inputs}`;
    // Check the whole body before merging any of it.
    let pageSize = this.#pageSize;
    let commits = this.#commits;
    const patchable = this.#patchable.clone();
    const records: CommitRecord[] = [];
    const newPageNumbers = new Set<number>();
    for (const [index, payload] of framesOf(body, input).entries()) {
      const at = payload.byteOffset - body.byteOffset - LOG_FRAME_HEADER_BYTES;
      const where = `${input}, record ${index + 1} (frame at byte ${at})`;
      const record = refusing(where, () => decodeCommitRecord(payload));
      pageSize = runPageSize(record, pageSize, where);
      // Merged, the drop before a patch without a base would vanish and the patch look sound.
      const unheld = patchable.unheld(record);
      if (unheld !== null)
        throw new CommitLogMergeError(
          `${where} patches page ${unheld}, which a record before it in the run dropped (its database had ${patchable.databasePages} pages) and none wrote since: the patch has no base`,
        );
      patchable.advance(record);
      commits += record.commits ?? 1;
      for (const pageNumber of [...record.pages.keys(), ...(record.patches?.keys() ?? [])])
        if (!this.#writes?.has(pageNumber)) newPageNumbers.add(pageNumber);
      records.push(record);
    }
    // pageSize is set: the body holds at least one record.
    const size = pageSize!;
    this.#checkBounds(input, commits, (this.#writes?.size ?? 0) + newPageNumbers.size, size);
    // Merge, in log order: a later version of a page replaces the earlier.
    // Copied (or copied over the held version): the caller may reuse `body`.
    const writes = this.#writes ?? new PageWrites(size);
    for (const record of records) {
      for (const [pageNumber, page] of record.pages) writes.whole(pageNumber, page);
      for (const [pageNumber, runs] of record.patches ?? [])
        writes.patch(pageNumber, runs, record.patchHashes?.get(pageNumber));
    }
    const { databasePages, commitTime, walSalt1, walSalt2, commitFrame } = records.at(-1)!;
    this.#writes = writes;
    this.#patchable = patchable;
    this.#pageSize = size;
    this.#commits = commits;
    this.#last = { databasePages, commitTime, walSalt1, walSalt2, commitFrame };
  }

  /** Refuses a run of more commits than a record counts, pages than `maxPageBytes`, or bytes than a frame. */
  #checkBounds(input: string, commits: number, pageCount: number, pageSize: number): void {
    if (commits > MAX_RECORD_COMMITS)
      throw new CommitLogMergeError(
        `${input}: the run would stand for ${commits} commits, more than one record can (${MAX_RECORD_COMMITS})`,
      );
    // Counted as whole pages; an only-patched page holds twice that.
    const pageBytes = pageCount * pageSize;
    if (pageBytes > this.#maxPageBytes)
      throw new CommitLogMergeError(
        `${input}: the run touches ${pageCount} distinct ${pageSize}-byte pages (${pageBytes} bytes), more than maxPageBytes (${this.#maxPageBytes})`,
      );
    // At most: a whole page, or a patch of runs no shorter than a byte apart, each.
    const payloadBytes =
      COMMIT_RECORD_HEADER_BYTES + pageCount * (9 + PAGE_HASH_BYTES + 5 * pageSize);
    if (payloadBytes > MAX_FRAME_PAYLOAD_BYTES)
      throw new CommitLogMergeError(
        `${input}: the merged record would be ${payloadBytes} bytes, more than one frame carries (${MAX_FRAME_PAYLOAD_BYTES})`,
      );
  }

  /**
   * What the merged run wrote, before {@link finish}: each page's newest
   * whole version (`pages`), and for a page it only patched, its patches
   * overlaid (`patches`: the bytes to put over the version before the run).
   * Views of the merger's own buffers: read them before the next `add`.
   */
  get written(): {
    readonly pages: ReadonlyMap<number, Uint8Array>;
    readonly patches: ReadonlyMap<number, PatchOverlay>;
    readonly databasePages: number | null;
  } {
    return {
      pages: this.#writes?.pages ?? new Map(),
      patches: this.#writes?.patches ?? new Map(),
      databasePages: this.#last?.databasePages ?? null,
    };
  }

  /**
   * The merged run as one frame: SBC1 for a single commit, an SBC2 batch of
   * {@link commits} otherwise, SBC4 when a page of it is only patched (SBC3
   * when such a page's last patch came without its hash). Ends the merger
   * (its pages are let go; `add` and `finish` throw from now on;
   * {@link commits} and {@link lastCommitTime} still answer).
   * @throws CommitLogMergeError when nothing was added, or when called twice.
   */
  finish(): Uint8Array {
    if (this.#finished)
      throw new CommitLogMergeError(
        'finish() called twice: this merger has already merged its run',
      );
    const last = this.#last;
    if (last === null || this.#pageSize === null || this.#commits === 0)
      throw new CommitLogMergeError('nothing to merge: no commit records were added');
    const overlays = [...(this.#writes?.patches ?? [])];
    const frame = refusing('the merged record cannot be encoded', () =>
      encodeCommitFrame({
        ...last,
        pageSize: this.#pageSize!,
        pages: this.#writes?.pages ?? new Map(),
        patches: new Map(overlays.map(([pageNumber, o]) => [pageNumber, o.runs()])),
        patchHashes: new Map(
          overlays.flatMap(([pageNumber, o]) => (o.hash === null ? [] : [[pageNumber, o.hash]])),
        ),
        commits: this.#commits,
      }),
    );
    this.#finished = true;
    this.#writes = null;
    return frame;
  }
}

/** The payloads of `body`, whole frames that pass their CRC-32 and at least one. */
function framesOf(body: Uint8Array, input: string): Uint8Array[] {
  const split = refusing(input, () => splitLogFrames(body));
  if (split.rest.byteLength > 0)
    throw new CommitLogMergeError(
      `${input} ends inside a frame: ${split.rest.byteLength} bytes after its last whole frame (at byte ${body.byteLength - split.rest.byteLength} of ${body.byteLength})`,
    );
  if (split.payloads.length === 0)
    throw new CommitLogMergeError(`${input} holds no commit records (an empty body)`);
  return split.payloads;
}
