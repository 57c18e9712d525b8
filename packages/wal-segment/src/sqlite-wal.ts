/**
 * SQLite's write-ahead log (https://www.sqlite.org/fileformat.html#the_write_ahead_log):
 * a 32-byte header, then frames of a 24-byte header and a page, every field a
 * big-endian u32 (the layout is in the package README). A frame is valid when
 * its salts equal the header's, its page number is not 0 and its checksum
 * matches; the log is the longest run of valid frames, usable up to its last
 * commit frame (non-zero database size). A WAL restart writes new salts over
 * the header and new frames over old ones; stale frames past the new end fail
 * the salt check, so they never read as commits. Checksum: for each pair of
 * words (x0, x1), in the magic's byte order, `s0 += x0 + s1; s1 += x1 + s0`
 * mod 2^32; a frame's continues the previous one's over its first 8 bytes and page.
 */

import { open } from 'node:fs/promises';
import { endianness } from 'node:os';
import { SqliteWalHeaderError } from './errors.ts';
import { WORD_SUMS_BLOCK_BYTES, wasmWordSums } from './word-sums-wasm.ts';

export const SQLITE_WAL_HEADER_BYTES = 32;
export const SQLITE_WAL_FRAME_HEADER_BYTES = 24;
export const SQLITE_WAL_MAGIC_LITTLE_ENDIAN = 0x377f0682;
export const SQLITE_WAL_MAGIC_BIG_ENDIAN = 0x377f0683;
export const SQLITE_WAL_FORMAT_VERSION = 3007000;

const HOST_BIG_ENDIAN = endianness() === 'BE';

/** The WAL header's fields. */
export interface SqliteWalHeader {
  magic: number;
  /** The byte order of the checksum words, from the magic's low bit. */
  checksumByteOrder: 'little-endian' | 'big-endian';
  formatVersion: number;
  /**
   * Page size in bytes. The WAL header stores 65536 as is; the value 1 (the
   * database header's spelling of 65536) is refused here, as SQLite's own
   * WAL recovery refuses it.
   */
  pageSize: number;
  checkpointSequence: number;
  salt1: number;
  salt2: number;
  checksum1: number;
  checksum2: number;
}

/** Bytes of one frame: its 24-byte header and one page. */
export function sqliteWalFrameBytes(pageSize: number): number {
  return SQLITE_WAL_FRAME_HEADER_BYTES + pageSize;
}

function readU32BE(bytes: Uint8Array, at: number): number {
  return (
    ((bytes[at]! << 24) | (bytes[at + 1]! << 16) | (bytes[at + 2]! << 8) | bytes[at + 3]!) >>> 0
  );
}

// The checksum state lives in two module variables so the inner loop returns
// nothing and allocates nothing.
let sum0 = 0;
let sum1 = 0;

function byteSwap(x: number): number {
  return (x << 24) | ((x & 0xff00) << 8) | ((x >>> 8) & 0xff00) | (x >>> 24);
}

/**
 * Below this many words, the call into WebAssembly costs more than it saves
 * (frame headers are 2 words, pages 128 words and more).
 */
const WASM_MIN_WORDS = 64;

/**
 * Adds `count` (even) words of `words` from `index` to (sum0, sum1). The main
 * loop is unrolled to 8 words: V8 then runs it about three times as fast as
 * the plain 2-word loop (the sums are a serial dependency chain, so the loop
 * overhead is what unrolling removes).
 */
