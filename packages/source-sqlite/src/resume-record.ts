/**
 * The record a graceful stop leaves in the sidecar directory
 * (`.<db>-backupd/resume`), so the next start can continue the bucket's
 * generation instead of uploading the database again. It is a claim, never
 * trusted alone: the next start continues only when the bucket's newest
 * restore point is the one it names AND the image the tap opened on matches
 * its digest; a missing or damaged record is no record (a new snapshot).
 * Its fields: docs/format.md, "Local files beside a SQLite database".
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { joinParts, PAGE_HASH_BYTES, pageHash } from './commit-record.ts';
import { copyOf } from './page-patch.ts';
import { ensureSidecarDirectory, sqliteSidecarFiles, writeAtomically } from './sidecar-files.ts';

export interface ResumeRecord {
  readonly version: 1;
  readonly lineage: string;
  readonly walGeneration: number;
  readonly logEnd: number;
  readonly commitSeq: number;
  readonly imageBytes: number;
  readonly sha256: string;
  /** The page size of the image, and each page's hash (see {@link imageDigest}); absent: no delta. */
  readonly pageSize?: number;
  readonly pageHashes?: string;
}

function isCount(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
}

/** The record at `databasePath`'s side, or `null` when there is none or it is not a valid one. */
export function readResumeRecord(databasePath: string): ResumeRecord | null {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(sqliteSidecarFiles(databasePath).resume, 'utf8'));
  } catch {
    return null;
  }
  if (typeof parsed !== 'object' || parsed === null) return null;
  const r = parsed as Record<string, unknown>;
  if (
    r.version !== 1 ||
    typeof r.lineage !== 'string' ||
    r.lineage === '' ||
    !isCount(r.walGeneration) ||
    !isCount(r.logEnd) ||
    !isCount(r.commitSeq) ||
    !isCount(r.imageBytes) ||
    typeof r.sha256 !== 'string' ||
    !/^[0-9a-f]{64}$/.test(r.sha256)
  )
    return null;
  // The page hashes came later: a record without them (or with unusable
  // ones) still proves an idle restart, not a delta.
  const pages =
    isCount(r.pageSize) &&
    r.pageSize > 0 &&
    typeof r.pageHashes === 'string' &&
    /^[A-Za-z0-9+/]*={0,2}$/.test(r.pageHashes) &&
    Buffer.from(r.pageHashes, 'base64').length ===
      Math.ceil(r.imageBytes / r.pageSize) * PAGE_HASH_BYTES
      ? { pageSize: r.pageSize, pageHashes: r.pageHashes }
      : null;
  return {
    version: 1,
    lineage: r.lineage,
    walGeneration: r.walGeneration,
    logEnd: r.logEnd,
    commitSeq: r.commitSeq,
    imageBytes: r.imageBytes,
    sha256: r.sha256,
    ...(pages ?? {}),
  };
}

/** Writes the record (a temporary file, then a rename: a reader sees the old one or the new one). */
export async function writeResumeRecord(databasePath: string, record: ResumeRecord): Promise<void> {
  ensureSidecarDirectory(databasePath);
  await writeAtomically(sqliteSidecarFiles(databasePath).resume, `${JSON.stringify(record)}\n`);
}

export interface ImageDigest {
  readonly bytes: number;
  /** SHA-256 of the whole image (lowercase hex). */
  readonly sha256: string;
  /** {@link PAGE_HASH_BYTES} per page, in page order (base64). */
  readonly pageHashes: string;
  /**
   * With `known`: the pages (number → bytes, 1-based) whose hash differs
   * from `known`'s, or that `known` does not have; `null` when more than
   * `maxChanged` did (they were not kept). Without `known`: empty.
   */
  readonly changed: Map<number, Uint8Array> | null;
}

/**
 * Digests an image read as a stream of whole pages of `pageSize` bytes:
 * its length, its SHA-256, each page's hash, and, given the page hashes of
 * a record (`known`, base64), the pages that differ from it (at most
 * `maxChanged` kept).
 */
export async function imageDigest(
  chunks: AsyncIterable<Uint8Array>,
  pageSize: number,
  compare?: { readonly known: string; readonly maxChanged: number },
): Promise<ImageDigest> {
  const whole = createHash('sha256');
  const known = compare === undefined ? null : Buffer.from(compare.known, 'base64');
  const hashes: Buffer[] = [];
  let changed: Map<number, Uint8Array> | null = new Map();
  let bytes = 0;
  let page = 0;
  const onChunk = (chunk: Uint8Array) => {
    whole.update(chunk);
    bytes += chunk.byteLength;
  };
  for await (const bytesOfPage of pagesOf(chunks, pageSize, onChunk)) {
    page += 1;
    const hash = pageHash(bytesOfPage);
    hashes.push(hash);
    if (known === null || changed === null) continue;
    const at = (page - 1) * PAGE_HASH_BYTES;
    const same =
      at + PAGE_HASH_BYTES <= known.length && hash.equals(known.subarray(at, at + PAGE_HASH_BYTES));
    if (same) continue;
    if (changed.size >= compare!.maxChanged) changed = null;
    else changed.set(page, copyOf(bytesOfPage));
  }
  return {
    bytes,
    sha256: whole.digest('hex'),
    pageHashes: Buffer.concat(hashes).toString('base64'),
    changed: known === null ? new Map() : changed,
  };
}

/**
 * The pages of an image read in `chunks` (`onChunk` sees each chunk first):
 * each whole page of `pageSize` bytes in turn, a view valid until the next,
 * then the bytes after the last whole page, if any.
 */
export async function* pagesOf(
  chunks: AsyncIterable<Uint8Array>,
  pageSize: number,
  onChunk?: (chunk: Uint8Array) => void,
): AsyncIterable<Uint8Array> {
  let pending = new Uint8Array(0);
  for await (const chunk of chunks) {
    onChunk?.(chunk);
    const data =
      pending.byteLength === 0
        ? chunk
        : joinParts([pending, chunk], pending.byteLength + chunk.byteLength);
    let at = 0;
    for (; at + pageSize <= data.byteLength; at += pageSize) yield data.subarray(at, at + pageSize);
    pending = copyOf(data.subarray(at));
  }
  if (pending.byteLength > 0) yield pending;
}
