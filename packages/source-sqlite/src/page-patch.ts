/**
 * Page patches: a page version written as the byte runs (ascending,
 * non-overlapping) in which it differs from the page's previous version in
 * the same commit log, so a 100-byte change to a 4 KiB page ships about 100
 * bytes (SBC3/SBC4, docs/format.md). Applying one writes the runs only, so
 * it is exact only over the version it was computed against. Patches merge
 * without their base (docs/decisions/2026-12-06-commit-log-replay.md). A base
 * is only ever a version the restore holds there: none above the previous
 * record's size, so a page that grows back after a shrink is written whole
 * first (PatchablePages, docs/decisions/2026-12-05-patch-bases-and-shrinks.md).
 * Also the page writes of consecutive records merged, as compaction and a
 * restore gather them.
 */
import type { FileHandle } from 'node:fs/promises';

/** One run of a patch: `bytes` replace the page's bytes from `offset` on. */
export interface PatchRun {
  readonly offset: number;
  readonly bytes: Uint8Array;
}

/** Bytes a patch takes in a record: a u32 run count, then per run a u32 offset, a u32 length and the bytes. */
export function patchEncodedBytes(runs: readonly PatchRun[]): number {
  let bytes = 4;
  for (const run of runs) bytes += 8 + run.bytes.byteLength;
  return bytes;
}

/**
 * A copy of `bytes` in a buffer of its own. Not `slice()`: on a Node
 * `Buffer` that is a view of the same memory, not a copy.
 */
export function copyOf(bytes: Uint8Array): Uint8Array<ArrayBuffer> {
  const copy = new Uint8Array(bytes.byteLength);
  copy.set(bytes);
  return copy;
}

/**
 * Equal 4-byte words between two differing ones up to which both stay in
 * one run: a gap of 8 bytes costs what a run's header costs.
 */
const MAX_GAP_WORDS = 2;

/**
 * The runs in which `page` differs from `base` (both one page, of a size
 * that is a multiple of 4), or `null` when writing them would take at least
 * `maxEncodedBytes` (see {@link patchEncodedBytes}): the whole page is the
 * better record then. Runs are views into `page`. A page equal to its base
 * gives no runs.
 *
 * Compares 4-byte words (an unaligned view is copied first); the result
 * is the same for any alignment.
 */
export function diffPage(
  base: Uint8Array,
  page: Uint8Array,
  maxEncodedBytes: number,
): PatchRun[] | null {
  if (base.byteLength !== page.byteLength || page.byteLength % 4 !== 0)
    throw new RangeError(
      `a patch compares two pages of one size, a multiple of 4 (${base.byteLength} and ${page.byteLength} bytes)`,
    );
  const words = page.byteLength / 4;
  // Words of both pages, compared as 32-bit integers; unaligned views are
  // copied first (the tap's own copies are aligned, so this is the rare path).
  const a = wordsOf(base, words);
  const b = wordsOf(page, words);
  const runs: PatchRun[] = [];
  let encoded = 4;
  let word = 0;
  while (word < words) {
    // Equal words in blocks of 8 (one branch per block: most of a page is
    // unchanged), then one by one.
    while (
      word + 8 <= words &&
      ((a[word]! ^ b[word]!) |
        (a[word + 1]! ^ b[word + 1]!) |
        (a[word + 2]! ^ b[word + 2]!) |
        (a[word + 3]! ^ b[word + 3]!) |
        (a[word + 4]! ^ b[word + 4]!) |
        (a[word + 5]! ^ b[word + 5]!) |
        (a[word + 6]! ^ b[word + 6]!) |
        (a[word + 7]! ^ b[word + 7]!)) ===
        0
    )
      word += 8;
    if (word >= words) break;
    if (a[word] === b[word]) {
      word += 1;
      continue;
    }
    let lastDiffering = word;
    let next = word + 1;
    while (next < words && next - lastDiffering <= MAX_GAP_WORDS) {
      if (a[next] !== b[next]) lastDiffering = next;
      next += 1;
    }
    let start = word * 4;
    while (base[start] === page[start]) start += 1;
    let end = lastDiffering * 4 + 4;
    while (base[end - 1] === page[end - 1]) end -= 1;
    encoded += 8 + (end - start);
    if (encoded >= maxEncodedBytes) return null;
    runs.push({ offset: start, bytes: page.subarray(start, end) });
    word = lastDiffering + 1;
  }
  return runs;
}

/** `bytes` as 32-bit words: a view when aligned, else a view of an aligned copy. */
function wordsOf(bytes: Uint8Array, words: number): Uint32Array {
  if (bytes.byteOffset % 4 === 0) return new Uint32Array(bytes.buffer, bytes.byteOffset, words);
  return new Uint32Array(copyOf(bytes).buffer, 0, words);
}

