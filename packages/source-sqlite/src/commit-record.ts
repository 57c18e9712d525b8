/**
 * The commit log backupd ships for a SQLite database: one record per
 * committed transaction (or per batch), each in one `@x/wal-segment` frame,
 * so one frame is one commit as the worker counts them. A record is
 * self-contained (the pages written, the database size after), so records
 * of every WAL cycle apply in order onto one snapshot. Versions: SBC1 one
 * commit, SBC2 a batch, SBC3 with page patches (page-patch.ts), SBC4 with
 * page hashes; the byte layout, who writes which and what readers refuse:
 * docs/format.md, _The SQLite commit log_.
 */
import { createHash } from 'node:crypto';
import { crc32 } from 'node:zlib';
import { crc32Combine, FRAME_HEADER_BYTES } from '@x/wal-segment';
import { copyOf, type PatchRun, patchEncodedBytes, patchProblem } from './page-patch.ts';

export const COMMIT_RECORD_MAGIC = 0x31434253;
/** Magic of a batch record: several consecutive commits in one (version 2). */
export const BATCH_RECORD_MAGIC = 0x32434253;
/** Magic of a record that may hold page patches (version 3): one commit or a batch. */
export const PATCHED_RECORD_MAGIC = 0x33434253;
/** Magic of a record of patches with the hash of each patched page (version 4). */
export const HASHED_PATCH_RECORD_MAGIC = 0x34434253;
/** Bytes of a page hash: the first 8 of the page's SHA-256. */
export const PAGE_HASH_BYTES = 8;
export const COMMIT_RECORD_HEADER_BYTES = 40;
/** Bytes before each frame's payload: length and CRC-32 (the `@x/wal-segment` frame). */
export const LOG_FRAME_HEADER_BYTES = FRAME_HEADER_BYTES;

export interface CommitRecord {
  readonly pageSize: number;
  readonly databasePages: number;
  /** Wall-clock ms when backupd first saw the commit (SQLite records no commit times). */
  readonly commitTime: number;
  readonly walSalt1: number;
  readonly walSalt2: number;
  readonly commitFrame: number;
  /** Page number → page bytes (whole pages). */
  readonly pages: ReadonlyMap<number, Uint8Array>;
  /**
   * Page number → the runs in which the page differs from its previous
   * version in the log (version 3 only; no page number in both maps).
   * Absent or empty: every page is whole.
   */
  readonly patches?: ReadonlyMap<number, readonly PatchRun[]>;
  /**
   * Page number → the hash ({@link pageHash}) of the page each patch gives,
   * as captured (version 4). Encoded only when every patched page has one.
   */
  readonly patchHashes?: ReadonlyMap<number, Uint8Array>;
  /**
   * Consecutive commits the record stands for: 1 (the default) for one
   * commit, more for a batch (whose time and size are its last commit's).
   */
  readonly commits?: number;
}

/**
 * Encodes a record as one framed-log frame (header + payload): the same bytes
 * as `encodeFrame(payload)` of `@x/wal-segment`, built in place to avoid
 * copying the pages twice.
 */
export function encodeCommitFrame(record: CommitRecord): Uint8Array {
  const commits = record.commits ?? 1;
  if (!Number.isSafeInteger(commits) || commits < 1 || commits > 0xffffffff)
    throw new RangeError(`a commit record stands for 1 to 2^32-1 commits, not ${commits}`);
  const { pages } = record;
  const patches = record.patches ?? new Map<number, readonly PatchRun[]>();
  const patched = patches.size > 0;
  const hashes = record.patchHashes;
  const hashed =
    patched &&
    hashes !== undefined &&
    [...patches.keys()].every((page) => hashes.get(page)?.byteLength === PAGE_HASH_BYTES);
  const payloadBytes = payloadBytesOf(record, patches, hashed);
  const frame = new Uint8Array(LOG_FRAME_HEADER_BYTES + payloadBytes);
  const view = new DataView(frame.buffer);
  let offset = LOG_FRAME_HEADER_BYTES;
  const u32 = (value: number) => {
    view.setUint32(offset, value, true);
    offset += 4;
  };
  const put = (bytes: Uint8Array) => {
    frame.set(bytes, offset);
    offset += bytes.byteLength;
  };
  const magic = hashed
    ? HASHED_PATCH_RECORD_MAGIC
    : patched
      ? PATCHED_RECORD_MAGIC
      : commits === 1
        ? COMMIT_RECORD_MAGIC
        : BATCH_RECORD_MAGIC;
  for (const field of [magic, record.pageSize, record.databasePages, pages.size]) u32(field);
  view.setFloat64(offset, record.commitTime, true);
  offset += 8;
  for (const field of [record.walSalt1, record.walSalt2, record.commitFrame]) u32(field);
  u32(patched || commits > 1 ? commits : 0);
  for (const pageNumber of ascending(pages.keys())) {
    u32(pageNumber);
    put(pages.get(pageNumber)!);
  }
  if (patched) {
    u32(patches.size);
    for (const pageNumber of ascending(patches.keys())) {
      const runs = patches.get(pageNumber)!;
      u32(pageNumber);
      u32(runs.length);
      for (const run of runs) {
        u32(run.offset);
        u32(run.bytes.byteLength);
        put(run.bytes);
      }
    }
    if (hashed) for (const pageNumber of ascending(patches.keys())) put(hashes!.get(pageNumber)!);
  }
  view.setUint32(0, payloadBytes, true);
  view.setUint32(4, crc32(frame.subarray(LOG_FRAME_HEADER_BYTES)) >>> 0, true);
  return frame;
}

