/**
 * An honest exit from every state: a stop that leaves committed data
 * unbacked exits 4 and says how much, also when the lease was never held
 * and nothing ever reached the bucket; a standby beside a live holder and
 * a replica with nothing left to back up exit 0.
 */
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { pathToFileURL } from 'node:url';
import { latestKey } from '@x/manifest';
import { startFaultProxy } from '@x/test-faults';
import { randomPrefix } from '@x/test-servers';
import { describe, expect, it } from 'vitest';
import {
  baseEnv,
  type RunningProcess,
  runCli,
  s3Env,
  s3Url,
  startBackupd,
  suiteWorkspace,
  waitFor,
} from './helpers/cli.ts';
import { directStore, missingReason, s3Server } from './helpers/servers.ts';

const versitygw = s3Server('versitygw');
if (!versitygw) console.warn(`shutdown from every state: skipped, ${missingReason('versitygw')}`);

/** A loopback port nothing listens on (bound by the kernel, then closed). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

function walDatabase(path: string, schema = 'CREATE TABLE t (x INTEGER)'): DatabaseSync {
  const db = new DatabaseSync(path);
  db.exec(`PRAGMA journal_mode=WAL; ${schema}`);
  return db;
}

/** Commits `count` rows, one transaction each. */
function commit(db: DatabaseSync, count: number): void {
  const insert = db.prepare('INSERT INTO t VALUES (?)');
  for (let i = 0; i < count; i += 1) insert.run(i);
}

const stepFailed = (process: RunningProcess) => () =>
  process.logEvents().some((e) => e.event === 'backup.step_failed');

const event = (process: RunningProcess, name: string) =>
  process.logEvents().find((e) => e.event === name);

