import type { CommitRecord } from './commit-record.ts';

/**
 * The pages a log holds a version of, record by record, that a patch may be
 * put over: the pages of the size it starts from (a snapshot's page count;
 * `Infinity` for a run of a log whose start is not known, as compaction
 * merges), less every page above a record's database size, plus every page
 * a record wrote since. A patch of any other page would be put over zeros,
 * or over a version from before a shrink that the state at that commit
 * does not have. The tap's bases (PageBases in page-patch.ts) are always among
 * these pages; a restore and compaction refuse a patch of one that is not.
 */
export class PatchablePages {
  /** Pages 1 to `#low` are held since the start (the smallest size so far). */
  #low: number;
  /** Database size after the last record (the start size before any). */
  #size: number;
  /** Pages above `#low` written since the size last dropped below them. */
  #written: Set<number>;

  constructor(startPages: number) {
    this.#low = startPages;
    this.#size = startPages;
    this.#written = new Set();
  }

  /** Whether a patch of `pageNumber` has its base at this point of the log. */
  holds(pageNumber: number): boolean {
    return pageNumber <= this.#low || this.#written.has(pageNumber);
  }

  /** Database size after the last record (the start size before any). */
  get databasePages(): number {
    return this.#size;
  }

  /** The first page `record` patches without a base here, in page order; `null` when none. */
  unheld(record: CommitRecord): number | null {
    for (const pageNumber of record.patches?.keys() ?? [])
      if (!this.holds(pageNumber)) return pageNumber;
    return null;
  }

  /** Moves past `record`: the pages it wrote are held, those above its size are not. */
  advance(record: CommitRecord): void {
    const size = record.databasePages;
    // A transaction may write pages above its final size (frames spilled
    // before an auto-vacuum cut them off): those are dropped at once.
    let dropping = size < this.#size;
    for (const pageNumber of [...record.pages.keys(), ...(record.patches?.keys() ?? [])]) {
      if (pageNumber > this.#low) this.#written.add(pageNumber);
      if (pageNumber > size) dropping = true;
    }
    if (dropping)
      for (const pageNumber of this.#written)
        if (pageNumber > size) this.#written.delete(pageNumber);
    if (size < this.#low) this.#low = size;
    this.#size = size;
  }

  /** An independent copy (to check a run before taking it). */
  clone(): PatchablePages {
    const copy = new PatchablePages(this.#low);
    copy.#size = this.#size;
    copy.#written = new Set(this.#written);
    return copy;
  }
}