/** The payload bytes of `record`; throws `RangeError` on a page not of its page size or an unsound patch. */
function payloadBytesOf(
  record: CommitRecord,
  patches: ReadonlyMap<number, readonly PatchRun[]>,
  hashed: boolean,
): number {
  for (const [pageNumber, page] of record.pages)
    if (page.byteLength !== record.pageSize)
      throw new RangeError(
        `page ${pageNumber} is ${page.byteLength} bytes, not ${record.pageSize}`,
      );
  let bytes = COMMIT_RECORD_HEADER_BYTES + record.pages.size * (4 + record.pageSize);
  if (patches.size === 0) return bytes;
  bytes += 4 + (hashed ? patches.size * PAGE_HASH_BYTES : 0);
  for (const [pageNumber, runs] of patches) {
    if (record.pages.has(pageNumber))
      throw new RangeError(`page ${pageNumber} is both whole and patched in one record`);
    const problem = patchProblem(runs, record.pageSize);
    if (problem !== null) throw new RangeError(`the patch of page ${pageNumber}: ${problem}`);
    bytes += 4 + patchEncodedBytes(runs);
  }
  return bytes;
}

function ascending(numbers: Iterable<number>): number[] {
  return [...numbers].sort((x, y) => x - y);
}

function u32le(bytes: Uint8Array, at: number): number {
  return (
    (bytes[at]! | (bytes[at + 1]! << 8) | (bytes[at + 2]! << 16) | (bytes[at + 3]! << 24)) >>> 0
  );
}

/** A page's hash as records carry it: the first {@link PAGE_HASH_BYTES} bytes of its SHA-256. */
export function pageHash(page: Uint8Array): Buffer {
  return createHash('sha256').update(page).digest().subarray(0, PAGE_HASH_BYTES);
}

/**
 * CRC-32 of the concatenation of `frames` (each one whole frame as
 * {@link encodeCommitFrame} builds it), without reading their pages again:
 * each frame's CRC is its 8 header bytes followed by the payload whose CRC
 * the header already carries, joined with {@link crc32Combine}. A segment of
 * records is then checksummed for a few hundred integer operations per
 * record instead of a second pass over every byte.
 *
 * Exact only for frames whose header CRC is their payload's, which holds for
 * every frame `encodeCommitFrame` built; a frame whose length field disagrees
 * with its size is a `RangeError`.
 */
export function logCrc32(frames: readonly Uint8Array[]): number {
  let crc = 0;
  for (const frame of frames) {
    const payloadBytes = u32le(frame, 0);
    if (frame.byteLength !== LOG_FRAME_HEADER_BYTES + payloadBytes)
      throw new RangeError(
        `log frame of ${frame.byteLength} bytes says its payload is ${payloadBytes} bytes`,
      );
    crc = crc32(frame.subarray(0, LOG_FRAME_HEADER_BYTES), crc);
    crc = crc32Combine(crc, u32le(frame, 4), payloadBytes);
  }
  return crc >>> 0;
}

/**
 * The commit time of the last whole record in framed-log `bytes` (whole
 * frames, as a log range holds them), or `null` when there is none. Reads
 * only the frames' length fields and one header: no CRC is checked here.
 */
export function lastCommitTimeOf(bytes: Uint8Array): number | null {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let offset = 0;
  let last = -1;
  while (offset + LOG_FRAME_HEADER_BYTES + COMMIT_RECORD_HEADER_BYTES <= bytes.byteLength) {
    last = offset;
    offset += LOG_FRAME_HEADER_BYTES + view.getUint32(offset, true);
  }
  if (last < 0 || offset > bytes.byteLength) return null;
  return view.getFloat64(last + LOG_FRAME_HEADER_BYTES + 16, true);
}

