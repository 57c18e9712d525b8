/**
 * Retention as a pure plan: restore points and listings in, deletions out. The
 * worker does the I/O between the phases: manifests are listed and read first
 * ({@link selectManifests}); only when some are dropped are the base objects
 * and the retiring generations' segments listed ({@link retiringGenerations},
 * {@link planDeletions}). It keeps by count, by time window or both, drops the
 * manifests a compaction superseded, and deletes only this lineage's objects
 * that no kept manifest names, never LATEST or LEASE; on doubt it keeps. Every
 * rule and its reason: docs/decisions/2026-12-06-retention-rules.md.
 */
import {
  type Manifest,
  parseSegmentKey,
  parseSideKey,
  parseVersionedGeneration,
} from '@x/manifest';
import { BackupError } from './errors.ts';
import {
  DEFAULT_COMPACTION_LEVELS_MS,
  DEFAULT_EXACT_WINDOW_MS,
  DEFAULT_MANIFEST_INTERVAL_MS,
  DEFAULT_RETAIN_FOR_MS,
} from './worker-options.ts';

/**
 * What retention keeps, resolved from the worker's options: `count`, the
 * newest manifests to keep (absent: no count); `windowMs`, the window by
 * time (absent: no window). With neither, retention does not run.
 */
export interface RetentionPolicy {
  readonly count?: number;
  readonly windowMs?: number;
  /** The exact window: every commit this recent restores exactly. */
  readonly exactWindowMs: number;
  /**
   * How long a compacted-away fine segment is kept ({@link exactWindowSplit}):
   * the exact window and one level-1 window, the most a level-1 object's
   * oldest input is older than its newest commit (0 without a window).
   */
  readonly keepReplacedFineMs: number;
  /** The least time between two passes ({@link RETENTION_PASS_MANIFEST_INTERVALS}). */
  readonly intervalMs: number;
}

/**
 * Retention passes at most once per this many manifest intervals (60 s at
 * the default 15 s): each pass costs a LIST of `manifest/` and, when
 * something is due, a batch delete, while deleting a minute sooner gains
 * nothing.
 */
export const RETENTION_PASS_MANIFEST_INTERVALS = 4;

/**
 * The policy of `retain` and `retainFor`: as given (both: the union); neither
 * given: the {@link DEFAULT_RETAIN_FOR_MS} window. `retain: 0` keeps all, so
 * any union with it does too: no retention.
 * @throws BackupError naming the option when one is not a valid value.
 */
export function retentionPolicy(options: {
  readonly retain?: number;
  readonly retainFor?: number;
  readonly exactWindowMs?: number;
  readonly manifestIntervalMs?: number;
  readonly compactionLevels?: readonly number[];
}): RetentionPolicy {
  const { retain, retainFor } = options;
  const exactWindowMs = options.exactWindowMs ?? DEFAULT_EXACT_WINDOW_MS;
  const levelOneMs = (options.compactionLevels ?? DEFAULT_COMPACTION_LEVELS_MS)[0] ?? 0;
  const window = {
    exactWindowMs,
    keepReplacedFineMs: exactWindowMs === 0 ? 0 : exactWindowMs + levelOneMs,
  };
  const intervalMs =
    RETENTION_PASS_MANIFEST_INTERVALS *
    (options.manifestIntervalMs ?? DEFAULT_MANIFEST_INTERVAL_MS);
  if (!(Number.isSafeInteger(exactWindowMs) && exactWindowMs >= 0))
    throw new BackupError(
      `invalid exactWindowMs ${String(exactWindowMs)}: a whole number of milliseconds, at least 0`,
    );
  if (retain !== undefined && !(Number.isSafeInteger(retain) && retain >= 0))
    throw new BackupError(
      `invalid retain ${String(retain)}: a whole number of restore points, at least 0 (0 keeps all)`,
    );
  if (retainFor !== undefined && !(Number.isFinite(retainFor) && retainFor > 0))
    throw new BackupError(
      `invalid retainFor ${String(retainFor)}: a window in milliseconds, more than 0`,
    );
  if (retain === 0) return { ...window, intervalMs };
  if (retain === undefined && retainFor === undefined)
    return { windowMs: DEFAULT_RETAIN_FOR_MS, ...window, intervalMs };
  return {
    ...window,
    intervalMs,
    ...(retain === undefined ? {} : { count: retain }),
    ...(retainFor === undefined ? {} : { windowMs: retainFor }),
  };
}