/** Writes `runs` into `page` (a whole version, or a patch's overlay buffer). */
export function applyPatch(page: Uint8Array, runs: readonly PatchRun[]): void {
  for (const run of runs) page.set(run.bytes, run.offset);
}

/**
 * A patch's runs checked against its page size: ascending, non-overlapping,
 * non-empty, inside the page. Returns a problem, or `null` when sound.
 */
export function patchProblem(runs: readonly PatchRun[], pageSize: number): string | null {
  let end = 0;
  for (const [index, run] of runs.entries()) {
    if (run.bytes.byteLength === 0) return `run ${index + 1} is empty`;
    if (run.offset < end)
      return `run ${index + 1} starts at byte ${run.offset}, before the end of the run before it (${end})`;
    end = run.offset + run.bytes.byteLength;
    if (end > pageSize)
      return `run ${index + 1} ends at byte ${end}, past the ${pageSize}-byte page`;
  }
  return null;
}

/**
 * Patches of one page merged in log order, without the page's base: a
 * page-sized buffer of the bytes written so far and a mask of which they
 * are. `runs()` gives them back as one patch.
 */
export class PatchOverlay {
  readonly bytes: Uint8Array;
  readonly #written: Uint8Array;
  #hash: Uint8Array | null = null;

  constructor(pageSize: number) {
    this.bytes = new Uint8Array(pageSize);
    this.#written = new Uint8Array(pageSize);
  }

  /** The hash of the page the last patch gives, as its record carried it (copied); `null`: it carried none. */
  get hash(): Uint8Array | null {
    return this.#hash;
  }

  /** Overlays a later patch of the page, with the hash of the page it gives when its record has one. */
  add(runs: readonly PatchRun[], hash?: Uint8Array): void {
    for (const run of runs) {
      this.bytes.set(run.bytes, run.offset);
      this.#written.fill(1, run.offset, run.offset + run.bytes.byteLength);
    }
    this.#hash = hash === undefined ? null : copyOf(hash);
  }

  /** `base` with every byte written so far put over it: the page's version after the patches. */
  over(base: Uint8Array): Uint8Array {
    const page = copyOf(base);
    applyPatch(page, this.runs());
    return page;
  }

  /** The bytes written so far as one patch: maximal runs of written bytes, ascending. */
  runs(): PatchRun[] {
    const runs: PatchRun[] = [];
    const written = this.#written;
    for (let start = written.indexOf(1); start !== -1; ) {
      const end = written.indexOf(0, start);
      const stop = end === -1 ? written.byteLength : end;
      runs.push({ offset: start, bytes: this.bytes.subarray(start, stop) });
      start = end === -1 ? -1 : written.indexOf(1, end);
    }
    return runs;
  }
}

/**
 * The newest version the log holds of each page it wrote, as the bases of
 * the patches the next records may carry; bounded by bytes, least recently
 * written pages dropped first (a page with no base is written whole).
 *
 * Guarantees: `get` answers only a version the log (or the snapshot the log
 * applies onto, see `seed`) holds at its end, byte for byte: the caller
 * hands `set` the very version it writes to the log, in log order, and the
 * versions kept are never changed in place.
 */
export class PageBases {
  readonly #maxBytes: number;
  readonly #pages = new Map<number, Uint8Array>();
  #bytes = 0;

  /** `maxBytes` 0 keeps nothing: every page is written whole. */
  constructor(maxBytes: number) {
    if (!Number.isSafeInteger(maxBytes) || maxBytes < 0)
      throw new RangeError(
        `maxPageBaseBytes must be a whole number of bytes (0 or more), not ${maxBytes}`,
      );
    this.#maxBytes = maxBytes;
  }

  /** Bytes of the versions kept. */
  get bytes(): number {
    return this.#bytes;
  }

  /** The version of `pageNumber` at the log's end, when kept. */
  get(pageNumber: number): Uint8Array | undefined {
    return this.#pages.get(pageNumber);
  }

