/**
 * The page hashes (first 8 bytes of each page's SHA-256, as in
 * resume-record.ts) of the database a restore of a restore point produces,
 * computed from its content read back (`GenerationCandidate.content`)
 * without writing a file: the log merged first (commit-log-merge.ts), then
 * the snapshot streamed once, each page hashed as the restore leaves it, and
 * the cut to the last record's size. Exact to the restore
 * (docs/decisions/2026-12-06-commit-log-replay.md). `null` when there is no
 * proof: content not of `pageSize` pages, a log body not whole valid records,
 * or more than {@link MAX_MERGED_PAGE_BYTES} of distinct pages. Memory: those
 * pages, 8 bytes per database page, one snapshot chunk.
 */
import type { RestorePointContent } from '@x/engine';
import { CommitLogMergeError, CommitLogMerger } from './commit-log-merge.ts';
import { PAGE_HASH_BYTES, pageHash } from './commit-record.ts';
import { pagesOf } from './resume-record.ts';

/** The most distinct log pages held while the restore point is hashed: 256 MiB. */
export const MAX_MERGED_PAGE_BYTES = 256 * 1024 * 1024;

export interface RestorePointPages {
  /** Bytes of the restored database. */
  readonly bytes: number;
  /** {@link PAGE_HASH_BYTES} per page, in page order (base64), as `imageDigest` gives. */
  readonly pageHashes: string;
}

export async function restorePointPageHashes(
  content: RestorePointContent,
  pageSize: number,
): Promise<RestorePointPages | null> {
  const merger = new CommitLogMerger({ maxPageBytes: MAX_MERGED_PAGE_BYTES });
  try {
    for await (const body of content.logBodies()) merger.add(body);
  } catch (error) {
    if (error instanceof CommitLogMergeError) return null;
    throw error;
  }
  if (merger.pageSize !== null && merger.pageSize !== pageSize) return null;
  const log = merger.written;
  // The restored page `pageNumber`, given the snapshot's (zeros past its end).
  const restored = (pageNumber: number, snapshotPage: Uint8Array): Uint8Array => {
    const whole = log.pages.get(pageNumber);
    if (whole !== undefined) return whole;
    return log.patches.get(pageNumber)?.over(snapshotPage) ?? snapshotPage;
  };
  const hashes: Buffer[] = [];
  for await (const page of pagesOf(content.image(), pageSize)) {
    // A snapshot not of whole pages is no image of this database.
    if (page.byteLength < pageSize) return null;
    hashes.push(pageHash(restored(hashes.length + 1, page)));
  }
  // A patch of a page the snapshot lacks has no base: the restore refuses it.
  for (const pageNumber of log.patches.keys()) if (pageNumber > hashes.length) return null;
  const finalPages = log.databasePages ?? hashes.length;
  // Pages past the snapshot: written by the log, or zero-filled by a write past them.
  let lastWritten = 0;
  for (const pageNumber of log.pages.keys()) lastWritten = Math.max(lastWritten, pageNumber);
  for (const pageNumber of log.patches.keys()) lastWritten = Math.max(lastWritten, pageNumber);
  const zero = new Uint8Array(pageSize);
  const zeroHash = pageHash(zero);
  for (let pageNumber = hashes.length + 1; pageNumber <= lastWritten; pageNumber += 1) {
    const touched = log.pages.has(pageNumber) || log.patches.has(pageNumber);
    hashes.push(touched ? pageHash(restored(pageNumber, zero)) : zeroHash);
  }
  hashes.length = Math.min(hashes.length, finalPages);
  while (hashes.length < finalPages) hashes.push(zeroHash);
  return { bytes: finalPages * pageSize, pageHashes: Buffer.concat(hashes).toString('base64') };
}
