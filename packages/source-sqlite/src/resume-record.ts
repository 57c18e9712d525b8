/**
 * The record a graceful stop leaves beside the database
 * (`<db>-backupd.resume`), so the next start can continue the bucket's
 * generation instead of uploading the database again: which restore point
 * holds the database's state (lineage, generation, where its log ends, its
 * commit count) and a SHA-256 of that state's page image.
 *
 * The record is a claim, never trusted alone: the next start continues only
 * when the bucket's newest restore point is the one it names AND the image
 * the tap opened on hashes to the digest it holds (the proof that nothing
 * changed the database while backupd was not running). A missing, damaged
 * or unreadable record is no record: a new snapshot, as before.
 *
 * Format (JSON, one object): `version` 1, `lineage`, `walGeneration`,
 * `logEnd`, `commitSeq`, `imageBytes`, `sha256` (64 lowercase hex).
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { rename, writeFile } from 'node:fs/promises';

export const SQLITE_RESUME_SUFFIX = '-backupd.resume';

export interface ResumeRecord {
  readonly version: 1;
  readonly lineage: string;
  readonly walGeneration: number;
  readonly logEnd: number;
  readonly commitSeq: number;
  readonly imageBytes: number;
  readonly sha256: string;
}

function isCount(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
}

/** The record at `databasePath`'s side, or `null` when there is none or it is not a valid one. */
export function readResumeRecord(databasePath: string): ResumeRecord | null {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(`${databasePath}${SQLITE_RESUME_SUFFIX}`, 'utf8'));
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
  return {
    version: 1,
    lineage: r.lineage,
    walGeneration: r.walGeneration,
    logEnd: r.logEnd,
    commitSeq: r.commitSeq,
    imageBytes: r.imageBytes,
    sha256: r.sha256,
  };
}

/** Writes the record (a temporary file, then a rename: a reader sees the old one or the new one). */
export async function writeResumeRecord(databasePath: string, record: ResumeRecord): Promise<void> {
  const path = `${databasePath}${SQLITE_RESUME_SUFFIX}`;
  const temporary = `${path}.tmp-${process.pid}`;
  await writeFile(temporary, `${JSON.stringify(record)}\n`);
  await rename(temporary, path);
}

/** SHA-256 (lowercase hex) and length of an image read as a stream. */
export async function imageDigest(
  chunks: AsyncIterable<Uint8Array>,
): Promise<{ bytes: number; sha256: string }> {
  const hash = createHash('sha256');
  let bytes = 0;
  for await (const chunk of chunks) {
    hash.update(chunk);
    bytes += chunk.byteLength;
  }
  return { bytes, sha256: hash.digest('hex') };
}
