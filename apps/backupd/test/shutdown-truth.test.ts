/**
 * A graceful stop tells the truth: when it cannot make everything it
 * captured restorable, `replicate` exits 4 and says how many commits are
 * missing, from which commit to which, and when it saw them; when it can,
 * it exits 0 without such a line. The grace period is set to nothing so the
 * final restore point cannot be written; a restore point interval of an hour
 * keeps any other from being written meanwhile.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { baseEnv, runCli, startBackupd, startWriter, waitFor } from './helpers/cli.ts';

const directory = mkdtempSync(join(tmpdir(), 'backupd-shutdown-truth-'));
afterAll(() => rmSync(directory, { recursive: true, force: true }));

async function run(label: string, grace: string) {
  const database = join(directory, `${label}.db`);
  const backups = pathToFileURL(join(directory, `${label}-backups`)).href;
  const db = new DatabaseSync(database);
  db.exec('PRAGMA journal_mode=WAL; CREATE TABLE t (x INTEGER);');
  const env = baseEnv({ BACKUPD_RESTORE_POINT_INTERVAL: '1h', BACKUPD_SHUTDOWN_GRACE: grace });
  const backupd = startBackupd(['replicate', database, backups, '--log-format', 'json'], { env });
  const newest = async () => {
    const listed = await runCli(['ls', backups, '--json'], { env });
    const points = listed.code === 0 ? (JSON.parse(listed.stdout) as { commitSeq: number }[]) : [];
    return points.length === 0 ? undefined : Math.max(...points.map((p) => p.commitSeq));
  };
  const { first } = await waitFor(
    'the first restore point',
    async () => {
      const commit = await newest();
      return commit === undefined ? undefined : { first: commit };
    },
    { describe: () => backupd.describe() },
  );
  for (let i = 0; i < 25; i += 1) db.exec(`INSERT INTO t VALUES (${i})`);
  db.close();
  // Captured (the tap looks every 50 ms) before the stop.
  await new Promise((resolve) => setTimeout(resolve, 500));
  const stopped = await backupd.stop('SIGTERM', 60_000);
  return { stopped, backupd, first, newest: await newest() };
}

describe('a graceful stop', () => {
  it('that cannot write its final restore point exits 4 and names the commits it leaves unrestorable', async () => {
    const { stopped, backupd, first } = await run('abandoned', '0s');
    expect(stopped.code, backupd.describe()).toBe(4);
    const event = backupd.logEvents().find((e) => e.event === 'backupd.stopped_incomplete');
    expect(event, backupd.describe()).toMatchObject({
      shortfall: 'flush-abandoned',
      unrestorableCommits: 25,
      restorableCommitSeq: first,
      capturedCommitSeq: first + 25,
    });
    expect(Date.parse(String(event!.unrestorableSince))).not.toBeNaN();
    expect(Date.parse(String(event!.unrestorableUntil))).not.toBeNaN();
  }, 90_000);

  it('that writes its final restore point exits 0, with no such line', async () => {
    const { stopped, backupd, first, newest } = await run('complete', '10s');
    expect(stopped.code, backupd.describe()).toBe(0);
    expect(backupd.logEvents().some((e) => e.event === 'backupd.stopped_incomplete')).toBe(false);
    expect(newest).toBe(first + 25);
  }, 90_000);

  it("with the application still committing exits 0: what lands during the stop is the next run's", async () => {
    const database = join(directory, 'live.db');
    const backups = pathToFileURL(join(directory, 'live-backups')).href;
    const records = join(directory, 'live-records.jsonl');
    const writer = startWriter(database, records, 0);
    const env = baseEnv({ BACKUPD_RESTORE_POINT_INTERVAL: '1h' });
    await waitFor('the writer to create the database', async () => {
      try {
        const db = new DatabaseSync(database, { readOnly: true });
        db.close();
        return true;
      } catch {
        return false;
      }
    });
    await new Promise((resolve) => setTimeout(resolve, 300));
    const backupd = startBackupd(['replicate', database, backups, '--log-format', 'json'], { env });
    try {
      await waitFor(
        'the first restore point',
        async () => (await runCli(['ls', backups, '--json'], { env })).stdout.includes('commitSeq'),
        { describe: () => backupd.describe() },
      );
      await new Promise((resolve) => setTimeout(resolve, 500));
      const stopped = await backupd.stop('SIGTERM', 60_000);
      expect(stopped.code, backupd.describe()).toBe(0);
      expect(backupd.logEvents().some((e) => e.event === 'backupd.stopped_incomplete')).toBe(false);
    } finally {
      await writer.stop('SIGTERM');
    }
  }, 90_000);
});
