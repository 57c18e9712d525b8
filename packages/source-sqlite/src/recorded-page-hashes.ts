import type { FileHandle } from 'node:fs/promises';
import { type CommitRecord, pageHash } from './commit-record.ts';

/** A page the rebuild gave other bytes than the tap captured. */
export interface PageHashMismatch {
  readonly page: number;
  /** The hash its last patch's record carries (hex). */
  readonly expected: string;
  /** The hash of the rebuilt page (hex). */
  readonly found: string;
  /** The commit (counted from the snapshot) whose record carries `expected`. */
  readonly commit: number;
}

/**
 * The hashes SBC4 records carry for the pages they patch (commit-record.ts),
 * kept for the pages whose last write in the applied log was such a patch:
 * after the rebuild, each of those pages must hash as recorded. A whole
 * page needs no check (the record holds its bytes); a patch without a hash
 * (SBC3) or a page above a later size leaves its page unchecked.
 *
 * Memory: one entry per page whose last write was a hashed patch.
 */
export class RecordedPageHashes {
  readonly #expected = new Map<number, { hash: Buffer; commit: number }>();
  #databasePages: number;

  constructor(startPages: number) {
    this.#databasePages = startPages;
  }

  /** Takes `record`, the log's commit number `commit` (its last, for a batch), in log order. */
  add(record: CommitRecord, commit: number): void {
    for (const pageNumber of record.pages.keys()) this.#expected.delete(pageNumber);
    for (const pageNumber of record.patches?.keys() ?? []) {
      const hash = record.patchHashes?.get(pageNumber);
      if (hash === undefined) this.#expected.delete(pageNumber);
      else this.#expected.set(pageNumber, { hash: Buffer.from(hash), commit });
    }
    // Only on a shrink: a scan per record would cost every restore.
    if (record.databasePages < this.#databasePages)
      for (const pageNumber of this.#expected.keys())
        if (pageNumber > record.databasePages) this.#expected.delete(pageNumber);
    this.#databasePages = record.databasePages;
  }

  /** Reads each page waiting for its check from `handle`: the first that differs, in page order, or `null`. */
  async firstMismatch(
    handle: FileHandle,
    pageSize: number,
    signal?: AbortSignal,
  ): Promise<PageHashMismatch | null> {
    const page = new Uint8Array(pageSize);
    for (const pageNumber of [...this.#expected.keys()].sort((a, b) => a - b)) {
      if (pageNumber > this.#databasePages) continue;
      signal?.throwIfAborted();
      const { bytesRead } = await handle.read(page, 0, pageSize, (pageNumber - 1) * pageSize);
      page.fill(0, bytesRead);
      const { hash, commit } = this.#expected.get(pageNumber)!;
      const found = pageHash(page);
      if (!found.equals(hash))
        return {
          page: pageNumber,
          expected: hash.toString('hex'),
          found: found.toString('hex'),
          commit,
        };
    }
    return null;
  }
}
