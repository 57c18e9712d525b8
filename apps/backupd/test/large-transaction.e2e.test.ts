/**
 * Large transactions, end to end through the `backupd` command on a
 * `file://` bucket: the application commits one transaction larger than a
 * capture's byte budget and then stays idle. A restore point holding it is
 * written while backupd runs, SIGTERM exits 0, and `backupd restore` gives
 * exactly the application's content: for the 6,000 rows of 3,500 bytes
 * (about 24 MiB of WAL) of issue 35, which backupd used to re-read forever
 * and never ship, and for one transaction of 200 MiB. A segment holding one
 * such transaction is larger than a segment's usual bound; a restore rolls
 * forward over it when no restore point names it yet (a stop before one was
 * written).
 */
import { mkdirSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import {
  baseEnv,
  type RunningProcess,
  runCli,
  startBackupd,
  suiteWorkspace,
  waitFor,
} from './helpers/cli.ts';
import { databaseHash } from './helpers/content-hash.ts';

describe('backupd replicate with one large transaction, then silence', () => {
  const { directory, running } = suiteWorkspace('large-transaction');
  const env = baseEnv({ BACKUPD_RESTORE_POINT_INTERVAL: '1s' });

  function createDatabase(name: string): { path: string; application: DatabaseSync } {
    const path = join(directory, name, 'app.db');
    rmSync(join(directory, name), { recursive: true, force: true });
    mkdirSync(join(directory, name));
    const application = new DatabaseSync(path, { timeout: 5000 });
    application.exec('PRAGMA journal_mode=WAL');
    application.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, body BLOB NOT NULL)');
    application.exec("INSERT INTO t (body) VALUES ('first')");
    return { path, application };
  }

  async function replicate(path: string, bucket: string): Promise<RunningProcess> {
    const backupd = startBackupd(
      ['replicate', path, pathToFileURL(bucket).href, '--log-format', 'json'],
      { env },
    );
    running.push(backupd);
    await waitFor('the first restore point', () => restorePointAt(backupd, 0), {
      describe: () => backupd.describe(),
      timeoutMs: 30_000,
    });
    return backupd;
  }

  /** True once `backupd` logged a restore point at commit `commit` or later. */
  function restorePointAt(backupd: RunningProcess, commit: number): true | undefined {
    return (
      backupd
        .logEvents()
        .some(
          (event) =>
            event.event === 'backup.restore_point_written' &&
            typeof event.commitSeq === 'number' &&
            event.commitSeq >= commit,
        ) || undefined
    );
  }

  async function restoredHash(bucket: string, name: string): Promise<string> {
    const target = join(directory, `${name}-restored`, 'app.db');
    const restored = await runCli(['restore', pathToFileURL(bucket).href, target, '--json'], {
      env,
      timeoutMs: 120_000,
    });
    expect(restored.code, restored.stderr).toBe(0);
    return databaseHash(target);
  }

  /** One transaction, restorable while backupd runs, an idle spell, SIGTERM: exit 0 and an exact restore. */
  async function oneTransaction(name: string, write: (application: DatabaseSync) => void) {
    const { path, application } = createDatabase(name);
    const bucket = join(directory, `${name}-backups`);
    try {
      const backupd = await replicate(path, bucket);
      application.exec('BEGIN');
      write(application);
      application.exec('COMMIT');
      const expected = databaseHash(path);
      await waitFor('a restore point holding the transaction', () => restorePointAt(backupd, 1), {
        describe: () => backupd.describe(),
        timeoutMs: 60_000,
      });
      await new Promise((resolve) => setTimeout(resolve, 2000));
      expect(await backupd.stop('SIGTERM', 60_000), backupd.describe()).toEqual({
        code: 0,
        signal: null,
      });
      expect(await restoredHash(bucket, name)).toBe(expected);
      return { bucket, expected };
    } finally {
      application.close();
    }
  }

  it("issue 35's case: 6,000 rows of 3,500 bytes in one transaction are backed up", async () => {
    await oneTransaction('rows', (application) => {
      const insert = application.prepare('INSERT INTO t (body) VALUES (randomblob(3500))');
      for (let i = 0; i < 6000; i += 1) insert.run();
    });
  }, 180_000);

  it('one transaction of 200 MiB is backed up', async () => {
    // Zero-filled blobs: the WAL and the restore are 200 MiB, the bucket small.
    await oneTransaction('huge', (application) => {
      const insert = application.prepare('INSERT INTO t (body) VALUES (zeroblob(1048576))');
      for (let i = 0; i < 200; i += 1) insert.run();
    });
  }, 240_000);

  it('a segment of one 40 MiB transaction is rolled forward when no restore point names it', async () => {
    const { bucket, expected } = await oneTransaction('rolled', (application) => {
      const insert = application.prepare('INSERT INTO t (body) VALUES (randomblob(1048576))');
      for (let i = 0; i < 40; i += 1) insert.run();
    });
    // As if backupd had stopped right after shipping it: only the first restore point is left.
    const manifests = join(bucket, 'backup', 'manifest');
    const names = readdirSync(manifests).sort();
    expect(names.length).toBeGreaterThanOrEqual(2);
    for (const name of names.slice(1)) rmSync(join(manifests, name));
    expect(await restoredHash(bucket, 'rolled-forward')).toBe(expected);
  }, 180_000);
});
