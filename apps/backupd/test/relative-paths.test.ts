/**
 * A plain relative path on the command line is the caller's working
 * directory's: `replicate ./app.db` backs up to `./app.db-backups`, and
 * `ls` and `restore` take that same relative path. A relative `file:` URL
 * stays refused (WHATWG parsing would put it under the filesystem root).
 */
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { describe, expect, it } from 'vitest';
import { baseEnv, runCli, startBackupd, suiteWorkspace, waitFor } from './helpers/cli.ts';

describe('relative paths on the command line', () => {
  const { directory, running } = suiteWorkspace('relative-paths');
  const env = baseEnv({ BACKUPD_INTERVAL: '200ms', BACKUPD_LEASE_TTL: '3s' });

  it('replicate ./app.db, then ls and restore ./app.db-backups from the same directory', async () => {
    const db = new DatabaseSync(join(directory, 'app.db'));
    db.exec(
      'PRAGMA journal_mode=WAL; CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1), (2), (3);',
    );
    db.close();
    const replica = startBackupd(['replicate', './app.db'], { env, cwd: directory });
    running.push(replica);
    const listed = async () => {
      const result = await runCli(['ls', './app.db-backups', '--json'], { env, cwd: directory });
      return result.code === 0 && (JSON.parse(result.stdout) as unknown[]).length > 0;
    };
    await waitFor('a restore point in ./app.db-backups', listed, {
      timeoutMs: 30_000,
      describe: () => replica.describe(),
    });
    expect((await replica.stop()).code, replica.describe()).toBe(0);

    const restored = await runCli(['restore', './app.db-backups', 'restored.db'], {
      env,
      cwd: directory,
    });
    expect(restored.code, restored.stderr).toBe(0);
    const copy = new DatabaseSync(join(directory, 'restored.db'), { readOnly: true });
    expect(copy.prepare('SELECT count(*) AS n FROM t').get()).toEqual({ n: 3 });
    copy.close();

    const verified = await runCli(['verify', 'app.db-backups'], { env, cwd: directory });
    expect(verified.code, verified.stderr).toBe(0);
  });

  it('refuses a relative file: URL, naming it, and reads nothing', async () => {
    const result = await runCli(['ls', 'file:app.db-backups'], { env, cwd: directory });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('"file:app.db-backups" is a relative file URL');
  });
});
