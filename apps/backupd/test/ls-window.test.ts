/**
 * `backupd ls` reports the restorable window: from the oldest restore
 * point's state start (its snapshot commit and time) to where a restore of
 * the latest state ends (the roll-forward end when there is one, else the
 * newest restore point), and what can be chosen in between. Real processes
 * for the edges a bucket really has; the formatting alone on hand-made
 * restore points for the cases a live bucket does not produce on demand.
 */
import { mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { pathToFileURL } from 'node:url';
import type { RestorePointInfo } from '@x/restore';
import { describe, expect, it } from 'vitest';
import { restorableWindow, windowLine } from '../src/commands/restorable-window.ts';
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
    text: string;
  };
}

const ROLLED_TIME =
  'time unknown to ls: it is in the rolled-forward segments, which ls does not read';

/** The number of `.seg` objects under `root` (the file store names each `{key}~obj`). */
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
  const windowOf = async (): Promise<string> => {
    const result = await runCli(['ls', backups], { env });
    expect(result.code, result.stderr).toBe(0);
    const lines = result.stdout.trimEnd().split('\n');
    const found = lines.filter((line) => line.startsWith('WINDOW: '));
    expect(found, result.stdout).toHaveLength(1);
    return found[0]!;
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

  it('an empty prefix: "no restore points", no WINDOW line, and still an array in JSON', async () => {
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
    const line = await windowOf();
    expect(line).toBe(latest.window?.text);
    expect(
      line.startsWith(
        `WINDOW: restorable from commit ${oldest.restorableFrom} (${oldest.snapshotTime}) to commit ${latest.commitSeq + 3} (${ROLLED_TIME}); commit ${latest.commitSeq}, the restore point's, is at ${latest.commitTime}; `,
      ),
    ).toBe(true);
    expect(line).toContain(
      'exact to the commit where the fine log objects are kept (the newest window, not yet compacted), except commits the replica batched',
    );

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
    const line = await windowOf();
    expect(
      line.startsWith(
        `WINDOW: restorable from commit ${oldest.restorableFrom} (${oldest.snapshotTime}) to commit ${newest.commitSeq} (${newest.commitTime}); `,
      ),
      line,
    ).toBe(true);
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

describe('restorableWindow and windowLine', () => {
  const first = point({ commitSeq: 10 });
  const second = point({ commitSeq: 20, latest: true });

  it('from the oldest state start to the newest restore point without a roll-forward', () => {
    const line = windowLine(restorableWindow([first, second], second, 0));
    expect(line).toMatch(
      /^WINDOW: restorable from commit 0 \(2026-12-01T00:00:00.000Z\) to commit 20 \(2026-12-01T00:00:20.000Z\); exact to the commit where the fine log objects are kept \(the newest window, not yet compacted\), except commits the replica batched while behind the application \(restorable together, to the batch's end; /,
    );
  });

  it('to the roll-forward end, saying its time is unknown and giving the restore point time', () => {
    const window = restorableWindow([first, second], second, 5)!;
    expect(window.latest).toMatchObject({ commitSeq: 25, time: null, restorePointCommitSeq: 20 });
    expect(windowLine(window)).toContain(
      `to commit 25 (${ROLLED_TIME}); commit 20, the restore point's, is at 2026-12-01T00:00:20.000Z;`,
    );
  });

  it('a roll-forward that could not be checked is said so, not counted', () => {
    const line = windowLine(restorableWindow([second], second, null));
    expect(line).toContain(
      'to commit 20 (2026-12-01T00:00:20.000Z); the roll-forward past commit 20 could not be checked',
    );
  });

  it('version 1 manifests: "time unknown (written by an older release)", never a made-up time', () => {
    const old = versionOnePoint(8, 3);
    const line = windowLine(restorableWindow([old], old, 0));
    expect(line).toMatch(
      /^WINDOW: restorable from commit 3 \(time unknown \(written by an older release\)\) to commit 8 \(time unknown \(written by an older release\)\); exact to the commit, except, in a SQLite backup,/,
    );
  });

  it('a framed store (version 2, no times): exact to the commit, by commit only', () => {
    const framed = point({ commitSeq: 7, restorableFrom: 2, snapshotTime: null, commitTime: null });
    expect(windowLine(restorableWindow([framed], framed, 0))).toBe(
      'WINDOW: restorable from commit 2 (time unknown (this backup records no times)) to commit 7 (time unknown (this backup records no times)); exact to the commit throughout (one frame per commit, compacted objects included); no times recorded: by commit only',
    );
  });

  it('corrupt points are left out; the earliest is the lowest state start; gaps and lineages are named', () => {
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
    const line = windowLine(window);
    expect(line).toContain(
      'commits 11..29 are in no restore point: restore --commit refuses them, restore --time reaches them only if',
    );
    expect(line).toContain('spans 2 lineages');
  });

  it("names the granularity of the latest restore point's compacted log, run by run", () => {
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
    const window = restorableWindow([compacted], compacted, 0)!;
    expect(window.granularity).toEqual(compacted.granularity);
    expect(windowLine(window)).toContain(
      "the latest restore point's log after its snapshot: commits 5..20 only at the ends of its 2 objects (level 2), commits 21..30 only at its end (level 1), commits 31..40 exact (fine segments); exact to the commit where",
    );
    expect(windowLine(restorableWindow([first, second], second, 0))).not.toContain('log after');
  });

  it("a framed store's compacted runs are said exact: its compacted objects keep every frame", () => {
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
    expect(windowLine(restorableWindow([framed], framed, 0))).toContain(
      "the latest restore point's log after its snapshot: commits 5..20 exact (2 objects of level 2), commits 21..30 exact (one object of level 1), commits 31..40 exact (fine segments); exact to the commit throughout",
    );
  });

  it('an engine the listing cannot tell (version 1 points beside undated ones): both granularities of a compacted run', () => {
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
    const window = restorableWindow([old, newer], newer, 0)!;
    expect(window.engine).toBe('unknown');
    expect(windowLine(window)).toContain(
      "the latest restore point's log after its snapshot: commits 5..30 exact in a framed store, in a SQLite backup only at the ends of its 2 objects (level 1), commits 31..40 exact (fine segments); exact to the commit, except, in a SQLite backup,",
    );
  });

  it('a sound point above what LATEST reaches is named; nothing sound gives no window', () => {
    const window = restorableWindow([first, second], first, 0)!;
    expect(window.latest.commitSeq).toBe(10);
    expect(windowLine(window)).toContain('a restore point LATEST does not name reaches commit 20');
    const bad: RestorePointInfo = { ...first, status: 'problems', problems: ['x'] };
    expect(restorableWindow([bad], undefined, 0)).toBeNull();
    expect(windowLine(null)).toBe('WINDOW: nothing restorable (no restore point listed is sound)');
  });
});
