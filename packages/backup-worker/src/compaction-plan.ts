/**
 * Which run of a generation's chain to compact next, as a pure plan: the
 * chain's entries (level, stored size, when shipped) in, at most one run
 * out. The worker does the I/O (compaction.ts).
 *
 * Levels: level 0 is a fine segment (one step's commits); level ℓ ≥ 1 is an
 * object that merged entries of lower levels. `levelsMs[ℓ − 1]` is level
 * ℓ's interval: its objects cover the entries shipped inside one aligned
 * window of that length (`floor(shippedAt / interval)`).
 *
 * The rules, lowest level first, one run per call:
 * - A run at level ℓ is consecutive entries of levels up to ℓ shipped inside
 *   one window of level ℓ, at least two of them and at least one below ℓ: a
 *   window's objects of level ℓ merge again with what came after them, so a
 *   closed window ends as one object of its level.
 * - It is due once its window has ended (`now` past the window's end). Also
 *   inside a window still open once its entries below the level hold as
 *   many stored bytes as the database (level 1: the fine segments), or
 *   twice as many (higher levels): under a load that rewrites the database
 *   every few seconds, waiting for the window's end would let the chain
 *   (what a restore of the latest state reads) grow to many times the
 *   database; at level 1 each closed window's object holds about the whole
 *   database, and the next window's first merge adds another. Twice, above
 *   level 1, so one burst of fine bytes costs one merge, not one per level.
 * - The chain's last entry is never part of a run: the next segment names
 *   its stored CRC-32 as its `previous`, and a restart continues from it, so
 *   it stays the fine object it is.
 * - With `maxRunLogBytes` (an engine whose merge holds every byte of its
 *   inputs, such as the framed store's concatenation), a run covering more
 *   of the log than that is not planned: its window's entries stay as they
 *   are at that level, and in every level above, whose windows hold it.
 *
 * Guarantees: a run never mixes windows of its level, so the granularity of
 * point-in-time restore inside an object of level ℓ is ℓ's window at worst
 * (an engine whose merge keeps every commit, the framed store's, stays
 * exact to the commit). What the chain holds is bounded by the levels, not
 * by uptime, except at the top level, one object per closed window: the
 * scheduled snapshot's size rule (a new generation once the chain outgrows
 * a multiple of the database), or the engine's own snapshots, bound that.
 * Nor past `maxRunLogBytes`: a window that covers more log than that keeps
 * its entries, as many as the steps that shipped them.
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
}): CompactionRun | null {
  const { chain, now, levelsMs, databaseBytes } = input;
  const maxRunLogBytes = input.maxRunLogBytes ?? Number.POSITIVE_INFINITY;
  // The last entry stays as it is.
  const usable = chain.length - 1;
  for (let index = 0; index < levelsMs.length; index++) {
    const level = index + 1;
    const interval = levelsMs[index]!;
    let first = 0;
    while (first < usable) {
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
        end < usable &&
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
        if (now >= (window + 1) * interval) return { level, first, end, reason: 'window-ended' };
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
