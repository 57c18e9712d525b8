/**
 * A restore of the latest state rolls forward, through the commands and
 * real processes: `replicate` ships each commit within its interval but
 * writes a restore point only every hour; it is SIGKILLed (no final restore
 * point) after three commits shipped past its first restore point, and
 * `restore` of the latest state holds all three. Only the roll-forward over
 * the chained `.seg` segments can explain it: no restore point names them.
 */
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { baseEnv, runCli, startBackupd, waitFor } from './helpers/cli.ts';

const directory = mkdtempSync(join(tmpdir(), 'backupd-roll-forward-'));
afterAll(() => rmSync(directory, { recursive: true, force: true }));

/** The `.seg` objects in the bucket directory. */
function segments(root: string): number {
  let count = 0;
  try {
    for (const name of readdirSync(root, { recursive: true }) as string[]) {
      // The file store keeps each object in a file named `{key}~obj`.
      if (/\.seg(~obj)?$/.test(name)) count += 1;
    }
  } catch {
    // Not created yet.
  }
  return count;
}

describe('restore of the latest state after a SIGKILL', () => {
  it('holds the commits shipped after the last restore point', async () => {
    const database = join(directory, 'app.db');
    const bucket = join(directory, 'app.db-backups');
    const backups = pathToFileURL(bucket).href;
    const db = new DatabaseSync(database);
    db.exec('PRAGMA journal_mode=WAL; CREATE TABLE t (x INTEGER);');
    const env = baseEnv({
      BACKUPD_INTERVAL: '200ms',
      BACKUPD_RESTORE_POINT_INTERVAL: '1h',
      BACKUPD_LEASE_TTL: '3s',
    });
    const backupd = startBackupd(['replicate', database, backups], { env });
    const restorePoints = async (): Promise<{ commitSeq: number }[]> => {
      const listed = await runCli(['ls', backups, '--json'], { env });
      return (JSON.parse(listed.stdout) as { commitSeq: number }[]).map((point) => ({
        commitSeq: point.commitSeq,
      }));
    };
    await waitFor(
      'the first restore point',
      async () => ((await restorePoints()).length > 0 ? true : undefined),
      { describe: () => backupd.describe() },
    );
    const before = await restorePoints();
    // One transaction at a time, each shipped (a new segment) before the next.
    for (let commit = 0; commit < 3; commit += 1) {
      const shipped = segments(bucket);
      db.exec('BEGIN');
      for (let row = 0; row < 10; row += 1) db.exec(`INSERT INTO t VALUES (${commit * 10 + row})`);
      db.exec('COMMIT');
      await waitFor('the commit shipped', async () => segments(bucket) > shipped || undefined, {
        timeoutMs: 10_000,
        describe: () => backupd.describe(),
      });
    }
    db.close();
    await backupd.stop('SIGKILL');
    // No restore point names them: the same restore points as before the commits.
    expect(await restorePoints()).toEqual(before);

    // ls says what a restore of the latest state holds beyond LATEST's restore point.
    const ls = await runCli(['ls', backups], { env });
    expect(ls.stdout).toMatch(
      /ROLL-FORWARD: a restore of the latest state also holds 3 commit\(s\)/,
    );
    const restored = join(directory, 'restored.db');
    const restore = await runCli(['restore', backups, restored], { env });
    expect(restore.code, restore.stderr).toBe(0);
    const check = new DatabaseSync(restored, { readOnly: true });
    const rows = (check.prepare('SELECT count(*) AS n FROM t').get() as { n: number }).n;
    check.close();
    expect(rows).toBe(30);
    // Both forms say how many commits beyond the restore point it holds.
    expect(restore.stdout).toMatch(
      /\(3 commit\(s\) beyond the restore point at commit \d+, rolled forward over \d+ chained segment\(s\)\)/,
    );
    const json = await runCli(['restore', backups, join(directory, 'again.db'), '--json'], { env });
    expect(json.code, json.stderr).toBe(0);
    const result = JSON.parse(json.stdout) as {
      commitSeq: number;
      rolledForward: { fromCommitSeq: number; commits: number };
      newerUnrestorable: unknown;
    };
    expect(result.rolledForward.commits).toBe(3);
    expect(result.commitSeq).toBe(result.rolledForward.fromCommitSeq + 3);
    // Nothing is left behind: the roll-forward took every shipped segment.
    expect(result.newerUnrestorable).toBeNull();
  });
});