/** Decodes a record payload (without the frame header); throws `RangeError` on a malformed one. */
export function decodeCommitRecord(payload: Uint8Array): CommitRecord {
  if (payload.byteLength < COMMIT_RECORD_HEADER_BYTES)
    throw new RangeError(`commit record of ${payload.byteLength} bytes is shorter than its header`);
  const view = new DataView(payload.buffer, payload.byteOffset, payload.byteLength);
  const commits = commitsOfRecordHeader(payload);
  const pageSize = view.getUint32(4, true);
  const count = view.getUint32(12, true);
  const magic = view.getUint32(0, true);
  const hashed = magic === HASHED_PATCH_RECORD_MAGIC;
  const patched = hashed || magic === PATCHED_RECORD_MAGIC;
  const wholeEnd = COMMIT_RECORD_HEADER_BYTES + count * (4 + pageSize);
  if (patched ? payload.byteLength < wholeEnd + 4 : payload.byteLength !== wholeEnd)
    throw new RangeError('commit record length does not match its page count');
  const pages = new Map<number, Uint8Array>();
  let offset = COMMIT_RECORD_HEADER_BYTES;
  for (let i = 0; i < count; i += 1) {
    const pageNumber = view.getUint32(offset, true);
    if (pageNumber === 0) throw new RangeError('commit record names page 0');
    pages.set(pageNumber, payload.subarray(offset + 4, offset + 4 + pageSize));
    offset += 4 + pageSize;
  }
  const decoded = patched ? decodePatches(payload, view, offset, pageSize, pages, hashed) : null;
  const patches = decoded?.patches ?? null;
  return {
    pageSize,
    databasePages: view.getUint32(8, true),
    commitTime: view.getFloat64(16, true),
    walSalt1: view.getUint32(24, true),
    walSalt2: view.getUint32(28, true),
    commitFrame: view.getUint32(32, true),
    pages,
    ...(patches !== null && patches.size > 0 ? { patches } : {}),
    ...(decoded?.hashes != null ? { patchHashes: decoded.hashes } : {}),
    commits,
  };
}

/** The patch section of a version 3 or 4 record, from `offset` (its count) to the payload's end. */
function decodePatches(
  payload: Uint8Array,
  view: DataView,
  start: number,
  pageSize: number,
  pages: ReadonlyMap<number, Uint8Array>,
  hashed: boolean,
): { patches: Map<number, PatchRun[]>; hashes: Map<number, Uint8Array> | null } {
  const short = (what: string) =>
    new RangeError(`commit record ends inside ${what} (${payload.byteLength} bytes)`);
  const patches = new Map<number, PatchRun[]>();
  const count = view.getUint32(start, true);
  let offset = start + 4;
  let previous = 0;
  for (let i = 0; i < count; i += 1) {
    if (offset + 8 > payload.byteLength) throw short(`patch ${i + 1} of ${count}`);
    const pageNumber = view.getUint32(offset, true);
    const runCount = view.getUint32(offset + 4, true);
    offset += 8;
    if (pageNumber === 0) throw new RangeError('commit record names page 0');
    if (pageNumber <= previous)
      throw new RangeError(
        `commit record patches page ${pageNumber} after page ${previous} (patched pages must ascend)`,
      );
    if (pages.has(pageNumber))
      throw new RangeError(`commit record holds page ${pageNumber} both whole and patched`);
    previous = pageNumber;
    const runs: PatchRun[] = [];
    for (let r = 0; r < runCount; r += 1) {
      if (offset + 8 > payload.byteLength) throw short(`the patch of page ${pageNumber}`);
      const at = view.getUint32(offset, true);
      const length = view.getUint32(offset + 4, true);
      offset += 8;
      if (offset + length > payload.byteLength) throw short(`the patch of page ${pageNumber}`);
      runs.push({ offset: at, bytes: payload.subarray(offset, offset + length) });
      offset += length;
    }
    const problem = patchProblem(runs, pageSize);
    if (problem !== null)
      throw new RangeError(`commit record's patch of page ${pageNumber}: ${problem}`);
    patches.set(pageNumber, runs);
  }
  let hashes: Map<number, Uint8Array> | null = null;
  if (hashed) {
    if (count === 0) throw new RangeError('an SBC4 record holds no patch');
    if (offset + count * PAGE_HASH_BYTES > payload.byteLength)
      throw short(`the hashes of its ${count} patched pages`);
    hashes = new Map();
    for (const pageNumber of patches.keys()) {
      hashes.set(pageNumber, payload.subarray(offset, offset + PAGE_HASH_BYTES));
      offset += PAGE_HASH_BYTES;
    }
  }
  if (offset !== payload.byteLength)
    throw new RangeError(
      `commit record holds ${payload.byteLength - offset} bytes after its ${count} patches${hashed ? ' and their hashes' : ''}`,
    );
  return { patches, hashes };
}

