/**
 * Restarts after a crash without a full re-upload, end to end through the
 * `backupd` command: `backupd replicate` backs a 2.3 MiB database up to a
 * `file://` directory and is killed with SIGKILL (no record is left for the
 * next start). The next `replicate` reads the newest restore point back,
 * finds the database is its state (or differs from it in a few pages) and
 * continues the generation: it logs `backup.generation_continued` with the
 * bytes it read back, uploads no snapshot, adds at most 1 % of the
 * database's size, and a restore of the latest state equals the database.
 */
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { pathToFileURL } from 'node:url';
import { FsStore } from '@x/store';
import { describe, expect, it } from 'vitest';
import { baseEnv, runCli, startBackupd, suiteWorkspace, waitFor } from './helpers/cli.ts';
import { databaseHash } from './helpers/content-hash.ts';
import {
  addedBytes,
  bucketFiles,
  createRestartDatabase,
  originalBody,
  snapshots,
} from './helpers/restart-bucket.ts';

describe('backupd replicate restarted after SIGKILL', () => {
  const { directory, running } = suiteWorkspace('crash-restart');
  const env = baseEnv({ BACKUPD_RESTORE_POINT_INTERVAL: '1s' });

  const createDatabase = (name: string) => createRestartDatabase(join(directory, name));

  function update(database: string, ids: readonly number[], fill: number): void {
    const application = new DatabaseSync(database);
    const statement = application.prepare('UPDATE t SET body = ? WHERE id = ?');
    for (const id of ids) statement.run(new Uint8Array(4096).fill(fill), id);
    application.close();
  }

  /** The `.seg` keys of the commit log (under the bucket's `backup/` prefix). */
  async function segmentKeys(bucket: string): Promise<string[]> {
    const listed = await new FsStore({ root: bucket, fsync: false }).list('backup/wal/');
    return listed.objects.map((o) => o.key).filter((key) => key.endsWith('.seg'));
  }

  function start(database: string, bucket: string, extraEnv: Record<string, string> = {}) {
    const backupd = startBackupd(
      ['replicate', database, pathToFileURL(bucket).href, '--log-format', 'json'],
      { env: { ...env, ...extraEnv } },
    );
    running.push(backupd);
    return backupd;
  }

  /** Waits until a restore point of at least `commits` commits is written (or continued); resolves to its count. */
  async function restorePointOf(
    backupd: ReturnType<typeof start>,
    commits: number,
  ): Promise<number> {
    const found = await waitFor(
      `a restore point of ${commits} commits`,
      () => {
        const counts = backupd
          .logEvents()
          .filter(
            (e) =>
              e.event === 'backup.restore_point_written' ||
              e.event === 'backup.generation_continued',
          )
          .map((e) => e.commitSeq as number);
        const newest = Math.max(-1, ...counts);
        return newest >= commits ? { newest } : undefined;
      },
      { describe: () => backupd.describe(), timeoutMs: 30_000 },
    );
    return found.newest;
  }

  async function continued(backupd: ReturnType<typeof start>) {
    return waitFor(
      'the generation continued',
      () => backupd.logEvents().find((e) => e.event === 'backup.generation_continued'),
      { describe: () => backupd.describe(), timeoutMs: 30_000 },
    );
  }

  async function restoresExactly(bucket: string, database: string, name: string) {
    const target = join(directory, name, 'app.db');
    const restored = await runCli(['restore', pathToFileURL(bucket).href, target, '--json'], {
      env,
    });
    expect(restored.code, restored.stderr).toBe(0);
    expect(databaseHash(target)).toBe(databaseHash(database));
  }

  for (const [label, changedWhileDown] of [
    ['an unchanged database', [] as number[]],
    ['a database of which 3 rows changed while backupd was down', [7, 100, 300]],
  ] as const) {
    it(`${label}: continues the generation from the restore point read back, adds at most 1 %, restores exactly`, async () => {
      const name = changedWhileDown.length === 0 ? 'unchanged' : 'changed';
      const database = createDatabase(`${name}.db`);
      const bucket = join(directory, `${name}-backups`);
      const first = start(database, bucket);
      const initial = await restorePointOf(first, 0);
      // Commits after the first snapshot, so the log is not empty.
      update(database, [1, 2, 3, 4, 5], 9);
      const shipped = await restorePointOf(first, initial + 5);
      expect((await first.stop('SIGKILL', 10_000)).signal).toBe('SIGKILL');
      update(database, changedWhileDown, 77);
      if (changedWhileDown.length > 0) {
        // A row the log changed, set back to its snapshot's bytes: its page
        // differs from the restore point only once the log is applied.
        const application = new DatabaseSync(database);
        application.prepare('UPDATE t SET body = ? WHERE id = ?').run(originalBody(1), 1);
        application.close();
      }
      const before = bucketFiles(bucket);
      expect(snapshots(before)).toHaveLength(1);

      const second = start(database, bucket);
      const event = await continued(second);
      // The proof came from the bucket: the restore point was read back.
      expect(event.restorePointBytesRead as number).toBeGreaterThan(0);
      if (changedWhileDown.length > 0) await restorePointOf(second, shipped + 1);
      expect(await second.stop('SIGTERM', 60_000), second.describe()).toEqual({
        code: 0,
        signal: null,
      });
      const after = bucketFiles(bucket);
      expect(snapshots(after)).toEqual(snapshots(before));
      const added = addedBytes(before, after);
      expect(added, `${added} bytes added by the restart`).toBeLessThanOrEqual(
        statSync(database).size / 100,
      );
      await restoresExactly(bucket, database, `${name}-restored`);
    }, 180_000);
  }

  it('a database rewritten whole while backupd was down: a new snapshot, and the restore is exact', async () => {
    const database = createDatabase('rewritten.db');
    const bucket = join(directory, 'rewritten-backups');
    const first = start(database, bucket);
    await restorePointOf(first, 0);
    expect((await first.stop('SIGKILL', 10_000)).signal).toBe('SIGKILL');
    update(
      database,
      Array.from({ length: 512 }, (_, i) => i + 1),
      5,
    );
    const second = start(database, bucket);
    await waitFor(
      'a second snapshot',
      () => snapshots(bucketFiles(bucket)).length === 2 || undefined,
      { describe: () => second.describe(), timeoutMs: 30_000 },
    );
    expect((await second.stop('SIGTERM', 60_000)).code, second.describe()).toBe(0);
    expect(second.logEvents().some((e) => e.event === 'backup.generation_continued')).toBe(false);
    await restoresExactly(bucket, database, 'rewritten-restored');
  }, 180_000);

  it('a restore point that does not read back (a damaged segment): a new snapshot, logged, and the restore is exact', async () => {
    const database = createDatabase('damaged.db');
    const bucket = join(directory, 'damaged-backups');
    const first = start(database, bucket);
    const initial = await restorePointOf(first, 0);
    update(database, [1, 2, 3], 4);
    await restorePointOf(first, initial + 3);
    expect((await first.stop('SIGKILL', 10_000)).signal).toBe('SIGKILL');
    const store = new FsStore({ root: bucket, fsync: false });
    const segment = (await store.list('backup/wal/')).objects.find((o) => o.key.endsWith('.seg'))!;
    const bytes = (await store.get(segment.key))!.body;
    bytes[bytes.length - 1]! ^= 0xff;
    await store.put(segment.key, bytes, { mode: 'overwrite' });

    const second = start(database, bucket);
    const warning = await waitFor(
      'the continuation refused',
      () => second.logEvents().find((e) => e.event === 'backup.continuation_unproven'),
      { describe: () => second.describe(), timeoutMs: 30_000 },
    );
    expect(String(warning.error)).toContain(segment.key);
    await waitFor(
      'a second snapshot',
      () => snapshots(bucketFiles(bucket)).length === 2 || undefined,
      { describe: () => second.describe(), timeoutMs: 30_000 },
    );
    expect((await second.stop('SIGTERM', 60_000)).code, second.describe()).toBe(0);
    await restoresExactly(bucket, database, 'damaged-restored');
  }, 180_000);

  it('segments shipped after the last restore point (a tail): taken into the log as they are, each commit still restorable', async () => {
    const database = createDatabase('tail.db');
    const bucket = join(directory, 'tail-backups');
    // Restore points rarely, segments every second: a kill leaves a tail.
    const first = start(database, bucket, { BACKUPD_RESTORE_POINT_INTERVAL: '1h' });
    await restorePointOf(first, 0);
    const named = await segmentKeys(bucket);
    update(database, [1, 2], 3);
    await waitFor(
      'a segment shipped',
      async () => (await segmentKeys(bucket)).length > named.length || undefined,
      {
        describe: () => first.describe(),
        timeoutMs: 30_000,
      },
    );
    expect((await first.stop('SIGKILL', 10_000)).signal).toBe('SIGKILL');
    const before = bucketFiles(bucket);
    const tail = (await segmentKeys(bucket)).filter((key) => !named.includes(key));

    const second = start(database, bucket);
    const event = await continued(second);
    expect(event.tailSegments).toBe(tail.length);
    expect(event.commitSeq as number).toBeGreaterThanOrEqual(2);
    expect(await second.stop('SIGTERM', 60_000), second.describe()).toEqual({
      code: 0,
      signal: null,
    });
    const after = bucketFiles(bucket);
    expect(snapshots(after)).toEqual(snapshots(before));
    // The tail's objects are kept: the log goes on after them.
    for (const key of tail)
      expect([...after.keys()].some((path) => path.startsWith(key))).toBe(true);
    expect(addedBytes(before, after)).toBeLessThanOrEqual(statSync(database).size / 100);
    await restoresExactly(bucket, database, 'tail-restored');
  }, 180_000);
});
