/**
 * A separate application committing back to back, with backupd at its
 * defaults through the real command (its default CPU priority included),
 * then SIGTERM and a restore of the latest state. Under this load backupd
 * once shipped gigabytes and wrote no restore point after commit 0, then
 * exited 0 and restored an empty table.
 *
 * What must hold, in each `synchronous` mode:
 * - the restored database holds every commit and backupd exited 0, or
 *   backupd's exit code (4) and its `backupd.stopped_incomplete` event say exactly
 *   how many commits are missing;
 * - restore points kept coming while the application wrote (one at least
 *   every restore-point interval, 10 s by default, over the 20 s run);
 * - the lease was renewed on schedule: no renewal failed, no write was
 *   stopped for a late renewal, and no gap between renewals came near the
 *   point where writes stop (two thirds of the 30 s TTL).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { baseEnv, RunningProcess, runCli, startBackupd, waitFor } from './helpers/cli.ts';

const WRITER = fileURLToPath(new URL('./fixtures/back-to-back-writer.ts', import.meta.url));
const WRITE_SECONDS = 20;
/** The default lease TTL's two thirds: writes stop this long after the last renewal was sent. */
const WRITES_STOP_AFTER_MS = 20_000;

const directory = mkdtempSync(join(tmpdir(), 'backupd-heavy-'));
afterAll(() => rmSync(directory, { recursive: true, force: true }));

interface Point {
  readonly commitSeq: number;
  readonly createdAt: string;
}

describe('an application committing back to back', () => {
  for (const synchronous of ['NORMAL', 'FULL'] as const) {
    it(`at synchronous=${synchronous}: every commit restorable, or the exit code and log say what is not`, async () => {
      const database = join(directory, `${synchronous}.db`);
      const backups = pathToFileURL(join(directory, `${synchronous}-backups`)).href;
      const setup = new DatabaseSync(database);
      setup.exec(
        'PRAGMA journal_mode=WAL; CREATE TABLE rows (id INTEGER PRIMARY KEY, text TEXT NOT NULL);',
      );
      setup.close();
      // The product's defaults: nothing set but what keeps the child away from real clouds.
      const env = baseEnv();
      delete env.BACKUPD_CPU_PRIORITY;
      const backupd = startBackupd(
        ['replicate', database, backups, '--log-level', 'debug', '--log-format', 'json'],
        { env },
      );
      const points = async (): Promise<Point[]> => {
        const listed = await runCli(['ls', backups, '--json'], { env });
        return listed.code === 0 ? (JSON.parse(listed.stdout) as Point[]) : [];
      };
      await waitFor('the first restore point', async () => (await points()).length > 0, {
        describe: () => backupd.describe(),
      });

      const writer = new RunningProcess(
        'writer',
        process.execPath,
        [WRITER, database, String(WRITE_SECONDS), synchronous],
        { env: baseEnv() },
      );
      const written = await writer.exited;
      expect(written.code, writer.describe()).toBe(0);
      const { commits, firstAt, lastAt } = JSON.parse(writer.stdout) as {
        commits: number;
        firstAt: number;
        lastAt: number;
      };
      expect(commits).toBeGreaterThan(1000);

      const stopped = await backupd.stop('SIGTERM', 90_000);
      const events = backupd.logEvents();
      const restored = join(directory, `${synchronous}-restored.db`);
      const restore = await runCli(['restore', backups, restored], { env, timeoutMs: 120_000 });
      expect(restore.code, restore.stderr).toBe(0);
      const check = new DatabaseSync(restored, { readOnly: true });
      const { rows, newest } = check
        .prepare('SELECT count(*) AS rows, coalesce(max(id), 0) AS newest FROM rows')
        .get() as { rows: number; newest: number };
      check.close();
      // Whatever was restored is a prefix of the commits: no gap, nothing invented.
      expect(newest).toBe(rows);

      const incomplete = events.find((event) => event.event === 'backupd.stopped_incomplete');
      if (stopped.code === 0) {
        expect(incomplete, backupd.describe()).toBeUndefined();
        expect(rows).toBe(commits);
      } else {
        expect(stopped.code, backupd.describe()).toBe(4);
        expect(incomplete, backupd.describe()).toBeDefined();
        expect(incomplete!.unrestorableCommits).toBe(commits - rows);
      }

      // Restore points kept coming while the application wrote.
      const during = (await points()).filter((point) => {
        const at = Date.parse(point.createdAt);
        return at > firstAt && at <= lastAt + 1_000;
      });
      expect(during.length, JSON.stringify(await points())).toBeGreaterThanOrEqual(1);

      // The lease was renewed on schedule.
      const problems = events.filter(
        (event) =>
          event.event === 'backup.lease_renew_failed' ||
          event.event === 'backup.lease_lost' ||
          String(event.error ?? '').includes('not renewed in time'),
      );
      expect(problems, backupd.describe()).toEqual([]);
      const taken = events.find((event) => event.event === 'backup.lease_taken');
      const renewals = events.filter((event) => event.event === 'backup.lease_renewed');
      expect(renewals.length).toBeGreaterThanOrEqual(Math.floor(WRITE_SECONDS / 10));
      const times = [taken!, ...renewals].map((event) => Number(event.time));
      for (let i = 1; i < times.length; i += 1)
        expect(times[i]! - times[i - 1]!).toBeLessThan(WRITES_STOP_AFTER_MS * 0.75);
    }, 240_000);
  }
});
