/**
 * The page hashes (resume-record.ts's kind: the first 8 bytes of each page's
 * SHA-256) of the database a restore of a restore point produces, computed
 * from its content read back (`GenerationCandidate.content`) without
 * writing a file: the snapshot's pages, then each commit record's pages in
 * log order, the later write of a page winning, and at the end the cut to
 * the last record's database size.
 *
 * Exact to the restore (`rebuild-database.ts`): that writes each record's
 * pages at `(n - 1) × pageSize` (a write beyond the end leaves zero-filled
 * pages in between) and truncates once, at the very end, to the last
 * record's size (zero-filled when that is larger). The same steps on hashes
 * give the hashes of the restored file's pages.
 *
 * `null` when the content is not of pages of `pageSize` (a snapshot not a
 * whole number of them, a record of another page size): no proof. A log
 * body that is not whole valid frames throws `RangeError` (the worker
 * checked each object's CRC-32; this catches what it cannot). Memory: 8
 * bytes per page, one record at a time.
 */
import { createHash } from 'node:crypto';
import type { RestorePointContent } from '@x/backup-worker';
import { decodeCommitRecord, splitLogFrames } from './commit-record.ts';
import { imageDigest, PAGE_HASH_BYTES } from './resume-record.ts';

export interface RestorePointPages {
  /** Bytes of the restored database. */
  readonly bytes: number;
  /** {@link PAGE_HASH_BYTES} per page, in page order (base64), as `imageDigest` gives. */
  readonly pageHashes: string;
}

function pageHash(page: Uint8Array): Buffer {
  return createHash('sha256').update(page).digest().subarray(0, PAGE_HASH_BYTES);
}

export async function restorePointPageHashes(
  content: RestorePointContent,
  pageSize: number,
): Promise<RestorePointPages | null> {
  const snapshot = await imageDigest(content.image(), pageSize);
  if (snapshot.bytes % pageSize !== 0) return null;
  const packed = Buffer.from(snapshot.pageHashes, 'base64');
  const hashes: Buffer[] = [];
  for (let at = 0; at < packed.byteLength; at += PAGE_HASH_BYTES)
    hashes.push(packed.subarray(at, at + PAGE_HASH_BYTES));
  const zero = pageHash(new Uint8Array(pageSize));
  let finalPages = hashes.length;
  for await (const body of content.logBodies()) {
    const { payloads, rest } = splitLogFrames(body);
    if (rest.byteLength > 0) throw new RangeError('a log body ends inside a frame');
    for (const payload of payloads) {
      const record = decodeCommitRecord(payload);
      if (record.pageSize !== pageSize) return null;
      for (const [pageNumber, page] of record.pages) {
        while (hashes.length < pageNumber) hashes.push(zero);
        hashes[pageNumber - 1] = pageHash(page);
      }
      finalPages = record.databasePages;
    }
  }
  hashes.length = Math.min(hashes.length, finalPages);
  while (hashes.length < finalPages) hashes.push(zero);
  return { bytes: finalPages * pageSize, pageHashes: Buffer.concat(hashes).toString('base64') };
}
