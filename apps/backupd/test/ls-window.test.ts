/**
 * `backupd ls` reports the restorable window: from the oldest restore
 * point's state start (its snapshot commit and time) to where a restore of
 * the latest state ends (the roll-forward end when there is one, else the
 * newest restore point), and what can be chosen in between, as a table of
 * the parts of history with a few notes. Real processes for the edges a
 * bucket really has; the formatting alone on hand-made restore points for
 * the cases a live bucket does not produce on demand.
 */
import { mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { pathToFileURL } from 'node:url';
import type { RestorePointInfo } from '@x/restore';
import { describe, expect, it } from 'vitest';
import {
  edgeText,
  type RestorableWindow,
  restorableWindow,
  type WindowRow,
  windowJson,
  windowNotes,
  windowText,
} from '../src/commands/restorable-window.ts';
import { baseEnv, runCli, startBackupd, suiteWorkspace, waitFor } from './helpers/cli.ts';

interface ListedPoint {
  manifestKey: string;
  commitSeq: number;
  restorableFrom: number;
  latest: boolean;
  snapshotTime: string | null;
  commitTime: string | null;
  rolledForward?: { commits: number };
  window?: {
    earliest: { commitSeq: number; time: string | null };
    latest: { commitSeq: number; time: string | null; rolledForwardCommits: number | null };
    rows: WindowRow[];
    notes: string[];
    text: string;
  };
}

const HEADING = 'RESTORABLE WINDOW (GRANULARITY explained in backupd ls --help)';

/**
 * The rows of the window table in `text` (`ls` output or `window.text`), as
 * their four cells, read at the header's column starts; `count` rows.
 */
function tableRows(text: string, count: number): string[][] {
  const lines = text.split('\n');
  const at = lines.indexOf(HEADING);
  expect(at, text).toBeGreaterThanOrEqual(0);
  const header = lines[at + 1]!;
  expect(header, text).toMatch(/^PART\s+FROM\s+TO\s+GRANULARITY$/);
  const starts = ['PART', 'FROM', 'TO', 'GRANULARITY'].map((title) => header.indexOf(title));
  return lines
    .slice(at + 2, at + 2 + count)
    .map((line) =>
      starts.map((start, column) => line.slice(start, starts[column + 1] ?? line.length).trim()),
    );
}

/** What the table prints for `rows`. */
function cellsOf(rows: readonly WindowRow[]): string[][] {
  return rows.map((row) => [row.part, edgeText(row.from), edgeText(row.to), row.granularity]);
}

/** The notes: the lines after the table's rows. */
function notesOf(text: string, rows: number): string[] {
  const lines = text.split('\n');
  return lines.slice(lines.indexOf(HEADING) + 2 + rows);
}

/** The `.seg` objects under `root` (the file store names each `{key}~obj`). */
function segments(root: string): number {
  try {
    return (readdirSync(root, { recursive: true }) as string[]).filter((name) =>
      /\.seg(~obj)?$/.test(name),
    ).length;
  } catch {
    return 0; // Not created yet.
  }
}

describe('backupd ls: the restorable window, through the CLI', () => {
  const { directory, running } = suiteWorkspace('ls-window');
  const database = join(directory, 'app.db');
  const bucket = join(directory, 'app.db-backups');
  const backups = pathToFileURL(bucket).href;
  const env = baseEnv({
    BACKUPD_INTERVAL: '200ms',
    // No restore point but the first (and the final one of a graceful stop):
    // commits shipped after it are reached only by the roll-forward.
    BACKUPD_RESTORE_POINT_INTERVAL: '1h',
    BACKUPD_LEASE_TTL: '3s',
  });
  const listed = async (): Promise<ListedPoint[]> => {
    const result = await runCli(['ls', backups, '--json'], { env });
    expect(result.code, result.stderr).toBe(0);
    return JSON.parse(result.stdout) as ListedPoint[];
  };
  /**
   * `ls` in text, with one window section and every line at most 160
   * characters, except the restore point table's `points` rows: those grow
   * with the lineage, the STATE TIMES range and a corrupt point's reason.
   */
  const lsText = async (points: number): Promise<string> => {
    const result = await runCli(['ls', backups], { env });
    expect(result.code, result.stderr).toBe(0);
    const lines = result.stdout.trimEnd().split('\n');
    const header = lines.findIndex((line) => /^LATEST\s+COMMITS/.test(line));
    expect(header, result.stdout).toBeGreaterThanOrEqual(0);
    lines.forEach((line, index) => {
      if (index <= header || index > header + points)
        expect(line.length, line).toBeLessThanOrEqual(160);
    });
    expect(
      lines.filter((line) => line.startsWith('RESTORABLE WINDOW')),
      result.stdout,
    ).toEqual([HEADING]);
    expect(result.stdout).not.toContain('WINDOW:');
    return result.stdout;
  };
  const commitShipped = async (db: DatabaseSync, value: number, describe: () => string) => {
    const shipped = segments(bucket);
    db.exec(`INSERT INTO t VALUES (${value})`);
    // Long enough for a restarted replicate to take over the dead one's lease.
    await waitFor('the commit shipped', () => segments(bucket) > shipped || undefined, {
      timeoutMs: 30_000,
      describe,
    });
  };

  it('an empty prefix: "no restore points", no window section, and still an array in JSON', async () => {
    const empty = join(directory, 'empty-backups');
    mkdirSync(empty);
    const text = await runCli(['ls', pathToFileURL(empty).href], { env });
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toBe('no restore points\n');
    const json = await runCli(['ls', pathToFileURL(empty).href, '--json'], { env });
    expect(JSON.parse(json.stdout)).toEqual([]);
  });

  it('after a SIGKILL past the restore point: the latest edge is the roll-forward end, time unknown', async () => {
    const db = new DatabaseSync(database);
    db.exec('PRAGMA journal_mode=WAL; CREATE TABLE t (x INTEGER);');
    const backupd = startBackupd(['replicate', database, backups], { env });
    running.push(backupd);
    await waitFor('the first restore point', async () => (await listed()).length > 0, {
      describe: () => backupd.describe(),
    });
    for (let commit = 0; commit < 3; commit += 1)
      await commitShipped(db, commit, () => backupd.describe());
    db.close();
    await backupd.stop('SIGKILL');

    const points = await listed();
    const latest = points.find((point) => point.latest)!;
    expect(latest.rolledForward?.commits).toBe(3);
    const oldest = points.reduce((a, b) => (b.restorableFrom < a.restorableFrom ? b : a));
    expect(latest.window?.earliest).toMatchObject({
      commitSeq: oldest.restorableFrom,
      time: oldest.snapshotTime,
    });
    expect(latest.window?.latest).toMatchObject({
      commitSeq: latest.commitSeq + 3,
      time: null,
      rolledForwardCommits: 3,
    });
    // The table: from the oldest state to the restore point's commit (its
    // commit time), then the rolled-forward commits, time unknown to ls.
    const rows = latest.window!.rows;
    expect(rows[0]!.from).toEqual({ commitSeq: oldest.restorableFrom, time: oldest.snapshotTime });
    // The restore point alone: its snapshot, or its snapshot and fine segments.
    const own = latest.commitSeq === latest.restorableFrom;
    expect(rows.at(-2)).toMatchObject({
      part: own ? 'snapshot' : 'fine segments',
      to: { commitSeq: latest.commitSeq, time: latest.commitTime },
      granularity: own ? 'its one state' : 'every commit',
    });
    expect(rows.at(-1)).toEqual({
      part: 'rolled forward',
      from: { commitSeq: latest.commitSeq + 1, time: null, timeUnknown: 'rolled-forward' },
      to: { commitSeq: latest.commitSeq + 3, time: null, timeUnknown: 'rolled-forward' },
      granularity: 'every commit, by --time',
    });
    expect(latest.window!.notes).toEqual([]);
    const text = await lsText(points.length);
    expect(text).toContain(`${latest.window!.text}\n`);
    const cells = tableRows(text, rows.length);
    expect(cells).toEqual(cellsOf(rows));
    expect(cells[0]![1]).toBe(`commit ${oldest.restorableFrom} (${oldest.snapshotTime})`);
    expect(cells.at(-2)![2]).toBe(`commit ${latest.commitSeq} (${latest.commitTime})`);
    expect(cells.at(-1)).toEqual([
      'rolled forward',
      `commit ${latest.commitSeq + 1} (time unknown, in rolled segments)`,
      `commit ${latest.commitSeq + 3} (time unknown, in rolled segments)`,
      'every commit, by --time',
    ]);
    expect(notesOf(latest.window!.text, rows.length)).toEqual([]);

    // The latest edge is what a restore of the latest state really holds.
    const restored = await runCli(['restore', backups, join(directory, 'latest.db'), '--json'], {
      env,
    });
    expect(restored.code, restored.stderr).toBe(0);
    expect((JSON.parse(restored.stdout) as { commitSeq: number }).commitSeq).toBe(
      latest.commitSeq + 3,
    );
  });

  it("after a graceful stop: the latest edge is the newest restore point's commit and commit time", async () => {
    const backupd = startBackupd(['replicate', database, backups], { env });
    running.push(backupd);
    // A commit made before the restart's snapshot is folded into it: commit after it.
    await waitFor(
      "the restart's first restore point",
      () => backupd.logEvents().some((event) => event.event === 'backup.restore_point_written'),
      { timeoutMs: 30_000, describe: () => backupd.describe() },
    );
    const db = new DatabaseSync(database);
    await commitShipped(db, 100, () => backupd.describe());
    db.close();
    expect(await backupd.stop('SIGTERM')).toEqual({ code: 0, signal: null });

    const points = await listed();
    const newest = points.reduce((a, b) => (b.commitSeq > a.commitSeq ? b : a));
    expect(newest.latest).toBe(true);
    expect(newest.rolledForward).toBeUndefined();
    const oldest = points.reduce((a, b) => (b.restorableFrom < a.restorableFrom ? b : a));
    expect(newest.commitTime).not.toBeNull();
    const rows = newest.window!.rows;
    expect(rows[0]!.from).toEqual({ commitSeq: oldest.restorableFrom, time: oldest.snapshotTime });
    expect(rows.at(-1)!.to).toEqual({ commitSeq: newest.commitSeq, time: newest.commitTime });
    expect(rows.map((row) => row.part)).not.toContain('rolled forward');
    const text = await lsText(points.length);
    expect(text).toContain(`${newest.window!.text}\n`);
    const cells = tableRows(text, rows.length);
    expect(cells).toEqual(cellsOf(rows));
    expect(cells[0]![1]).toBe(`commit ${oldest.restorableFrom} (${oldest.snapshotTime})`);
    expect(cells.at(-1)![2]).toBe(`commit ${newest.commitSeq} (${newest.commitTime})`);
    // Every commit between the ends is in a restore point: no notes.
    expect(newest.window!.notes).toEqual([]);
    expect(notesOf(newest.window!.text, rows.length)).toEqual([]);
  });
});

/** A sound restore point, as listRestorePoints reports one. */
function point(over: Partial<RestorePointInfo> & { commitSeq: number }): RestorePointInfo {
  return {
    manifestKey: `p/manifest/${String(over.commitSeq).padStart(20, '0')}.json`,
    latest: false,
    status: 'ok',
    checked: 'manifest',
    problems: [],
    restorableFrom: 0,
    lineage: 'L1',
    walGeneration: 0,
    formatVersion: 2,
    snapshotTime: '2026-12-01T00:00:00.000Z',
    commitTime: `2026-12-01T00:00:${String(over.commitSeq % 60).padStart(2, '0')}.000Z`,
    ...over,
  };
}

/** A version 1 restore point (an older release's: no times recorded). */
function versionOnePoint(commitSeq: number, restorableFrom: number): RestorePointInfo {
  return point({
    commitSeq,
    restorableFrom,
    formatVersion: 1,
    snapshotTime: null,
    commitTime: null,
  });
}

/** The window's text with its rows and notes, checked against each other. */
function shown(window: RestorableWindow): { cells: string[][]; notes: string[] } {
  const text = windowText(window);
  for (const line of text.split('\n')) expect(line.length, line).toBeLessThanOrEqual(160);
  const cells = tableRows(text, window.rows.length);
  expect(cells).toEqual(cellsOf(window.rows));
  const notes = notesOf(text, window.rows.length);
  expect(notes).toEqual(windowNotes(window));
  expect(windowJson(window)).toMatchObject({ rows: window.rows, notes, text });
  return { cells, notes };
}

describe('restorableWindow and windowText', () => {
  const first = point({ commitSeq: 10 });
  const second = point({ commitSeq: 20, latest: true });

  it('from the oldest state start to the newest restore point without a roll-forward: one row', () => {
    const window = restorableWindow([first, second], second, 0)!;
    expect(window.rows).toEqual([
      {
        part: 'fine segments',
        from: { commitSeq: 0, time: '2026-12-01T00:00:00.000Z' },
        to: { commitSeq: 20, time: '2026-12-01T00:00:20.000Z' },
        granularity: 'every commit',
      },
    ]);
    const { cells, notes } = shown(window);
    expect(cells).toEqual([
      [
        'fine segments',
        'commit 0 (2026-12-01T00:00:00.000Z)',
        'commit 20 (2026-12-01T00:00:20.000Z)',
        'every commit',
      ],
    ]);
    expect(notes).toEqual([]);
    expect(windowText(window)).toBe(
      [
        HEADING,
        'PART           FROM                                 TO                                    GRANULARITY',
        'fine segments  commit 0 (2026-12-01T00:00:00.000Z)  commit 20 (2026-12-01T00:00:20.000Z)  every commit',
      ].join('\n'),
    );
  });

  it('a restore point that is its snapshot alone: one "snapshot" row', () => {
    const alone = point({ commitSeq: 6, restorableFrom: 6, latest: true });
    const { cells } = shown(restorableWindow([alone], alone, 0)!);
    expect(cells).toEqual([
      [
        'snapshot',
        'commit 6 (2026-12-01T00:00:00.000Z)',
        'commit 6 (2026-12-01T00:00:06.000Z)',
        'its one state',
      ],
    ]);
  });

  it('to the roll-forward end, its time unknown, after the restore point and its commit time', () => {
    const window = restorableWindow([first, second], second, 5)!;
    expect(window.latest).toMatchObject({ commitSeq: 25, time: null, restorePointCommitSeq: 20 });
    expect(window.rows.at(-1)).toEqual({
      part: 'rolled forward',
      from: { commitSeq: 21, time: null, timeUnknown: 'rolled-forward' },
      to: { commitSeq: 25, time: null, timeUnknown: 'rolled-forward' },
      granularity: 'every commit, by --time',
    });
    const { cells, notes } = shown(window);
    expect(cells).toEqual([
      [
        'fine segments',
        'commit 0 (2026-12-01T00:00:00.000Z)',
        'commit 20 (2026-12-01T00:00:20.000Z)',
        'every commit',
      ],
      [
        'rolled forward',
        'commit 21 (time unknown, in rolled segments)',
        'commit 25 (time unknown, in rolled segments)',
        'every commit, by --time',
      ],
    ]);
    expect(notes).toEqual([]);
  });

  it('a roll-forward that could not be checked is a note, not a row', () => {
    const window = restorableWindow([second], second, null)!;
    expect(window.latest.rolledForwardCommits).toBeNull();
    const { cells, notes } = shown(window);
    expect(cells.map((row) => row[0])).toEqual(['fine segments']);
    expect(cells[0]![2]).toBe('commit 20 (2026-12-01T00:00:20.000Z)');
    expect(notes).toEqual([
      'the roll-forward past commit 20 was not checked: a restore of the latest state may reach further',
    ]);
  });

  it('version 1 manifests: "time unknown, older release", never a made-up time', () => {
    const old = versionOnePoint(8, 3);
    const window = restorableWindow([old], old, 0)!;
    expect(window.rows[0]).toEqual({
      part: 'fine segments',
      from: { commitSeq: 3, time: null, timeUnknown: 'older-release' },
      to: { commitSeq: 8, time: null, timeUnknown: 'older-release' },
      granularity: 'every commit',
    });
    expect(shown(window).cells[0]).toEqual([
      'fine segments',
      'commit 3 (time unknown, older release)',
      'commit 8 (time unknown, older release)',
      'every commit',
    ]);
  });

  it('a framed store (version 2, no times): "time unknown, not recorded"; rolled forward only at its end', () => {
    const framed = point({ commitSeq: 7, restorableFrom: 2, snapshotTime: null, commitTime: null });
    const window = restorableWindow([framed], framed, 2)!;
    expect(window.engine).toBe('framed');
    expect(shown(window).cells).toEqual([
      [
        'fine segments',
        'commit 2 (time unknown, not recorded)',
        'commit 7 (time unknown, not recorded)',
        'every commit',
      ],
      [
        'rolled forward',
        'commit 8 (time unknown, in rolled segments)',
        'commit 9 (time unknown, in rolled segments)',
        'only its end',
      ],
    ]);
  });

  it('corrupt points are left out; older restore points are their own row; gaps and lineages are notes', () => {
    const corrupt: RestorePointInfo = {
      ...point({ commitSeq: 5 }),
      status: 'problems',
      problems: ['x'],
    };
    const later = point({
      commitSeq: 40,
      restorableFrom: 30,
      lineage: 'L2',
      latest: true,
      snapshotTime: '2026-12-01T00:01:00.000Z',
    });
    const window = restorableWindow([corrupt, first, later], later, 0)!;
    expect(window.earliest.commitSeq).toBe(0);
    expect(window.earliest.manifestKey).toBe(first.manifestKey);
    expect(window.gaps).toEqual([{ from: 11, to: 29 }]);
    expect(window.lineages).toEqual(['L1', 'L2']);
    const { cells, notes } = shown(window);
    expect(cells).toEqual([
      [
        'older restore points',
        'commit 0 (2026-12-01T00:00:00.000Z)',
        'commit 10 (2026-12-01T00:00:10.000Z)',
        'every commit',
      ],
      [
        'fine segments',
        'commit 30 (2026-12-01T00:01:00.000Z)',
        'commit 40 (2026-12-01T00:00:40.000Z)',
        'every commit',
      ],
    ]);
    expect(notes).toEqual([
      'commits 11..29 are in no restore point (restore --commit refuses them; see ls --help)',
      'the window spans 2 lineages (restore --commit and --time reach each)',
    ]);
  });

  it("older restore points reaching past the latest one's snapshot end just below it; compacted ones say so", () => {
    const older = point({
      commitSeq: 35,
      restorableFrom: 0,
      granularity: [
        { level: 1, after: 0, to: 30, objects: 3 },
        { level: 0, after: 30, to: 35, objects: 5 },
      ],
    });
    const newest = point({ commitSeq: 50, restorableFrom: 32, latest: true });
    const { cells } = shown(restorableWindow([older, newest], newest, 0)!);
    expect(cells[0]).toEqual([
      'older restore points',
      'commit 0 (2026-12-01T00:00:00.000Z)',
      'commit 31 (time unknown, in the log)',
      'every commit; compacted: object ends',
    ]);
    expect(cells[1]![1]).toBe('commit 32 (2026-12-01T00:00:00.000Z)');
    const framedOlder = { ...older, snapshotTime: null, commitTime: null };
    const framedNewest = { ...newest, snapshotTime: null, commitTime: null };
    expect(shown(restorableWindow([framedOlder, framedNewest], framedNewest, 0)!).cells[0]).toEqual(
      [
        'older restore points',
        'commit 0 (time unknown, not recorded)',
        'commit 31 (time unknown, not recorded)',
        'every commit',
      ],
    );
    // Version 1 beside undated: the engine is unknown.
    const oldOlder: RestorePointInfo = { ...framedOlder, formatVersion: 1 };
    const unknown = restorableWindow([oldOlder, framedNewest], framedNewest, 0)!;
    expect(unknown.engine).toBe('unknown');
    expect(shown(unknown).cells[0]).toEqual([
      'older restore points',
      'commit 0 (time unknown, older release)',
      'commit 31 (time unknown, older release)',
      'every commit; SQLite compacted: object ends',
    ]);
  });

  it('a gap of one commit, and past three gaps one line counts the rest', () => {
    const points = [0, 1, 2, 3, 4].map((index) =>
      point({ commitSeq: index * 10 + 5, restorableFrom: index * 10, lineage: 'L1' }),
    );
    const single = restorableWindow(
      [point({ commitSeq: 5 }), point({ commitSeq: 9, restorableFrom: 7, latest: true })],
      point({ commitSeq: 9, restorableFrom: 7, latest: true }),
      0,
    )!;
    expect(single.gaps).toEqual([{ from: 6, to: 6 }]);
    expect(shown(single).notes).toEqual([
      'commit 6 is in no restore point (restore --commit refuses them; see ls --help)',
    ]);
    const many = restorableWindow(points, points[4], 0)!;
    expect(many.gaps).toHaveLength(4);
    expect(shown(many).notes).toEqual([
      'commits 6..9 are in no restore point (restore --commit refuses them; see ls --help)',
      'commits 16..19 are in no restore point (restore --commit refuses them; see ls --help)',
      'commits 26..29 are in no restore point (restore --commit refuses them; see ls --help)',
      '1 more commit ranges are in no restore point (ls --json lists them under window.gaps)',
    ]);
  });

  it("one row per run of the latest restore point's compacted log, SQLite: only at object ends", () => {
    const compacted = point({
      commitSeq: 40,
      restorableFrom: 4,
      latest: true,
      granularity: [
        { level: 2, after: 4, to: 20, objects: 2 },
        { level: 1, after: 20, to: 30, objects: 1 },
        { level: 0, after: 30, to: 40, objects: 5 },
      ],
    });
    const window = restorableWindow([compacted], compacted, 3)!;
    expect(window.engine).toBe('sqlite');
    expect(window.granularity).toEqual(compacted.granularity);
    expect(window.rows.map((row) => [row.part, row.from.commitSeq, row.to.commitSeq])).toEqual([
      ['level 2', 4, 20],
      ['level 1', 21, 30],
      ['fine segments', 31, 40],
      ['rolled forward', 41, 43],
    ]);
    expect(shown(window).cells).toEqual([
      [
        'level 2',
        'commit 4 (2026-12-01T00:00:00.000Z)',
        'commit 20 (time unknown, in the log)',
        'only at the ends of 2 objects',
      ],
      [
        'level 1',
        'commit 21 (time unknown, in the log)',
        'commit 30 (time unknown, in the log)',
        "only at the object's end",
      ],
      [
        'fine segments',
        'commit 31 (time unknown, in the log)',
        'commit 40 (2026-12-01T00:00:40.000Z)',
        'every commit',
      ],
      [
        'rolled forward',
        'commit 41 (time unknown, in rolled segments)',
        'commit 43 (time unknown, in rolled segments)',
        'every commit, by --time',
      ],
    ]);
    expect(restorableWindow([first, second], second, 0)!.granularity).toBeUndefined();
  });

  it('says which compacted commits restore exactly while their fine segments are kept', () => {
    const compacted = point({
      commitSeq: 40,
      restorableFrom: 4,
      latest: true,
      granularity: [
        { level: 2, after: 4, to: 20, objects: 2 },
        { level: 1, after: 20, to: 35, objects: 3, exactAfter: 25 },
        { level: 0, after: 35, to: 40, objects: 5 },
      ],
    });
    const exactAll = point({
      commitSeq: 40,
      restorableFrom: 4,
      latest: true,
      granularity: [
        { level: 1, after: 4, to: 35, objects: 3, exactAfter: 4 },
        { level: 0, after: 35, to: 40, objects: 5 },
      ],
    });
    expect(shown(restorableWindow([compacted], compacted, 0)!).cells.map((c) => c[3])).toEqual([
      'only at the ends of 2 objects',
      'only at the ends of 3 objects; exact after commit 25',
      'every commit',
    ]);
    expect(shown(restorableWindow([exactAll], exactAll, 0)!).cells.map((c) => c[3])).toEqual([
      'every commit (3 objects, fine segments kept)',
      'every commit',
    ]);
  });

  it("a framed store's compacted runs are every commit: its compacted objects keep every frame", () => {
    const framed = point({
      commitSeq: 40,
      restorableFrom: 4,
      latest: true,
      snapshotTime: null,
      commitTime: null,
      granularity: [
        { level: 2, after: 4, to: 20, objects: 2 },
        { level: 1, after: 20, to: 30, objects: 1 },
        { level: 0, after: 30, to: 40, objects: 5 },
      ],
    });
    expect(shown(restorableWindow([framed], framed, 0)!).cells).toEqual([
      [
        'level 2',
        'commit 4 (time unknown, not recorded)',
        'commit 20 (time unknown, not recorded)',
        'every commit (2 objects)',
      ],
      [
        'level 1',
        'commit 21 (time unknown, not recorded)',
        'commit 30 (time unknown, not recorded)',
        'every commit (1 object)',
      ],
      [
        'fine segments',
        'commit 31 (time unknown, not recorded)',
        'commit 40 (time unknown, not recorded)',
        'every commit',
      ],
    ]);
  });

  it('an engine the listing cannot tell (version 1 points beside undated ones): both granularities', () => {
    const old = versionOnePoint(4, 0);
    const newer = point({
      commitSeq: 40,
      restorableFrom: 4,
      latest: true,
      snapshotTime: null,
      commitTime: null,
      granularity: [
        { level: 1, after: 4, to: 30, objects: 2 },
        { level: 0, after: 30, to: 40, objects: 5 },
      ],
    });
    const window = restorableWindow([old, newer], newer, 1)!;
    expect(window.engine).toBe('unknown');
    expect(shown(window).cells).toEqual([
      [
        'older restore points',
        'commit 0 (time unknown, older release)',
        'commit 3 (time unknown, older release)',
        'every commit',
      ],
      [
        'level 1',
        'commit 4 (time unknown, not recorded)',
        'commit 30 (time unknown, not recorded)',
        "framed: every commit; SQLite: 2 objects' ends",
      ],
      [
        'fine segments',
        'commit 31 (time unknown, not recorded)',
        'commit 40 (time unknown, not recorded)',
        'every commit',
      ],
      [
        'rolled forward',
        'commit 41 (time unknown, in rolled segments)',
        'commit 41 (time unknown, in rolled segments)',
        'framed: its end; SQLite: by --time',
      ],
    ]);
  });

  it('a sound point above what LATEST reaches is a note; nothing sound gives one line', () => {
    const window = restorableWindow([first, second], first, 0)!;
    expect(window.latest.commitSeq).toBe(10);
    expect(window.unnamedAbove).toBe(20);
    expect(window.rows.at(-1)!.to.commitSeq).toBe(10);
    expect(shown(window).notes).toEqual([
      'a restore point LATEST does not name reaches commit 20 (restore --commit 20)',
    ]);
    const bad: RestorePointInfo = { ...first, status: 'problems', problems: ['x'] };
    expect(restorableWindow([bad], undefined, 0)).toBeNull();
    expect(windowText(null)).toBe(
      'RESTORABLE WINDOW: nothing restorable (no restore point listed is sound)',
    );
    expect(windowJson(null)).toBeNull();
  });
});
