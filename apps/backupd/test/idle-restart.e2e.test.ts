/**
 * Restarts without a full re-upload, end to end through the `backupd`
 * command: a 2 MiB database is backed up by `backupd replicate` to a
 * `file://` directory and stopped with SIGTERM; a second `replicate` on the
 * unchanged database continues the same generation (it logs
 * `backup.generation_continued`) and adds at most 1 % of the database's size
 * to the bucket, none of it a snapshot; commits after the restart extend
 * that generation, and a restore of the latest state equals the database.
 * A database of which a few pages changed while backupd was stopped
 * continues too, shipping those pages as one commit; one rewritten whole
 * gets a new snapshot instead.
 */
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { baseEnv, runCli, startBackupd, suiteWorkspace, waitFor } from './helpers/cli.ts';
import { databaseHash } from './helpers/content-hash.ts';
import {
  addedBytes,
  bucketFiles,
  createRestartDatabase,
  snapshots,
} from './helpers/restart-bucket.ts';

describe('backupd replicate restarted on an unchanged database', () => {
  const { directory, running } = suiteWorkspace('idle-restart');
  const env = baseEnv({ BACKUPD_RESTORE_POINT_INTERVAL: '1s' });

  const createDatabase = (name: string) => createRestartDatabase(join(directory, name));

  /** One `replicate` life: until a restore point holds `commits`, then SIGTERM (exit 0). */
  async function life(database: string, bucket: string) {
    const url = pathToFileURL(bucket).href;
    const backupd = startBackupd(['replicate', database, url, '--log-format', 'json'], { env });
    running.push(backupd);
    await waitFor(
      'a restore point',
      () =>
        backupd.logEvents().some((event) => event.event === 'backup.restore_point_written') ||
        backupd.logEvents().some((event) => event.event === 'backup.generation_continued') ||
        undefined,
      { describe: () => backupd.describe(), timeoutMs: 30_000 },
    );
    return backupd;
  }

  it('continues the generation: no snapshot, at most 1 % of the database added, restores exactly', async () => {
    const database = createDatabase('idle.db');
    const bucket = join(directory, 'idle-backups');
    const first = await life(database, bucket);
    expect(await first.stop('SIGTERM', 60_000), first.describe()).toEqual({
      code: 0,
      signal: null,
    });
    const before = bucketFiles(bucket);
    expect(snapshots(before)).toHaveLength(1);
    const databaseBytes = statSync(database).size;

    const second = await life(database, bucket);
    await waitFor(
      'the generation continued',
      () => second.logEvents().some((e) => e.event === 'backup.generation_continued') || undefined,
      { describe: () => second.describe(), timeoutMs: 30_000 },
    );
    expect(await second.stop('SIGTERM', 60_000), second.describe()).toEqual({
      code: 0,
      signal: null,
    });
    const idle = bucketFiles(bucket);
    expect(snapshots(idle)).toEqual(snapshots(before));
    const added = addedBytes(before, idle);
    expect(added, `${added} bytes added by an idle restart`).toBeLessThanOrEqual(
      databaseBytes / 100,
    );

    // Commits after a restart extend the same generation; the latest restore is exact.
    const third = await life(database, bucket);
    const application = new DatabaseSync(database);
    for (let i = 1; i <= 20; i += 1)
      application
        .prepare('UPDATE t SET body = ? WHERE id = ?')
        .run(new Uint8Array(4096).fill(i), i);
    application.close();
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(await third.stop('SIGTERM', 60_000), third.describe()).toEqual({
      code: 0,
      signal: null,
    });
    expect(third.logEvents().some((e) => e.event === 'backup.generation_continued')).toBe(true);
    expect(snapshots(bucketFiles(bucket))).toEqual(snapshots(before));

    const target = join(directory, 'idle-restored', 'app.db');
    const restored = await runCli(['restore', pathToFileURL(bucket).href, target, '--json'], {
      env,
    });
    expect(restored.code, restored.stderr).toBe(0);
    expect(databaseHash(target)).toBe(databaseHash(database));
  }, 180_000);

  it('a restart stopped while it starts is graceful and complete: the continued count is the goal (exit 0)', async () => {
    const database = createDatabase('early-stop.db');
    const bucket = join(directory, 'early-stop-backups');
    const url = pathToFileURL(bucket).href;
    expect((await (await life(database, bucket)).stop('SIGTERM', 60_000)).code).toBe(0);
    // The stop lands between the start and the step that continues the
    // generation: three tries, as the two race.
    for (let attempt = 0; attempt < 3; attempt += 1) {
      const backupd = startBackupd(['replicate', database, url, '--log-format', 'json'], { env });
      running.push(backupd);
      // Logged as the start begins: the signal is held until replicate is
      // up, and stops it before the lease is taken and the first step runs.
      await waitFor(
        'the start to begin',
        () => backupd.logEvents().some((e) => e.event === 'backupd.database_locked') || undefined,
        { describe: () => backupd.describe(), timeoutMs: 30_000, intervalMs: 1 },
      );
      const exit = await backupd.stop('SIGTERM', 60_000);
      expect(exit, backupd.describe()).toEqual({ code: 0, signal: null });
      expect(backupd.logEvents().some((e) => e.event === 'backup.shutdown_incomplete')).toBe(false);
    }
    expect(snapshots(bucketFiles(bucket))).toHaveLength(1);
  }, 180_000);

  for (const [label, rows, continued] of [
    ['a few rows', 3, true],
    ['every row', 512, false],
  ] as const) {
    it(`${label} changed while backupd was stopped: ${continued ? 'the changed pages continue the generation' : 'a new snapshot'}, and the restore is exact`, async () => {
      const database = createDatabase(`changed-${rows}.db`);
      const bucket = join(directory, `changed-${rows}-backups`);
      const first = await life(database, bucket);
      expect((await first.stop('SIGTERM', 60_000)).code, first.describe()).toBe(0);
      const before = bucketFiles(bucket);
      const application = new DatabaseSync(database);
      const update = application.prepare('UPDATE t SET body = ? WHERE id = ?');
      for (let id = 1; id <= rows; id += 1) update.run(new Uint8Array(4096).fill(id % 250), id);
      application.close();

      const second = await life(database, bucket);
      if (!continued)
        await waitFor(
          'a second snapshot',
          () => snapshots(bucketFiles(bucket)).length === 2 || undefined,
          { describe: () => second.describe(), timeoutMs: 30_000 },
        );
      expect((await second.stop('SIGTERM', 60_000)).code, second.describe()).toBe(0);
      expect(second.logEvents().some((e) => e.event === 'backup.generation_continued')).toBe(
        continued,
      );
      const after = bucketFiles(bucket);
      if (continued) {
        expect(snapshots(after)).toEqual(snapshots(before));
        // Three 4 KiB pages of one repeated byte, compressed, and restore points.
        expect(addedBytes(before, after)).toBeLessThan(statSync(database).size / 100);
      }
      const target = join(directory, `changed-${rows}-restored`, 'app.db');
      const restored = await runCli(['restore', pathToFileURL(bucket).href, target, '--json'], {
        env,
      });
      expect(restored.code, restored.stderr).toBe(0);
      expect(databaseHash(target)).toBe(databaseHash(database));
    }, 180_000);
  }
});
