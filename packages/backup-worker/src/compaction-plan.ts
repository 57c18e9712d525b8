/**
 * Which run of a generation's chain to compact next, as a pure plan: chain
 * entries (level, stored size, when shipped) in, at most one run out; the I/O
 * is compaction.ts's. Level 0 is a fine segment; level ℓ's interval is
 * `levelsMs[ℓ − 1]`. A run at ℓ is consecutive entries of levels up to ℓ, at
 * least two and one below ℓ, shipped inside one aligned window of ℓ
 * (`floor(shippedAt / interval)`). It is due once the window has ended, or
 * earlier once its entries below ℓ hold the database's size in stored bytes
 * (twice that above level 1). Never the chain's last entry; never a run over
 * `maxRunLogBytes`. Rules and reasons: docs/decisions/2026-12-06-compaction-levels.md.
 */

/** What the planner needs to know about one entry of the chain. */
export interface ChainEntryInfo {
  /** 0: a fine segment; 1..9: a compacted object of that level. */
  readonly level: number;
  /** Stored bytes (the manifest entry's `size`). */
  readonly size: number;
  /** Bytes of the log it covers (its key's `end − start`): what a merge of it holds decoded, at most. */
  readonly logBytes: number;
  /** Wall-clock ms it was shipped (for a compacted object: its newest input's). */
  readonly shippedAt: number;
}

/** A run to merge into one object of `level`: entries `first` up to `end` (exclusive). */
export interface CompactionRun {
  readonly level: number;
  readonly first: number;
  readonly end: number;
  /** Why it is due, for the log. */
  readonly reason: 'window-ended' | 'bytes';
}

/**
 * Above level 1, the bytes rule merges inside an open window once the
 * entries below the level hold this many times the database's size.
 */
export const UPPER_LEVEL_BYTES_FACTOR = 2;

/** The most levels a key can name (one digit). */
export const MAX_COMPACTION_LEVELS = 9;

/**
 * The next run to compact, or `null`. `levelsMs`: ascending intervals, one
 * per level; `databaseBytes`: the database's size when known (the bytes rule
 * applies only then); `maxRunLogBytes`: the most log one run may cover
 * (none when absent).
 */
export function planCompaction(input: {
  readonly chain: readonly ChainEntryInfo[];
  readonly now: number;
  readonly levelsMs: readonly number[];
  readonly databaseBytes: number | null;
  readonly maxRunLogBytes?: number;
  /**
   * Entries shipped after this wall-clock ms are in the exact window: only
   * level 1 merges them, because a restore inside a level-1 object reads
   * the fine segments it replaced and no coarser object may swallow those.
   */
  readonly exactSince?: number;
}): CompactionRun | null {
  const { chain, now, levelsMs, databaseBytes } = input;
  const maxRunLogBytes = input.maxRunLogBytes ?? Number.POSITIVE_INFINITY;
  const exactSince = input.exactSince ?? Number.POSITIVE_INFINITY;
  // The last entry stays as it is.
  const usable = chain.length - 1;
  for (let index = 0; index < levelsMs.length; index++) {
    const level = index + 1;
    const interval = levelsMs[index]!;
    // Chain entries are in shipping order: those before `mergeable` may merge at this level.
    let mergeable = usable;
    if (level > 1)
      while (mergeable > 0 && chain[mergeable - 1]!.shippedAt > exactSince) mergeable -= 1;
    let first = 0;
    while (first < mergeable) {
      if (chain[first]!.level > level) {
        first += 1;
        continue;
      }
      const window = Math.floor(chain[first]!.shippedAt / interval);
      let end = first;
      let lowerBytes = 0;
      let lower = 0;
      let logBytes = 0;
      while (
        end < mergeable &&
        chain[end]!.level <= level &&
        Math.floor(chain[end]!.shippedAt / interval) === window
      ) {
        if (chain[end]!.level < level) {
          lower += 1;
          lowerBytes += chain[end]!.size;
        }
        logBytes += chain[end]!.logBytes;
        end += 1;
      }
      if (end - first >= 2 && lower > 0 && logBytes <= maxRunLogBytes) {
        // Above level 1, once the whole window is older than the exact window:
        // merging its older part first would upload the object again per entry.
        const ended = (window + 1) * interval;
        if (now >= ended && (level === 1 || ended <= exactSince))
          return { level, first, end, reason: 'window-ended' };
        if (
          databaseBytes !== null &&
          databaseBytes > 0 &&
          lowerBytes >= (level === 1 ? 1 : UPPER_LEVEL_BYTES_FACTOR) * databaseBytes
        )
          return { level, first, end, reason: 'bytes' };
      }
      first = end;
    }
  }
  return null;
}

/**
 * The levels' intervals, checked: at most {@link MAX_COMPACTION_LEVELS},
 * each a whole number of milliseconds of at least one second, strictly
 * ascending, each a whole multiple of the one before. `[]` turns compaction
 * off.
 * @returns the problem, or `undefined` when the list is valid.
 */
export function compactionLevelsProblem(levelsMs: readonly number[]): string | undefined {
  if (!Array.isArray(levelsMs)) return 'not a list of intervals';
  if (levelsMs.length > MAX_COMPACTION_LEVELS)
    return `${levelsMs.length} levels, at most ${MAX_COMPACTION_LEVELS}`;
  for (let i = 0; i < levelsMs.length; i++) {
    const ms = levelsMs[i];
    if (typeof ms !== 'number' || !Number.isSafeInteger(ms) || ms < 1000)
      return `level ${i + 1}: ${String(ms)} is not a whole number of milliseconds of at least 1 s`;
    if (i > 0 && ms <= levelsMs[i - 1]!)
      return `level ${i + 1} (${ms} ms) is not longer than level ${i} (${levelsMs[i - 1]} ms)`;
    // A window of one level holds whole windows of the level below, so the
    // granularity of each level is its own window.
    if (i > 0 && ms % levelsMs[i - 1]! !== 0)
      return `level ${i + 1} (${ms} ms) is not a whole multiple of level ${i} (${levelsMs[i - 1]} ms)`;
  }
  return undefined;
}
