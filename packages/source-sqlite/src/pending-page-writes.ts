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
import type { FileHandle } from 'node:fs/promises';
import type { CommitRecord } from './commit-record.ts';
import { PageWrites } from './page-patch.ts';

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

  /** Gathers one record's writes (its pages must be of this page size). */
  add(record: CommitRecord): void {
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
