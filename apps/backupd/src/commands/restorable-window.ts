/**
 * The restorable window `backupd ls` reports: the oldest state a restore can
 * produce, the newest one a restore of the latest state produces, and how
 * finely the states in between can be chosen.
 *
 * Which restore points count: every sound one listed, whatever its lineage
 * or generation. `restore --commit` takes any sound manifest that covers the
 * commit and the time search (`sqliteCommitAtTime`) walks every
 * generation's newest sound point; neither filters by lineage, so an
 * adopted prefix's parent lineage is part of what can be restored. Corrupt
 * points are not: restore skips them.
 *
 * Times come from the manifests only (format version 2 records
 * `snapshotTime`/`commitTime`). Commits a restore rolls forward over live in
 * the rolled segments' commit records, which ls does not download: their
 * time is reported as unknown here, never guessed.
 */
import type { GranularityRun, RestorePointInfo } from '@x/restore';

/** What the listing tells about the engine, from the times its manifests record. */
export type WindowEngine = 'sqlite' | 'framed' | 'unknown';

export interface WindowEdge {
  readonly commitSeq: number;
  /** RFC 3339, or `null` when not known (see `timeUnknown`). */
  readonly time: string | null;
  /** Why `time` is `null`. */
  readonly timeUnknown?: 'older-release' | 'not-recorded' | 'rolled-forward';
  /** The restore point this edge belongs to. */
  readonly manifestKey: string;
}

export interface RestorableWindow {
  readonly earliest: WindowEdge;
  /** Where a restore of the latest state ends (after its roll-forward). */
  readonly latest: WindowEdge & {
    /** Commits rolled forward past `manifestKey`'s own; `null` when that could not be checked. */
    readonly rolledForwardCommits: number | null;
    /** The restore point's own commit time, when commits were rolled over past it. */
    readonly restorePointCommitSeq: number;
    readonly restorePointTime: string | null;
  };
  readonly engine: WindowEngine;
  /** Commit ranges between the edges that no sound restore point (nor the roll-forward) covers. */
  readonly gaps: readonly { readonly from: number; readonly to: number }[];
  /** Lineages of the sound restore points, oldest first. */
  readonly lineages: readonly string[];
  /** The highest commit of a sound restore point above `latest` (LATEST does not name it), if any. */
  readonly unnamedAbove?: number;
  /** The granularity of the latest restore point's commit log, when it names compacted objects. */
  readonly granularity?: readonly GranularityRun[];
}

type SoundPoint = RestorePointInfo & { readonly restorableFrom: number };

function isSound(point: RestorePointInfo): point is SoundPoint {
  return point.status === 'ok' && point.restorableFrom !== undefined;
}

function edgeTime(
  point: RestorePointInfo,
  time: string | null | undefined,
): Pick<WindowEdge, 'time' | 'timeUnknown'> {
  if (time !== undefined && time !== null) return { time };
  return { time: null, timeUnknown: point.formatVersion === 1 ? 'older-release' : 'not-recorded' };
}

/**
 * The window over `points`, with `base` the restore point a restore of the
 * latest state uses and `rolledCommits` what it rolls forward past it
 * (`null`: unknown). `null` when no point is sound or there is no base.
 */
export function restorableWindow(
  points: readonly RestorePointInfo[],
  base: RestorePointInfo | undefined,
  rolledCommits: number | null,
): RestorableWindow | null {
  const sound = points.filter(isSound);
  if (sound.length === 0 || base === undefined || !isSound(base)) return null;
  // The oldest state: the lowest commit any sound point restores (ties: the first listed).
  let oldest = sound[0]!;
  for (const point of sound) if (point.restorableFrom < oldest.restorableFrom) oldest = point;
  const rolled = rolledCommits ?? 0;
  const latestCommit = base.commitSeq + rolled;
  const latestTime =
    rolled > 0
      ? { time: null, timeUnknown: 'rolled-forward' as const }
      : edgeTime(base, base.commitTime);
  // Covered commit ranges, merged; what lies between them is a gap.
  const ranges = sound
    .map((point) => ({ from: point.restorableFrom, to: point.commitSeq }))
    .concat(rolled > 0 ? [{ from: base.commitSeq, to: latestCommit }] : [])
    .sort((a, b) => a.from - b.from || a.to - b.to);
  const gaps: { from: number; to: number }[] = [];
  let reached = ranges[0]!.to;
  for (const range of ranges.slice(1)) {
    if (range.from > reached + 1 && reached < latestCommit)
      gaps.push({ from: reached + 1, to: Math.min(range.from - 1, latestCommit) });
    reached = Math.max(reached, range.to);
  }
  const lineages = [...new Set(sound.flatMap((point) => point.lineage ?? []))];
  const above = Math.max(...sound.map((point) => point.commitSeq));
  // Engine: a SQLite backup dates its states (version 2); the framed engine records none.
  const dated = sound.some((point) => (point.snapshotTime ?? point.commitTime ?? null) !== null);
  const engine: WindowEngine = dated
    ? 'sqlite'
    : sound.every((point) => point.formatVersion === 2)
      ? 'framed'
      : 'unknown';
  return {
    earliest: {
      commitSeq: oldest.restorableFrom,
      ...edgeTime(oldest, oldest.snapshotTime),
      manifestKey: oldest.manifestKey,
    },
    latest: {
      commitSeq: latestCommit,
      ...latestTime,
      manifestKey: base.manifestKey,
      rolledForwardCommits: rolledCommits,
      restorePointCommitSeq: base.commitSeq,
      restorePointTime: base.commitTime ?? null,
    },
    engine,
    gaps,
    lineages,
    ...(above > latestCommit ? { unnamedAbove: above } : {}),
    ...(base.granularity === undefined ? {} : { granularity: base.granularity }),
  };
}

