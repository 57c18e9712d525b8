/**
 * The recovery point after a crash is `restorePointInterval`, not the 10 s
 * default of the worker (a soak finding: the daemon did not pass the setting
 * on, so a holder killed mid-run left up to 10 s of shipped WAL that no
 * restore point named). backupd is SIGKILLed (no graceful flush, no final
 * restore point); a restore must still hold commits made well over one
 * interval before the kill.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { baseEnv, runCli, startBackupd, waitFor } from './helpers/cli.ts';

const directory = mkdtempSync(join(tmpdir(), 'backupd-recovery-'));
afterAll(() => rmSync(directory, { recursive: true, force: true }));

describe('the recovery point after a crash', () => {
  it('is restorePointInterval: commits shipped before a SIGKILL are restorable', async () => {
    const database = join(directory, 'app.db');
    const backups = pathToFileURL(join(directory, 'app.db-backups')).href;
    const db = new DatabaseSync(database);
    db.exec('PRAGMA journal_mode=WAL; CREATE TABLE t (x INTEGER);');
    const env = baseEnv({
      BACKUPD_INTERVAL: '200ms',
      BACKUPD_RESTORE_POINT_INTERVAL: '300ms',
      BACKUPD_LEASE_TTL: '3s',
    });
    const backupd = startBackupd(['replicate', database, backups], { env });
    const newestCommit = async (): Promise<number | undefined> => {
      const listed = await runCli(['ls', backups, '--json'], { env });
      const points = JSON.parse(listed.stdout) as { commitSeq: number }[];
      return points.length === 0 ? undefined : Math.max(...points.map((p) => p.commitSeq));
    };
    // The first restore point fixes the generation's snapshot: from then on
    // every commit is one more in the log. (Commits made before it are in the
    // snapshot and not counted, so counting from the lease would race.)
    const base = await waitFor(
      'the first restore point',
      async () => {
        const newest = await newestCommit();
        return newest === undefined ? undefined : { newest };
      },
      { describe: () => backupd.describe() },
    );
    for (let i = 0; i < 30; i += 1) db.exec(`INSERT INTO t VALUES (${i})`);
    db.close();
    // Well past one restore-point interval, well short of the worker's 10 s default.
    await waitFor(
      'a restore point holding every commit',
      async () => ((await newestCommit()) ?? -1) >= base.newest + 30,
      { timeoutMs: 5000, describe: () => backupd.describe() },
    );
    await backupd.stop('SIGKILL');
    const restored = join(directory, 'restored.db');
    const restore = await runCli(['restore', backups, restored], { env });
    expect(restore.code, restore.stderr).toBe(0);
    const check = new DatabaseSync(restored, { readOnly: true });
    const rows = (check.prepare('SELECT count(*) AS n FROM t').get() as { n: number }).n;
    check.close();
    expect(rows).toBe(30);
  });
});