/** Whether a policy keeps fewer than all restore points (whether retention runs). */
export function retentionRuns(policy: RetentionPolicy): boolean {
  return policy.count !== undefined || policy.windowMs !== undefined;
}

export interface ListedManifest {
  readonly key: string;
  /** `null`: the object does not parse (or is too large). */
  readonly manifest: Manifest | null;
}

export interface KeyedManifest {
  readonly key: string;
  readonly manifest: Manifest;
}

export interface ManifestSelection {
  /** This lineage's manifests to keep, oldest first. */
  readonly kept: KeyedManifest[];
  /** This lineage's manifests to delete, oldest first. */
  readonly dropped: KeyedManifest[];
  /** Keys another lineage's manifest names: never deleted. */
  readonly foreign: Set<string>;
  /** A manifest under the prefix did not parse: delete only the dropped manifests. */
  readonly doubt: boolean;
  /** This lineage's restore points once the dropped ones are gone. */
  readonly restorePoints: number;
}

/**
 * Which manifests to keep: the newest `retain` of `lineage` and/or those the
 * window `retainFor` (ending at `wallNow`) needs, plus `justWritten` and
 * `latestTarget`. `manifests` in key order (oldest first). With neither
 * `retain` nor `retainFor`, everything is kept.
 */
export function selectManifests(input: {
  readonly manifests: readonly ListedManifest[];
  readonly lineage: string;
  /** Newest manifests to keep; absent: no count. */
  readonly retain?: number;
  /** The window by time, in milliseconds; absent: no window. */
  readonly retainFor?: number;
  /** The clock's wall time (ms since the epoch); the window ends here. Required with `retainFor`. */
  readonly wallNow?: number;
  readonly justWritten: string;
  readonly latestTarget: string | null;
}): ManifestSelection {
  const mine: KeyedManifest[] = [];
  const foreign = new Set<string>();
  let doubt = false;
  for (const { key, manifest } of input.manifests) {
    if (manifest === null) {
      doubt = true;
      continue;
    }
    if (manifest.lineage === input.lineage) mine.push({ key, manifest });
    else {
      for (const f of manifest.files) foreign.add(f.key);
      for (const s of manifest.segments) foreign.add(s.key);
    }
  }
  // The first index kept by each rule; everything from it on is kept.
  let keepFrom = mine.length;
  if (input.retain !== undefined) keepFrom = Math.min(keepFrom, mine.length - input.retain);
  if (input.retainFor !== undefined)
    keepFrom = Math.min(keepFrom, windowStart(mine, input.retainFor, input.wallNow));
  if (input.retain === undefined && input.retainFor === undefined) keepFrom = 0;
  const superseded = supersededByCompaction(mine);
  if (keepFrom <= 0 && superseded.size === 0)
    return { kept: mine, dropped: [], foreign, doubt, restorePoints: mine.length };
  const kept: KeyedManifest[] = [];
  const dropped: KeyedManifest[] = [];
  mine.forEach((entry, index) => {
    if (entry.key === input.justWritten || entry.key === input.latestTarget) kept.push(entry);
    else if (index >= keepFrom && !superseded.has(entry.key)) kept.push(entry);
    else dropped.push(entry);
  });
  return { kept, dropped, foreign, doubt, restorePoints: kept.length };
}

/**
 * Keys of the manifests that name a segment the newest manifest of their
 * generation (by key: commit order) does not: a compaction replaced it.
 * Manifests of one generation name ever longer prefixes of one chain, so an
 * older one names only entries the newest names, unless a compaction merged
 * some of them since.
 */
