/**
 * The restorable window `backupd ls` reports: the oldest state a restore can
 * produce, where a restore of the latest state ends, and how finely the states
 * between can be chosen (rows per part of history, one-line notes; granularity
 * is explained in `ls --help`, ls-command.ts, and the README). Every sound
 * restore point counts, whatever its lineage or generation; corrupt ones do not.
 * Times come only from the manifests: a commit dated in the segments alone is
 * reported unknown, never guessed. Why: docs/decisions/2026-12-06-restorable-window.md.
 */
import type { GranularityRun, RestorePointInfo } from '@x/restore';
import { table } from './command-store.ts';

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

/** A FROM or TO cell of the window table. */
export interface WindowRowEdge {
  readonly commitSeq: number;
  /** RFC 3339, or `null` when not known (see `timeUnknown`). */
  readonly time: string | null;
  /**
   * Why `time` is `null`; `in-log`: the commit is inside a SQLite log, whose
   * commit records date it, and ls does not read them.
   */
  readonly timeUnknown?: NonNullable<WindowEdge['timeUnknown']> | 'in-log';
}

/** One part of the restorable history: a row of the window table. */
export interface WindowRow {
  /** `older restore points`, `snapshot`, `fine segments`, `level N` or `rolled forward`. */
  readonly part: string;
  readonly from: WindowRowEdge;
  readonly to: WindowRowEdge;
  /** Which states of the part a restore can choose, in a few words (ls --help explains them). */
  readonly granularity: string;
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
  /** The parts of history from `earliest` to `latest`, oldest first. */
  readonly rows: readonly WindowRow[];
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
    : sound.every((point) => (point.formatVersion ?? 1) >= 2)
      ? 'framed'
      : 'unknown';
  const earliest: WindowEdge = {
    commitSeq: oldest.restorableFrom,
    ...edgeTime(oldest, oldest.snapshotTime),
    manifestKey: oldest.manifestKey,
  };
  return {
    earliest,
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
    rows: windowRows(sound, base, earliest, engine, rolled),
  };
}

/** The time of a commit inside `point`'s log, which its manifest does not record. */
function innerTime(
  point: RestorePointInfo,
  engine: WindowEngine,
): Pick<WindowRowEdge, 'time' | 'timeUnknown'> {
  if (point.formatVersion === 1) return { time: null, timeUnknown: 'older-release' };
  return { time: null, timeUnknown: engine === 'sqlite' ? 'in-log' : 'not-recorded' };
}

/**
 * The rows: the older restore points' part (below the base's snapshot), the
 * base's log run by run (one fine-segments row when it names no compacted
 * object), and the rolled-forward tail.
 */
function windowRows(
  sound: readonly SoundPoint[],
  base: SoundPoint,
  earliest: WindowEdge,
  engine: WindowEngine,
  rolled: number,
): WindowRow[] {
  const rows: WindowRow[] = [];
  const start = base.restorableFrom;
  const older = sound.filter((point) => point !== base && point.restorableFrom < start);
  if (older.length > 0 && earliest.commitSeq < start) {
    let top = older[0]!;
    for (const point of older) if (point.commitSeq > top.commitSeq) top = point;
    const compacted = older.some((point) => point.granularity?.some((run) => run.level > 0));
    rows.push({
      part: 'older restore points',
      from: { commitSeq: earliest.commitSeq, time: earliest.time, ...unknownOf(earliest) },
      // Where they reach past the base's snapshot, the base's rows go on.
      to:
        top.commitSeq < start
          ? { commitSeq: top.commitSeq, ...edgeTime(top, top.commitTime) }
          : { commitSeq: start - 1, ...innerTime(top, engine) },
      granularity: !compacted ? 'every commit' : OLDER_COMPACTED[engine],
    });
  }
  const from = (run: number, after: number): WindowRowEdge =>
    run === 0
      ? { commitSeq: start, ...edgeTime(base, base.snapshotTime) }
      : { commitSeq: after + 1, ...innerTime(base, engine) };
  const to = (commitSeq: number): WindowRowEdge =>
    commitSeq === base.commitSeq
      ? { commitSeq, ...edgeTime(base, base.commitTime) }
      : { commitSeq, ...innerTime(base, engine) };
  if (base.granularity !== undefined)
    base.granularity.forEach((run, index) => {
      rows.push({
        part: run.level === 0 ? 'fine segments' : `level ${run.level}`,
        from: from(index, run.after),
        to: to(run.to),
        granularity: runGranularity(run, engine),
      });
    });
  else
    rows.push({
      part: base.commitSeq === start ? 'snapshot' : 'fine segments',
      from: from(0, start),
      to: to(base.commitSeq),
      granularity: base.commitSeq === start ? 'its one state' : 'every commit',
    });
  if (rolled > 0)
    rows.push({
      part: 'rolled forward',
      from: { commitSeq: base.commitSeq + 1, time: null, timeUnknown: 'rolled-forward' },
      to: { commitSeq: base.commitSeq + rolled, time: null, timeUnknown: 'rolled-forward' },
      granularity: ROLLED[engine],
    });
  return rows;
}