function addWords(words: Int32Array, index: number, count: number, swap: boolean): void {
  let s0 = sum0;
  let s1 = sum1;
  let i = index;
  const end = index + count;
  // Whole 8-word blocks through WebAssembly where it reads the words in
  // this order (little-endian); the tail, short inputs and the other order
  // below.
  if (count >= WASM_MIN_WORDS && swap === HOST_BIG_ENDIAN && wasmWordSums !== null) {
    const blockWords = count - (count % (WORD_SUMS_BLOCK_BYTES >>> 2));
    wasmWordSums.add(
      new Uint8Array(words.buffer, words.byteOffset + index * 4, blockWords * 4),
      s0,
      s1,
    );
    s0 = wasmWordSums.sums[0]!;
    s1 = wasmWordSums.sums[1]!;
    i += blockWords;
  }
  const unrolledEnd = index + (count & ~7);
  if (swap) {
    for (; i < unrolledEnd; i += 8) {
      s0 = (s0 + byteSwap(words[i]!) + s1) | 0;
      s1 = (s1 + byteSwap(words[i + 1]!) + s0) | 0;
      s0 = (s0 + byteSwap(words[i + 2]!) + s1) | 0;
      s1 = (s1 + byteSwap(words[i + 3]!) + s0) | 0;
      s0 = (s0 + byteSwap(words[i + 4]!) + s1) | 0;
      s1 = (s1 + byteSwap(words[i + 5]!) + s0) | 0;
      s0 = (s0 + byteSwap(words[i + 6]!) + s1) | 0;
      s1 = (s1 + byteSwap(words[i + 7]!) + s0) | 0;
    }
    for (; i < end; i += 2) {
      s0 = (s0 + byteSwap(words[i]!) + s1) | 0;
      s1 = (s1 + byteSwap(words[i + 1]!) + s0) | 0;
    }
  } else {
    for (; i < unrolledEnd; i += 8) {
      s0 = (s0 + words[i]! + s1) | 0;
      s1 = (s1 + words[i + 1]! + s0) | 0;
      s0 = (s0 + words[i + 2]! + s1) | 0;
      s1 = (s1 + words[i + 3]! + s0) | 0;
      s0 = (s0 + words[i + 4]! + s1) | 0;
      s1 = (s1 + words[i + 5]! + s0) | 0;
      s0 = (s0 + words[i + 6]! + s1) | 0;
      s1 = (s1 + words[i + 7]! + s0) | 0;
    }
    for (; i < end; i += 2) {
      s0 = (s0 + words[i]! + s1) | 0;
      s1 = (s1 + words[i + 1]! + s0) | 0;
    }
  }
  sum0 = s0;
  sum1 = s1;
}

/** An Int32Array over `bytes`, copying only when `bytes` is not 4-byte aligned. */
function wordsOf(bytes: Uint8Array): Int32Array {
  if (bytes.byteOffset % 4 === 0) {
    return new Int32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength >>> 2);
  }
  // Copied explicitly: `slice` of a Node Buffer is a view, not a copy.
  const copy = new Uint8Array(bytes.byteLength);
  copy.set(bytes);
  return new Int32Array(copy.buffer, 0, bytes.byteLength >>> 2);
}

/**
 * SQLite's WAL checksum of `bytes` (a multiple of 8 bytes), continuing from
 * `initial`, with words read in `byteOrder`. Returns the two unsigned sums.
 */
export function sqliteWalChecksum(
  bytes: Uint8Array,
  byteOrder: 'little-endian' | 'big-endian',
  initial: readonly [number, number] = [0, 0],
): [number, number] {
  if (bytes.byteLength % 8 !== 0) throw new RangeError('checksummed bytes must be a multiple of 8');
  sum0 = initial[0] | 0;
  sum1 = initial[1] | 0;
  addWords(
    wordsOf(bytes),
    0,
    bytes.byteLength >>> 2,
    (byteOrder === 'big-endian') !== HOST_BIG_ENDIAN,
  );
  return [sum0 >>> 0, sum1 >>> 0];
}

/** Why the first 32 bytes of `bytes` are not a valid WAL header, or undefined. */
export function sqliteWalHeaderProblem(bytes: Uint8Array): string | undefined {
  if (bytes.byteLength < SQLITE_WAL_HEADER_BYTES) {
    return `${bytes.byteLength} bytes, shorter than the ${SQLITE_WAL_HEADER_BYTES}-byte header`;
  }
  const magic = readU32BE(bytes, 0);
  if (magic !== SQLITE_WAL_MAGIC_LITTLE_ENDIAN && magic !== SQLITE_WAL_MAGIC_BIG_ENDIAN) {
    return `magic 0x${magic.toString(16)} is not 0x377f0682 or 0x377f0683`;
  }
  const version = readU32BE(bytes, 4);
  if (version !== SQLITE_WAL_FORMAT_VERSION) {
    return `format version ${version} is not ${SQLITE_WAL_FORMAT_VERSION}`;
  }
  const pageSize = readU32BE(bytes, 8);
  if (pageSize < 512 || pageSize > 65536 || (pageSize & (pageSize - 1)) !== 0) {
    return `page size ${pageSize} is not a power of two in 512..65536`;
  }
  const order = magic === SQLITE_WAL_MAGIC_BIG_ENDIAN ? 'big-endian' : 'little-endian';
  const [c1, c2] = sqliteWalChecksum(bytes.subarray(0, 24), order);
  if (c1 !== readU32BE(bytes, 24) || c2 !== readU32BE(bytes, 28)) {
    return 'header checksum does not match';
  }
  return undefined;
}