  /**
   * `page` is now the version of `pageNumber` at the log's end. It is kept
   * as it is: the caller must not change it afterwards.
   */
  set(pageNumber: number, page: Uint8Array): void {
    const before = this.#pages.get(pageNumber);
    if (before !== undefined) {
      this.#pages.delete(pageNumber);
      this.#bytes -= before.byteLength;
    }
    if (page.byteLength > this.#maxBytes) return;
    this.#pages.set(pageNumber, page);
    this.#bytes += page.byteLength;
    // Map order is insertion order: the first entries were written longest ago.
    for (const [oldest, version] of this.#pages) {
      if (this.#bytes <= this.#maxBytes) break;
      this.#pages.delete(oldest);
      this.#bytes -= version.byteLength;
    }
  }

  /**
   * The database now has `databasePages` pages: the versions of pages above
   * it are no base any more (the restore cuts them off, or never had them).
   */
  dropAbove(databasePages: number): void {
    for (const [pageNumber, version] of this.#pages) {
      if (pageNumber <= databasePages) continue;
      this.#pages.delete(pageNumber);
      this.#bytes -= version.byteLength;
    }
  }
}

/**
 * Page writes of consecutive records merged in log order, without the
 * pages' bases: each page's newest whole version, or, for a page only
 * patched so far, its patches overlaid. A patch over a whole version
 * gives a whole version; a whole version replaces either. What compaction
 * merges into one record and what a restore gathers before writing.
 */
export class PageWrites {
  readonly #pageSize: number;
  /** Page number → newest whole version (buffers of our own). */
  #pages = new Map<number, Uint8Array>();
  /** Page number → patches of a page with no whole version held (no page in both maps). */
  #patches = new Map<number, PatchOverlay>();

  constructor(pageSize: number) {
    this.#pageSize = pageSize;
  }

  /** Whole versions held, by page number. */
  get pages(): ReadonlyMap<number, Uint8Array> {
    return this.#pages;
  }

  /** Pages only patched, by page number. */
  get patches(): ReadonlyMap<number, PatchOverlay> {
    return this.#patches;
  }

  /** Distinct pages held, whole or only patched. */
  get size(): number {
    return this.#pages.size + this.#patches.size;
  }

  /** Whether `pageNumber` is held, whole or only patched. */
  has(pageNumber: number): boolean {
    return this.#pages.has(pageNumber) || this.#patches.has(pageNumber);
  }

  /** A later whole version of a page (copied). */
  whole(pageNumber: number, page: Uint8Array): void {
    this.#patches.delete(pageNumber);
    const held = this.#pages.get(pageNumber);
    if (held === undefined) this.#pages.set(pageNumber, copyOf(page));
    else held.set(page);
  }

  /**
   * A later patch of a page: over its whole version when held, else over
   * its earlier patches (with `hash`, the hash of the page it gives).
   */
  patch(pageNumber: number, runs: readonly PatchRun[], hash?: Uint8Array): void {
    const held = this.#pages.get(pageNumber);
    if (held !== undefined) {
      applyPatch(held, runs);
      return;
    }
    const overlay = this.#patches.get(pageNumber) ?? new PatchOverlay(this.#pageSize);
    this.#patches.set(pageNumber, overlay);
    overlay.add(runs, hash);
  }

  /** Lets everything held go. */
  clear(): void {
    this.#pages = new Map();
    this.#patches = new Map();
  }
}

/**
 * A restore's page writes, gathered in memory and written in one pass: each
 * page once, in page order, however many records wrote it, so a hundred
 * thousand small commits to a few hot pages become a few writes. Exact as
 * long as nothing reads the file in between: a patch over a gathered whole
 * page is applied here, one without is kept as runs and put over the file's
 * page when written (docs/decisions/2026-12-06-commit-log-replay.md). Holds
 * the distinct pages (twice if only patched); the caller writes them out
 * past its bound ({@link bytes}).
 */
export class PendingPageWrites {
  readonly #pageSize: number;
  readonly #writes: PageWrites;

  constructor(pageSize: number) {
    this.#pageSize = pageSize;
    this.#writes = new PageWrites(pageSize);
  }

  /** Memory held: page size per page gathered, twice for an only-patched one. */
  get bytes(): number {
    return (this.#writes.size + this.#writes.patches.size) * this.#pageSize;
  }

  /** Gathers one commit record's writes (its pages must be of this page size). */
  add(record: {
    readonly pages: ReadonlyMap<number, Uint8Array>;
    readonly patches?: ReadonlyMap<number, readonly PatchRun[]>;
  }): void {
    for (const [pageNumber, page] of record.pages) this.#writes.whole(pageNumber, page);
    for (const [pageNumber, runs] of record.patches ?? []) this.#writes.patch(pageNumber, runs);
  }

  /**
   * Writes what was gathered into `handle` (page n at `(n - 1) × page size`),
   * in page order, and forgets it. An only-patched page is read from the
   * file, its runs put over it, and written back (the restore checks first
   * that the file holds its base: PatchablePages in patchable-pages.ts).
   */
  async writeTo(handle: FileHandle, signal?: AbortSignal): Promise<void> {
    const size = this.#pageSize;
    const { pages, patches } = this.#writes;
    const pageNumbers = [...pages.keys(), ...patches.keys()].sort((a, b) => a - b);
    for (const pageNumber of pageNumbers) {
      signal?.throwIfAborted();
      const position = (pageNumber - 1) * size;
      let page = pages.get(pageNumber);
      if (page === undefined) {
        const onFile = new Uint8Array(size);
        await handle.read(onFile, 0, size, position);
        page = patches.get(pageNumber)!.over(onFile);
      }
      await handle.write(page, 0, size, position);
    }
    this.#writes.clear();
  }
}