describe('a stop from every state', () => {
  const { directory, running } = suiteWorkspace('shutdown-every-state');

  it('against an endpoint refusing connections from the start, after commits: exit 4, and how much', async () => {
    const database = join(directory, 'refused.db');
    const db = walDatabase(database);
    const url = `s3://bk/p?endpoint=${encodeURIComponent(`http://127.0.0.1:${await closedPort()}`)}&forcePathStyle=true&region=us-east-1`;
    const env = baseEnv({ AWS_ACCESS_KEY_ID: 'k', AWS_SECRET_ACCESS_KEY: 's' });
    const backupd = startBackupd(['replicate', database, url, '--log-format', 'json'], { env });
    running.push(backupd);
    try {
      await waitFor('a failed attempt at the lease', stepFailed(backupd), {
        describe: () => backupd.describe(),
      });
      commit(db, 201);
      const stopped = await backupd.stop('SIGTERM', 60_000);
      expect(stopped.code, backupd.describe()).toBe(4);
      const incomplete = event(backupd, 'backupd.stopped_incomplete');
      expect(incomplete, backupd.describe()).toMatchObject({
        shortfall: 'never-held-lease',
        heldLease: false,
        restorableCommitSeq: null,
      });
      // The application's connection is still open: its commits are in the WAL.
      expect(incomplete!.walFrames).toBeGreaterThanOrEqual(201);
      expect(incomplete!.databaseBytes).toBeGreaterThan(0);
      expect(String(incomplete!.reason)).toContain(`the database at ${database} has`);
      expect(String(incomplete!.reason)).toContain('ECONNREFUSED');
    } finally {
      db.close();
    }
  }, 90_000);

  it('a database with nothing committed, against the same endpoint: exit 0, nothing to back up', async () => {
    const database = join(directory, 'refused-empty.db');
    walDatabase(database, '').close();
    const url = `s3://bk/p?endpoint=${encodeURIComponent(`http://127.0.0.1:${await closedPort()}`)}&forcePathStyle=true&region=us-east-1`;
    const env = baseEnv({ AWS_ACCESS_KEY_ID: 'k', AWS_SECRET_ACCESS_KEY: 's' });
    const backupd = startBackupd(['replicate', database, url, '--log-format', 'json'], { env });
    running.push(backupd);
    await waitFor('a failed attempt at the lease', stepFailed(backupd), {
      describe: () => backupd.describe(),
    });
    const stopped = await backupd.stop('SIGTERM', 60_000);
    expect(stopped.code, backupd.describe()).toBe(0);
    expect(event(backupd, 'backupd.stopped_incomplete'), backupd.describe()).toBeUndefined();
    expect(event(backupd, 'backupd.stopped_nothing_to_back_up'), backupd.describe()).toBeDefined();
  }, 90_000);

  it.skipIf(!versitygw)(
    'after the server failed during the first lease write (and lease writes keep failing): exit 4, no LATEST',
    async () => {
      const server = versitygw!;
      const prefix = randomPrefix('shutdown-lease-write');
      // The first lease write lands but its answer is lost (the server went
      // away mid-request); every later one is reset.
      const proxy = await startFaultProxy({
        target: server.endpoint,
        seed: 35,
        schedule: {
          rules: [
            { kind: 'lostResponse', methods: ['PUT'], path: '/LEASE', limit: 1 },
            { kind: 'reset', methods: ['PUT'], path: '/LEASE', skip: 1 },
          ],
        },
      });
      const database = join(directory, 'lease-write.db');
      const db = walDatabase(database);
      try {
        const url = s3Url({ ...server, endpoint: proxy.url }, prefix);
        const backupd = startBackupd(['replicate', database, url, '--log-format', 'json'], {
          env: s3Env(server),
        });
        running.push(backupd);
        await waitFor(
          'the first lease write to lose its answer',
          () => proxy.counts().lostResponse > 0,
          {
            describe: () => backupd.describe(),
          },
        );
        commit(db, 802);
        await waitFor('a later lease write to fail', () => proxy.counts().reset > 0, {
          describe: () => backupd.describe(),
        });
        const stopped = await backupd.stop('SIGTERM', 60_000);
        expect(stopped.code, backupd.describe()).toBe(4);
        expect(event(backupd, 'backupd.stopped_incomplete'), backupd.describe()).toMatchObject({
          shortfall: 'never-held-lease',
          heldLease: false,
        });
        expect(event(backupd, 'backupd.stopped_incomplete')!.walFrames).toBeGreaterThanOrEqual(802);
        expect(await directStore(server).head(latestKey(prefix))).toBeNull();
      } finally {
        db.close();
        await proxy.close();
      }
    },
    90_000,
  );

  it('a standby beside a live holder: exit 0, the holder backs the database up', async () => {
    const database = join(directory, 'primary.db');
    const standbyDatabase = join(directory, 'standby.db');
    const backups = pathToFileURL(join(directory, 'standby-backups')).href;
    const db = walDatabase(database);
    commit(db, 5);
    const env = baseEnv({ BACKUPD_INTERVAL: '200ms', BACKUPD_RESTORE_POINT_INTERVAL: '300ms' });
    const holder = startBackupd(['replicate', database, backups, '--log-format', 'json'], {
      env,
      label: 'holder',
    });
    running.push(holder);
    try {
      await waitFor(
        'the first restore point',
        async () => (await runCli(['ls', backups, '--json'], { env })).stdout.includes('commitSeq'),
        { describe: () => holder.describe() },
      );
      // The standby's database is a restore of the holder's (same lineage).
      const restored = await runCli(['restore', backups, standbyDatabase], { env });
      expect(restored.code, restored.stderr).toBe(0);
      const standby = startBackupd(
        ['replicate', standbyDatabase, backups, '--log-format', 'json'],
        {
          env,
          label: 'standby',
        },
      );
      running.push(standby);
      await waitFor(
        'the standby to see the holder',
        () => event(standby, 'backup.lease_held_elsewhere'),
        {
          describe: () => standby.describe(),
        },
      );
      commit(db, 20);
      const stopped = await standby.stop('SIGTERM', 60_000);
      expect(stopped.code, standby.describe()).toBe(0);
      expect(event(standby, 'backupd.stopped_incomplete'), standby.describe()).toBeUndefined();
      const holderStopped = await holder.stop('SIGTERM', 60_000);
      expect(holderStopped.code, holder.describe()).toBe(0);
    } finally {
      db.close();
    }
  }, 90_000);

  it('an idle replica of an empty database that reached the bucket: exit 0', async () => {
    const database = join(directory, 'idle-empty.db');
    walDatabase(database, '').close();
    const backups = pathToFileURL(join(directory, 'idle-empty-backups')).href;
    const env = baseEnv({ BACKUPD_INTERVAL: '200ms' });
    const backupd = startBackupd(['replicate', database, backups, '--log-format', 'json'], { env });
    running.push(backupd);
    await waitFor(
      'the first restore point',
      async () => (await runCli(['ls', backups, '--json'], { env })).stdout.includes('commitSeq'),
      { describe: () => backupd.describe() },
    );
    expect(existsSync(database)).toBe(true);
    const stopped = await backupd.stop('SIGTERM', 60_000);
    expect(stopped.code, backupd.describe()).toBe(0);
    expect(event(backupd, 'backupd.stopped_incomplete'), backupd.describe()).toBeUndefined();
  }, 90_000);
});