/** The header in the first 32 bytes of `bytes`. Throws {@link SqliteWalHeaderError} when it is not valid. */
export function parseSqliteWalHeader(bytes: Uint8Array): SqliteWalHeader {
  const problem = sqliteWalHeaderProblem(bytes);
  if (problem !== undefined) throw new SqliteWalHeaderError(problem);
  const magic = readU32BE(bytes, 0);
  return {
    magic,
    checksumByteOrder: magic === SQLITE_WAL_MAGIC_BIG_ENDIAN ? 'big-endian' : 'little-endian',
    formatVersion: readU32BE(bytes, 4),
    pageSize: readU32BE(bytes, 8),
    checkpointSequence: readU32BE(bytes, 12),
    salt1: readU32BE(bytes, 16),
    salt2: readU32BE(bytes, 20),
    checksum1: readU32BE(bytes, 24),
    checksum2: readU32BE(bytes, 28),
  };
}

/** Why a scan stopped before the end of its input (or `'end-of-input'`). */
export type SqliteWalEnd =
  | 'end-of-input'
  | 'invalid-header'
  | 'salt-mismatch'
  | 'invalid-page-number'
  | 'checksum-mismatch';

/** What a scan of a WAL found. */
export interface SqliteWalScan {
  /** The header, or null when the input has none (too short, or invalid: see `headerProblem`). */
  header: SqliteWalHeader | null;
  headerProblem: string | null;
  /**
   * Offset just past the last valid commit frame: the bytes a reader may
   * use. 32 with a valid header and no commit; 0 without a valid header.
   */
  validLength: number;
  /** Commit frames in `0..validLength`. */
  commits: number;
  /** Frames in `0..validLength`. */
  frames: number;
  /** The database size in pages after the last commit (0 without a commit). */
  databasePages: number;
  /** The cumulative checksum at `validLength` (the header's when there is no commit). */
  checksum: [number, number];
  /** Valid frames after the last commit (a transaction not yet committed, or abandoned). */
  uncommittedFrames: number;
  /** Why the scan stopped: a stale or corrupt frame, or simply the end of the input. */
  end: SqliteWalEnd;
}

/**
 * Scans a WAL fed in chunks. Chunks may split the stream anywhere: after the
 * same bytes, the result equals {@link scanSqliteWal} of the whole. Memory is
 * one frame. Feed the file from offset 0, or from `resume`'s `validLength`.
 */
export class SqliteWalScanner {
  #headerBytes = new Uint8Array(SQLITE_WAL_HEADER_BYTES);
  #header: SqliteWalHeader | null = null;
  #headerProblem: string | null = null;
  #swap = false;
  #frameBytes = 0;
  /** An aligned buffer holding a frame split across chunks (or misaligned in one). */
  #frame: Uint8Array = new Uint8Array(0);
  #frameWords: Int32Array = new Int32Array(0);
  #fill = 0;
  #consumed = 0;
  #sum0 = 0;
  #sum1 = 0;
  #validFrames = 0;
  #validLength = 0;
  #commits = 0;
  #frames = 0;
  #databasePages = 0;
  #committedSum: [number, number] = [0, 0];
  #end: SqliteWalEnd = 'end-of-input';