/**
 * The commits a record stands for, from the first 40 bytes of its payload
 * (the header): 1 for a version 1 record, the count of a batch or of a
 * version 3 record.
 * Throws `RangeError` on a header that is neither, or a batch of fewer than 2.
 */
export function commitsOfRecordHeader(header: Uint8Array): number {
  if (header.byteLength < COMMIT_RECORD_HEADER_BYTES)
    throw new RangeError(`commit record of ${header.byteLength} bytes is shorter than its header`);
  const view = new DataView(header.buffer, header.byteOffset, COMMIT_RECORD_HEADER_BYTES);
  const magic = view.getUint32(0, true);
  if (magic === COMMIT_RECORD_MAGIC) return 1;
  const commits = view.getUint32(36, true);
  if (magic === PATCHED_RECORD_MAGIC || magic === HASHED_PATCH_RECORD_MAGIC) {
    if (commits < 1) throw new RangeError('a patched record stands for 0 commits, not 1 or more');
    return commits;
  }
  if (magic !== BATCH_RECORD_MAGIC) throw new RangeError('not a SQLite commit record (bad magic)');
  if (commits < 2)
    throw new RangeError(`a batch record stands for ${commits} commits, not 2 or more`);
  return commits;
}

/** The commits one whole log frame (header + payload, as {@link encodeCommitFrame} builds it) stands for. */
export function commitsOfFrame(frame: Uint8Array): number {
  return commitsOfRecordHeader(
    frame.subarray(LOG_FRAME_HEADER_BYTES, LOG_FRAME_HEADER_BYTES + COMMIT_RECORD_HEADER_BYTES),
  );
}

/**
 * Splits framed-log bytes into payloads, checking each CRC. Stops at the end
 * of the last complete frame; `rest` is the incomplete tail (carry it into
 * the next call). Throws `RangeError` on a CRC mismatch.
 */
export function splitLogFrames(bytes: Uint8Array): { payloads: Uint8Array[]; rest: Uint8Array } {
  const payloads: Uint8Array[] = [];
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let offset = 0;
  while (offset + LOG_FRAME_HEADER_BYTES <= bytes.byteLength) {
    const length = view.getUint32(offset, true);
    const end = offset + LOG_FRAME_HEADER_BYTES + length;
    if (end > bytes.byteLength) break;
    const payload = bytes.subarray(offset + LOG_FRAME_HEADER_BYTES, end);
    if (crc32(payload) >>> 0 !== view.getUint32(offset + 4, true))
      throw new RangeError(`log frame at byte ${offset} fails its CRC-32`);
    payloads.push(payload);
    offset = end;
  }
  return { payloads, rest: bytes.subarray(offset) };
}

/**
 * Framed-log bytes arriving in `chunks` as bodies of whole frames, the
 * bytes after the last whole frame last, as they are (no CRC is checked
 * here). Chunks are held until the next frame is whole, then joined once:
 * a record of tens of megabytes arriving in 64 KiB chunks is copied once,
 * not once per chunk (which took a restore minutes).
 */
export async function* wholeFrames(
  chunks: AsyncIterable<Uint8Array> | Iterable<Uint8Array>,
): AsyncIterable<Uint8Array> {
  let parts: Uint8Array[] = [];
  let held = 0;
  /** Bytes the next frame needs (its header, until its length is known). */
  let needed = LOG_FRAME_HEADER_BYTES;
  for await (const chunk of chunks) {
    parts.push(chunk);
    held += chunk.byteLength;
    if (held < needed) continue;
    const joined = joinParts(parts, held);
    let end = 0;
    while (end + LOG_FRAME_HEADER_BYTES <= joined.byteLength) {
      const next = end + LOG_FRAME_HEADER_BYTES + u32le(joined, end);
      if (next > joined.byteLength) break;
      end = next;
    }
    if (end > 0) yield joined.subarray(0, end);
    const rest = joined.subarray(end);
    parts = rest.byteLength > 0 ? [copyOf(rest)] : [];
    held = rest.byteLength;
    needed = LOG_FRAME_HEADER_BYTES + (rest.byteLength >= 4 ? u32le(rest, 0) : 0);
  }
  if (held > 0) yield joinParts(parts, held);
}

/** `parts` joined in one buffer of `bytes` (their total); a single part as it is. */
export function joinParts(parts: readonly Uint8Array[], bytes: number): Uint8Array {
  if (parts.length === 1) return parts[0]!;
  const joined = new Uint8Array(bytes);
  let at = 0;
  for (const part of parts) {
    joined.set(part, at);
    at += part.byteLength;
  }
  return joined;
}