function supersededByCompaction(mine: readonly KeyedManifest[]): Set<string> {
  const newest = new Map<number, Manifest>();
  for (const { manifest } of mine) newest.set(manifest.walGeneration, manifest);
  const named = new Map<number, Set<string>>();
  for (const [generation, manifest] of newest)
    named.set(generation, new Set(manifest.segments.map((s) => s.key)));
  const superseded = new Set<string>();
  for (const { key, manifest } of mine) {
    const latest = named.get(manifest.walGeneration)!;
    if (manifest.segments.some((s) => !latest.has(s.key))) superseded.add(key);
  }
  return superseded;
}

/**
 * The first index (key order) the window keeps: the one before the oldest
 * manifest created inside it, so a restore to the window's start has the
 * restore point holding its commits; the newest when none is inside.
 */
function windowStart(
  mine: readonly KeyedManifest[],
  retainFor: number,
  wallNow: number | undefined,
): number {
  // Without a clock reading nothing can be judged outside: keep all.
  if (wallNow === undefined || !Number.isFinite(wallNow)) return 0;
  const start = wallNow - retainFor;
  const firstInside = mine.findIndex(({ manifest }) => {
    const created = Date.parse(manifest.createdAt);
    // Unreadable: inside (kept), never judged old. Ahead of the clock is
    // after the start too: inside.
    return Number.isNaN(created) || created >= start;
  });
  const inside = firstInside === -1 ? mine.length : firstInside;
  return Math.max(0, inside - 1);
}

export interface RetiringGenerations {
  /** Generations of this lineage: allocated by this tenure or named by one of its manifests. */
  readonly owned: Set<number>;
  /** Every key a kept manifest names. */
  readonly referenced: Set<string>;
  /** Generations whose segment prefixes are to be listed and cleared, ascending. */
  readonly retiring: number[];
}

/** The generations retention may clear, given what is kept. */
export function retiringGenerations(input: {
  readonly selection: ManifestSelection;
  readonly allocated: ReadonlySet<number>;
  /** The generation being shipped (never retired). */
  readonly current: number | undefined;
  /** Generations already cleared by an earlier retention (listed once only). */
  readonly retired: ReadonlySet<number>;
}): RetiringGenerations {
  const { kept, dropped } = input.selection;
  const owned = new Set<number>(input.allocated);
  for (const { manifest } of [...kept, ...dropped]) owned.add(manifest.walGeneration);
  const referenced = new Set<string>();
  let oldestKept = Number.POSITIVE_INFINITY;
  for (const { manifest } of kept) {
    oldestKept = Math.min(oldestKept, manifest.walGeneration);
    for (const f of manifest.files) referenced.add(f.key);
    for (const s of manifest.segments) referenced.add(s.key);
  }
  const retiring = [...owned]
    .filter((g) => g < oldestKept && g !== input.current && !input.retired.has(g))
    .sort((a, b) => a - b);
  return { owned, referenced, retiring };
}

/**
 * Whether a snapshot or archive may have lost its last restore point: a
 * dropped manifest named one that no kept manifest names, or a generation
 * retires. Only then are `snapshots/` and `archives/` listed.
 */
export function baseObjectsMayBeUnnamed(
  prefix: string,
  selection: ManifestSelection,
  generations: RetiringGenerations,
): boolean {
  if (generations.retiring.length > 0) return true;
  return selection.dropped.some(({ manifest }) =>
    manifest.files.some(
      (f) =>
        parseVersionedGeneration(prefix, f.key) !== undefined && !generations.referenced.has(f.key),
    ),
  );
}

/**
 * Side objects of this source's names that no manifest names and this
 * tenure does not hold: what an earlier writer uploaded before a crash kept
 * its restore point from being written. In clear a later upload of the same
 * bytes lands on the same key; sealed, it never does, so without this they
 * would stay forever. Only earlier tenures leave such objects, and the
 * lease fenced them before this one began.
 */