  /**
   * A scanner that continues after `scan` (which must have a header): feed it
   * the file's bytes from `scan.validLength` on. Its results count from the
   * start of the file, as if it had scanned it all.
   */
  static resume(scan: SqliteWalScan): SqliteWalScanner {
    if (scan.header === null) throw new RangeError('cannot resume a scan without a WAL header');
    const scanner = new SqliteWalScanner();
    scanner.#setHeader(scan.header);
    scanner.#consumed = scan.validLength;
    scanner.#validLength = scan.validLength;
    scanner.#commits = scan.commits;
    scanner.#frames = scan.frames;
    scanner.#validFrames = scan.frames;
    scanner.#databasePages = scan.databasePages;
    scanner.#committedSum = [scan.checksum[0], scan.checksum[1]];
    scanner.#sum0 = scan.checksum[0] | 0;
    scanner.#sum1 = scan.checksum[1] | 0;
    return scanner;
  }

  #setHeader(header: SqliteWalHeader): void {
    this.#header = header;
    this.#swap = (header.checksumByteOrder === 'big-endian') !== HOST_BIG_ENDIAN;
    this.#frameBytes = sqliteWalFrameBytes(header.pageSize);
    this.#frame = new Uint8Array(this.#frameBytes);
    this.#frameWords = new Int32Array(this.#frame.buffer);
  }

  /** True once the scan has stopped: an invalid header or frame. Later bytes are ignored. */
  get ended(): boolean {
    return this.#end !== 'end-of-input';
  }

  /** Feeds the next bytes of the WAL. */
  push(chunk: Uint8Array): void {
    let i = 0;
    const total = chunk.byteLength;
    if (this.#header === null && !this.ended) {
      const take = Math.min(SQLITE_WAL_HEADER_BYTES - this.#consumed, total);
      this.#headerBytes.set(chunk.subarray(0, take), this.#consumed);
      this.#consumed += take;
      i = take;
      if (this.#consumed < SQLITE_WAL_HEADER_BYTES) return;
      const problem = sqliteWalHeaderProblem(this.#headerBytes);
      if (problem !== undefined) {
        this.#headerProblem = problem;
        this.#end = 'invalid-header';
        return;
      }
      const header = parseSqliteWalHeader(this.#headerBytes);
      this.#setHeader(header);
      this.#sum0 = header.checksum1 | 0;
      this.#sum1 = header.checksum2 | 0;
      this.#committedSum = [header.checksum1, header.checksum2];
      this.#validLength = SQLITE_WAL_HEADER_BYTES;
    }
    if (this.ended) return;
    this.#consumed += total - i;
    const frameBytes = this.#frameBytes;
    // Finish a frame begun in an earlier chunk.
    if (this.#fill > 0) {
      const take = Math.min(frameBytes - this.#fill, total - i);
      this.#frame.set(chunk.subarray(i, i + take), this.#fill);
      this.#fill += take;
      i += take;
      if (this.#fill < frameBytes) return;
      this.#fill = 0;
      if (!this.#frameAt(this.#frame, 0, this.#frameWords, 0)) return;
    }
    // Whole frames in this chunk: in place when aligned, else through the aligned buffer.
    const aligned = (chunk.byteOffset + i) % 4 === 0;
    const words = aligned
      ? new Int32Array(chunk.buffer, chunk.byteOffset + i, (total - i) >>> 2)
      : null;
    let wordBase = 0;
    while (total - i >= frameBytes) {
      if (words !== null) {
        if (!this.#frameAt(chunk, i, words, wordBase)) return;
      } else {
        this.#frame.set(chunk.subarray(i, i + frameBytes));
        if (!this.#frameAt(this.#frame, 0, this.#frameWords, 0)) return;
      }
      i += frameBytes;
      wordBase += frameBytes >>> 2;
    }
    if (i < total) {
      this.#frame.set(chunk.subarray(i), 0);
      this.#fill = total - i;
    }
  }

  /** Checks the frame at `bytes[at..]` (words from `wordIndex`); false when the log ends at it. */
  #frameAt(bytes: Uint8Array, at: number, words: Int32Array, wordIndex: number): boolean {
    const header = this.#header!;
    if (readU32BE(bytes, at + 8) !== header.salt1 || readU32BE(bytes, at + 12) !== header.salt2) {
      this.#end = 'salt-mismatch';
      return false;
    }
    const pageNumber = readU32BE(bytes, at);
    if (pageNumber === 0) {
      this.#end = 'invalid-page-number';
      return false;
    }
    sum0 = this.#sum0;
    sum1 = this.#sum1;
    addWords(words, wordIndex, 2, this.#swap);
    addWords(words, wordIndex + 6, header.pageSize >>> 2, this.#swap);
    if (sum0 >>> 0 !== readU32BE(bytes, at + 16) || sum1 >>> 0 !== readU32BE(bytes, at + 20)) {
      this.#end = 'checksum-mismatch';
      return false;
    }
    this.#sum0 = sum0;
    this.#sum1 = sum1;
    this.#validFrames++;
    const databasePages = readU32BE(bytes, at + 4);
    if (databasePages !== 0) {
      this.#commits++;
      this.#frames = this.#validFrames;
      this.#databasePages = databasePages;
      this.#validLength = SQLITE_WAL_HEADER_BYTES + this.#validFrames * this.#frameBytes;
      this.#committedSum = [sum0 >>> 0, sum1 >>> 0];
    }
    return true;
  }

  /** What the bytes fed so far hold. */
  get result(): SqliteWalScan {
    const headerProblem =
      this.#header === null && this.#headerProblem === null
        ? `${this.#consumed} bytes, shorter than the ${SQLITE_WAL_HEADER_BYTES}-byte header`
        : this.#headerProblem;
    return {
      header: this.#header === null ? null : { ...this.#header },
      headerProblem,
      validLength: this.#validLength,
      commits: this.#commits,
      frames: this.#frames,
      databasePages: this.#databasePages,
      checksum: [this.#committedSum[0], this.#committedSum[1]],
      uncommittedFrames: this.#validFrames - this.#frames,
      end: this.#end,
    };
  }
}

/** Scans a whole WAL held in memory. Never throws for any input. */
export function scanSqliteWal(bytes: Uint8Array): SqliteWalScan {
  const scanner = new SqliteWalScanner();
  scanner.push(bytes);
  return scanner.result;
}

/**
 * Scans the WAL file at `path` from the start, or from `from.validLength`
 * continuing `from` (a scan of the same WAL generation: the caller checks
 * the header's salts still match). Reads in chunks and stops reading at the
 * first invalid frame, so stale frames after a restart are not read.
 */
export async function scanSqliteWalFile(
  path: string,
  options: { from?: SqliteWalScan; signal?: AbortSignal; chunkBytes?: number } = {},
): Promise<SqliteWalScan> {
  const scanner =
    options.from === undefined ? new SqliteWalScanner() : SqliteWalScanner.resume(options.from);
  let position = options.from?.validLength ?? 0;
  const buffer = Buffer.allocUnsafe(options.chunkBytes ?? 4 * 1024 * 1024);
  const handle = await open(path, 'r');
  try {
    for (;;) {
      options.signal?.throwIfAborted();
      const { bytesRead } = await handle.read(buffer, 0, buffer.byteLength, position);
      if (bytesRead === 0) break;
      scanner.push(buffer.subarray(0, bytesRead));
      position += bytesRead;
      if (scanner.ended) break;
    }
  } finally {
    await handle.close();
  }
  return scanner.result;
}

/** One committed frame of a WAL. */
export interface SqliteWalFrame {
  /** Offset of the frame header in the WAL. */
  offset: number;
  pageNumber: number;
  /** Database size in pages after this frame's commit; 0 when it is not a commit frame. */
  databasePages: number;
  /** The page image (a view into the input). */
  page: Uint8Array;
}

/**
 * The frames of `bytes` that belong to committed transactions (offset 32 up
 * to the scan's `validLength`), in order. Later frames for the same page
 * supersede earlier ones, as in SQLite.
 */
export function* sqliteWalCommittedFrames(
  bytes: Uint8Array,
  scan: SqliteWalScan = scanSqliteWal(bytes),
): Generator<SqliteWalFrame> {
  if (scan.header === null) return;
  const frameBytes = sqliteWalFrameBytes(scan.header.pageSize);
  for (let at = SQLITE_WAL_HEADER_BYTES; at + frameBytes <= scan.validLength; at += frameBytes) {
    yield {
      offset: at,
      pageNumber: readU32BE(bytes, at),
      databasePages: readU32BE(bytes, at + 4),
      page: bytes.subarray(at + SQLITE_WAL_FRAME_HEADER_BYTES, at + frameBytes),
    };
  }
}