function unknownOf(edge: WindowEdge): Pick<WindowRowEdge, 'timeUnknown'> {
  return edge.timeUnknown === undefined ? {} : { timeUnknown: edge.timeUnknown };
}

/**
 * A run of the latest restore point's log. A framed store's compacted
 * objects hold every frame they merged, so its runs of any level stay
 * exact; a SQLite one's only at their ends. When the listing cannot tell
 * the engine (version 1 restore points beside undated ones), both are said.
 */
function runGranularity(run: GranularityRun, engine: WindowEngine): string {
  if (run.level === 0) return 'every commit';
  const objects = run.objects === 1 ? '1 object' : `${run.objects} objects`;
  if (engine === 'framed') return `every commit (${objects})`;
  if (run.exactAfter === run.after) return `every commit (${objects}, fine segments kept)`;
  const exact = run.exactAfter === undefined ? '' : `; exact after commit ${run.exactAfter}`;
  if (engine === 'sqlite')
    return `${run.objects === 1 ? "only at the object's end" : `only at the ends of ${objects}`}${exact}`;
  return `framed: every commit; SQLite: ${run.objects === 1 ? "the object's end" : `${objects}' ends`}${exact}`;
}

/** Older restore points of which one names compacted objects. */
const OLDER_COMPACTED: Record<WindowEngine, string> = {
  sqlite: 'every commit; compacted: object ends',
  framed: 'every commit',
  unknown: 'every commit; SQLite compacted: object ends',
};

/** The rolled-forward commits: `restore --commit` takes only commits a restore point names. */
const ROLLED: Record<WindowEngine, string> = {
  sqlite: 'every commit, by --time',
  framed: 'only its end',
  unknown: 'framed: its end; SQLite: by --time',
};

const UNKNOWN: Record<NonNullable<WindowRowEdge['timeUnknown']>, string> = {
  'older-release': 'older release',
  'not-recorded': 'not recorded',
  'rolled-forward': 'in rolled segments',
  'in-log': 'in the log',
};

/** A FROM or TO cell. */
export function edgeText(edge: WindowRowEdge): string {
  return `commit ${edge.commitSeq} (${edge.time ?? `time unknown, ${UNKNOWN[edge.timeUnknown ?? 'not-recorded']}`})`;
}

/** The gaps named one by one; past that, one line counts the rest. */
const GAPS_NAMED = 3;

/** The one-line notes under the window table, only those that apply. */
export function windowNotes(window: RestorableWindow): string[] {
  const notes: string[] = [];
  const { latest } = window;
  if (latest.rolledForwardCommits === null)
    notes.push(
      `the roll-forward past commit ${latest.restorePointCommitSeq} was not checked: a restore of the latest state may reach further`,
    );
  if (window.unnamedAbove !== undefined)
    notes.push(
      `a restore point LATEST does not name reaches commit ${window.unnamedAbove} (restore --commit ${window.unnamedAbove})`,
    );
  // Typically a generation's tail shipped after its newest restore point:
  // restorePointForCommit cannot serve it, the time search rolls forward into it.
  for (const gap of window.gaps.slice(0, GAPS_NAMED))
    notes.push(
      `${gap.from === gap.to ? `commit ${gap.from} is` : `commits ${gap.from}..${gap.to} are`} in no restore point (restore --commit refuses them; see ls --help)`,
    );
  if (window.gaps.length > GAPS_NAMED)
    notes.push(
      `${window.gaps.length - GAPS_NAMED} more commit ranges are in no restore point (ls --json lists them under window.gaps)`,
    );
  if (window.lineages.length > 1)
    notes.push(
      `the window spans ${window.lineages.length} lineages (restore --commit and --time reach each)`,
    );
  return notes;
}

/** The restorable window section of `backupd ls`: a heading, the table, the notes. */
export function windowText(window: RestorableWindow | null): string {
  // ls prints no window for an empty prefix; null here means every point listed is corrupt.
  if (window === null)
    return 'RESTORABLE WINDOW: nothing restorable (no restore point listed is sound)';
  const rows = window.rows.map((row) => [
    row.part,
    edgeText(row.from),
    edgeText(row.to),
    row.granularity,
  ]);
  return [
    'RESTORABLE WINDOW (GRANULARITY explained in backupd ls --help)',
    table(['PART', 'FROM', 'TO', 'GRANULARITY'], rows),
    ...windowNotes(window),
  ].join('\n');
}

/** The window for `ls --json`: the same facts, the notes and the text. */
export function windowJson(window: RestorableWindow | null): object | null {
  return window === null
    ? null
    : { ...window, notes: windowNotes(window), text: windowText(window) };
}