/**
 * One run of the latest restore point's log, as `windowLine` says it. A
 * framed store's compacted objects hold every frame they merged, so its
 * runs of any level stay exact; a SQLite one's only at their ends. When the
 * listing cannot tell the engine (version 1 restore points beside newer
 * ones), both are said.
 */
function runText(run: GranularityRun, engine: WindowEngine): string {
  const range = `commits ${run.after + 1}..${run.to}`;
  if (run.level === 0) return `${range} exact (fine segments)`;
  const objects = run.objects === 1 ? 'one object' : `${run.objects} objects`;
  if (engine === 'framed') return `${range} exact (${objects} of level ${run.level})`;
  const ends = run.objects === 1 ? 'its end' : `the ends of its ${run.objects} objects`;
  if (engine === 'unknown')
    return `${range} exact in a framed store, in a SQLite backup only at ${ends} (level ${run.level})`;
  return `${range} only at ${ends} (level ${run.level})`;
}

const UNKNOWN: Record<NonNullable<WindowEdge['timeUnknown']>, string> = {
  'older-release': 'time unknown (written by an older release)',
  'not-recorded': 'time unknown (this backup records no times)',
  'rolled-forward':
    'time unknown to ls: it is in the rolled-forward segments, which ls does not read',
};

function edgeText(edge: WindowEdge): string {
  return `commit ${edge.commitSeq} (${edge.time ?? UNKNOWN[edge.timeUnknown ?? 'not-recorded']})`;
}

/** What a restore can choose between the edges, per engine (docs/format.md). */
const GRANULARITY: Record<WindowEngine, string> = {
  sqlite:
    "exact to the commit where the fine log objects are kept (the newest window, not yet compacted), except commits the replica batched while behind the application (restorable together, to the batch's end; this listing does not show whether any were); inside a compacted object (`.L{level}` key) only at its end, the end of a window of its level (30 s, 5 min, 1 h by default); by time, the newest restorable commit at or before it, each commit dated to the millisecond when backupd first saw it",
  framed:
    'exact to the commit throughout (one frame per commit, compacted objects included); no times recorded: by commit only',
  unknown:
    "exact to the commit, except, in a SQLite backup, commits the replica batched while behind the application (restorable together, to the batch's end) and inside compacted objects (only at their end); by time only where commit records date the commits",
};

/** The `WINDOW:` line of `backupd ls`. */
export function windowLine(window: RestorableWindow | null): string {
  // ls prints no window for an empty prefix; null here means every point listed is corrupt.
  if (window === null) return 'WINDOW: nothing restorable (no restore point listed is sound)';
  const { earliest, latest } = window;
  const parts = [`restorable from ${edgeText(earliest)} to ${edgeText(latest)}`];
  if (latest.rolledForwardCommits === null)
    parts.push(
      `the roll-forward past commit ${latest.restorePointCommitSeq} could not be checked, so a restore of the latest state may reach further`,
    );
  else if (latest.rolledForwardCommits > 0)
    parts.push(
      `commit ${latest.restorePointCommitSeq}, the restore point's, is at ${latest.restorePointTime ?? 'an unknown time'}`,
    );
  if (window.unnamedAbove !== undefined)
    parts.push(
      `a restore point LATEST does not name reaches commit ${window.unnamedAbove} (restore --commit)`,
    );
  // Typically a generation's tail shipped after its newest restore point:
  // restorePointForCommit cannot serve it, the time search rolls forward into it.
  for (const gap of window.gaps)
    parts.push(
      `${gap.from === gap.to ? `commit ${gap.from} is` : `commits ${gap.from}..${gap.to} are`} in no restore point: restore --commit refuses them, restore --time reaches them only if they were shipped in segments chained to the restore point below`,
    );
  if (window.lineages.length > 1)
    parts.push(
      `spans ${window.lineages.length} lineages (restore --commit and --time reach every lineage listed)`,
    );
  if (window.granularity !== undefined)
    parts.push(
      `the latest restore point's log after its snapshot: ${window.granularity.map((run) => runText(run, window.engine)).join(', ')}`,
    );
  parts.push(GRANULARITY[window.engine]);
  return `WINDOW: ${parts.join('; ')}`;
}

/** The window for `ls --json`: the same facts, plus the line. */
export function windowJson(window: RestorableWindow | null): object | null {
  return window === null ? null : { ...window, text: windowLine(window) };
}