export function unnamedSideObjects(input: {
  readonly prefix: string;
  /** Keys listed under `side/`. */
  readonly listed: readonly string[];
  readonly ownSideNames: ReadonlySet<string>;
  readonly selection: ManifestSelection;
  /** Side keys this tenure wrote or reuses. */
  readonly held: ReadonlySet<string>;
}): string[] {
  const { prefix, selection } = input;
  if (selection.doubt) return [];
  const named = new Set<string>(selection.foreign);
  for (const { manifest } of [...selection.kept, ...selection.dropped])
    for (const f of manifest.files) named.add(f.key);
  return input.listed.filter((key) => {
    const side = parseSideKey(prefix, key);
    return (
      side !== undefined &&
      input.ownSideNames.has(side.name) &&
      !named.has(key) &&
      !input.held.has(key)
    );
  });
}

/**
 * The objects to delete, in order: unnamed snapshots and archives of owned
 * generations (as listed), side files only dropped manifests named, then the
 * retiring generations' unnamed segments. Nothing a foreign manifest names.
 */
export function planDeletions(input: {
  readonly prefix: string;
  readonly selection: ManifestSelection;
  readonly generations: RetiringGenerations;
  /** Keys listed under `snapshots/`, then under `archives/`. */
  readonly baseObjects: readonly string[];
  /** Side and chain file names the source writes (only these are ever deleted under `side/`). */
  readonly ownSideNames: ReadonlySet<string>;
  /** Keys listed under each retiring generation's segment prefix. */
  readonly segmentObjects: ReadonlyMap<number, readonly string[]>;
  /** Segments a compaction of this tenure replaced in its chain, due for deletion. */
  readonly compactedAway?: ReadonlySet<string>;
  /** Fine segments kept for exact point-in-time restores ({@link exactWindowSplit}): never deleted here. */
  readonly keptForExactWindow?: ReadonlySet<string>;
}): string[] {
  const { prefix, selection, generations, ownSideNames } = input;
  const { owned, referenced, retiring } = generations;
  const doomed: string[] = [];
  for (const key of input.baseObjects) {
    const g = parseVersionedGeneration(prefix, key);
    if (g !== undefined && owned.has(g) && !referenced.has(key)) doomed.push(key);
  }
  const sidePrefix = `${prefix}/side/`;
  const side = new Set<string>();
  for (const { manifest } of selection.dropped)
    for (const f of manifest.files)
      if (f.key.startsWith(sidePrefix) && ownSideNames.has(f.name) && !referenced.has(f.key))
        side.add(f.key);
  doomed.push(...side);
  // Segments of kept generations that only dropped manifests named, or that
  // a compaction replaced: known by name, deleted without a listing.
  const unnamed = new Set<string>(input.compactedAway ?? []);
  for (const { manifest } of selection.dropped)
    for (const s of manifest.segments) unnamed.add(s.key);
  for (const key of unnamed) {
    const parsed = parseSegmentKey(prefix, key);
    if (
      parsed &&
      !input.keptForExactWindow?.has(key) &&
      owned.has(parsed.generation) &&
      !retiring.includes(parsed.generation) &&
      !referenced.has(key)
    )
      doomed.push(key);
  }
  for (const g of retiring) {
    for (const key of input.segmentObjects.get(g) ?? []) {
      const parsed = parseSegmentKey(prefix, key);
      if (parsed && parsed.generation === g && !referenced.has(key)) doomed.push(key);
    }
  }
  return doomed.filter((key) => !selection.foreign.has(key));
}

/**
 * Which compacted-away entries retention may delete now: compacted objects
 * at once, fine segments once shipped at least `keepMs` ago. Until
 * then a restore to a commit or time inside the compacted object that
 * replaced them reads them instead, exactly.
 */
export function exactWindowSplit(input: {
  readonly prefix: string;
  readonly compactedAway: ReadonlyMap<string, number>;
  readonly wallNow: number;
  readonly keepMs: number;
}): { due: Set<string>; kept: Set<string> } {
  const due = new Set<string>();
  const kept = new Set<string>();
  for (const [key, shippedAt] of input.compactedAway) {
    const fine = parseSegmentKey(input.prefix, key)?.layout === 'object';
    if (fine && shippedAt + input.keepMs > input.wallNow) kept.add(key);
    else due.add(key);
  }
  return { due, kept };
}
