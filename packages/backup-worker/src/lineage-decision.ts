/**
 * Whose prefix is this: the lineage rules of resume, as a pure decision over
 * what the worker read (LATEST's manifest, the store's lineage, a restore's
 * parent record); the worker does the I/O and refuses with the text given.
 * - A store restored from exactly LATEST's restore point, with no lineage of
 *   its own, adopts the prefix as a new lineage; refused if LATEST moved on.
 * - Otherwise the newest restore point must be this store's lineage, and the
 *   store must hold at least its commits; a store never backed up may not take
 *   a prefix holding restore points. An empty prefix is the store's.
 */

export interface LatestRestorePoint {
  readonly lineage: string;
  readonly commitSeq: number;
}

export interface ParentOfStore {
  readonly lineage: string;
  readonly manifestKey: string;
}

export type LineageDecision =
  /** Refuse the prefix for the life of the worker, with this reason. */
  | { readonly kind: 'refuse'; readonly reason: string }
  /** Call again with the store's commit count. */
  | { readonly kind: 'needs-commit-count' }
  /** The store's commit count is not known yet: defer. */
  | { readonly kind: 'undecidable' }
  /** Continue the prefix under the store's own lineage. */
  | { readonly kind: 'continue'; readonly lineage: string; readonly adopt: boolean }
  /** Create a lineage for the store, then continue under it. */
  | { readonly kind: 'create'; readonly adopt: boolean };

const refuse = (reason: string): LineageDecision => ({ kind: 'refuse', reason });

export function decideLineage(input: {
  /** The restore point LATEST names (`null`: none). */
  readonly latest: LatestRestorePoint | null;
  /** The manifest key LATEST names. */
  readonly latestTarget: string | null;
  /** The store's own lineage (`null`: none yet). */
  readonly local: string | null;
  /** The parent record a restore left (`null`: none). */
  readonly parent: ParentOfStore | null;
  /** The store's commit count: `undefined` until asked for, `null` while unknown. */
  readonly commitCount?: number | null | undefined;
}): LineageDecision {
  const { latest, local, parent } = input;
  // Restored from this prefix, and not yet under the prefix's lineage: adopt it.
  if (latest !== null && parent?.lineage === latest.lineage && local !== latest.lineage) {
    if (input.latestTarget !== parent.manifestKey)
      return refuse(
        `this store was restored from ${parent.manifestKey} of lineage ${parent.lineage}, but the backup prefix has moved on since (LATEST names ${input.latestTarget ?? 'nothing'}): another instance has written to it. Nothing is uploaded or deleted. Point the worker at a new prefix`,
      );
    return local === null
      ? { kind: 'create', adopt: true }
      : { kind: 'continue', lineage: local, adopt: true };
  }
  if (latest === null)
    return local === null
      ? { kind: 'create', adopt: false }
      : { kind: 'continue', lineage: local, adopt: false };
  if (local === null)
    return refuse(
      `this backup prefix holds the backups of another store (lineage ${latest.lineage}), and this store has never been backed up; nothing is uploaded or deleted. Point the worker at a new prefix, or restore this store from that prefix first`,
    );
  if (local !== latest.lineage)
    return refuse(
      `this backup prefix holds the backups of another store (lineage ${latest.lineage}), not this one (lineage ${local}); nothing is uploaded or deleted. Point the worker at a new prefix, or restore this store from that prefix first`,
    );
  if (input.commitCount === undefined) return { kind: 'needs-commit-count' };
  if (input.commitCount === null) return { kind: 'undecidable' };
  if (input.commitCount < latest.commitSeq)
    return refuse(
      `this store holds ${input.commitCount} commits, fewer than the ${latest.commitSeq} of the newest restore point in the backup prefix: it was restored from an older backup, or rewound. Uploading would bury the newer history, so nothing is uploaded or deleted. Point the worker at a new prefix`,
    );
  return { kind: 'continue', lineage: local, adopt: false };
}
