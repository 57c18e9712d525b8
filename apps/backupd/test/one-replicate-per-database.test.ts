/**
 * One `backupd replicate` per database on a host, and a restart after a
 * crash that takes its lease back at once — through the real command, as
 * processes:
 * - a replicate SIGKILLed and started again on the same host keeps its
 *   instance id (beside the database) and reclaims the lease at once as a
 *   new tenure, with a TTL of 60 s that waiting out would exceed the wait
 *   below; `backupd lease` calls the dead holder dead, and the new one this
 *   host's live replicate;
 * - a second replicate of the same database, to another URL, is refused at
 *   once (exit 6) naming the holder, before any restore or application runs;
 *   once the holder stops, the next one starts.
 * The assertions are on log events, health and exit codes, never on how
 * fast anything was.
 */
import { existsSync, readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { pathToFileURL } from 'node:url';
import { randomPrefix } from '@x/test-servers';
import { describe, expect, test } from 'vitest';
import {
  baseEnv,
  createWalDatabase,
  getText,
  instanceIdOf,
  listeningUrl,
  type RunningProcess,
  runCli,
  s3Env,
  s3Url,
  startBackupd,
  startWriter,
  suiteWorkspace,
  waitFor,
} from './helpers/cli.ts';
import { missingReason, s3Server } from './helpers/servers.ts';

const versitygw = s3Server('versitygw');
if (!versitygw)
  console.warn(`backupd one replicate per database: skipped, ${missingReason('versitygw')}`);

/** Waiting out this TTL would take longer than any wait below. */
const LEASE_TTL = '60s';
const WAIT_MS = 30_000;

interface LeaseJson {
  readonly state: string;
  readonly record: {
    readonly instanceId: string;
    readonly pid: number;
    readonly generation: number;
  };
  readonly local?: { readonly holder: string; readonly detail: string; readonly database?: string };
}

function events(process: RunningProcess, name: string): Record<string, unknown>[] {
  return process.logEvents().filter((line) => line.event === name);
}

describe.skipIf(!versitygw)('one replicate per database on a host', () => {
  const { directory, running } = suiteWorkspace('one-per-db');

  test('SIGKILLed and restarted on the same host: the same instance id reclaims its lease at once as a new tenure and ships again; backupd lease says dead, then live', async () => {
    const server = versitygw!;
    const url = s3Url(server, randomPrefix('backupd-reclaim'));
    const env = s3Env(server, { BACKUPD_INTERVAL: '200ms', BACKUPD_LEASE_TTL: LEASE_TTL });
    const databasePath = join(directory, 'crash.db');
    const recordsPath = join(directory, 'crash-records.jsonl');
    const writer = startWriter(databasePath, recordsPath, 20);
    running.push(writer);
    await waitFor('the writer to create the database', () => existsSync(recordsPath));

    const leaseView = async (): Promise<LeaseJson> => {
      const result = await runCli(['lease', url, '--database', databasePath, '--json'], { env });
      expect(result.code, result.stderr).toBe(0);
      return JSON.parse(result.stdout) as LeaseJson;
    };

    const first = startBackupd(['replicate', databasePath, url, '--listen', '127.0.0.1:0'], {
      env,
      label: 'first',
    });
    running.push(first);
    const firstUrl = await listeningUrl(first);
    await waitFor(
      'the first to ship a restore point',
      () => events(first, 'backup.restore_point_written').length > 0,
      { timeoutMs: WAIT_MS, describe: () => first.describe() },
    );
    const firstId = instanceIdOf(first)!;
    expect(firstId).toMatch(/^[0-9a-f]{32}$/);
    expect((await getText(`${firstUrl}/healthz`)).status).toBe(200);
    const live = await leaseView();
    expect(live.record).toMatchObject({ instanceId: firstId, pid: first.child.pid });
    expect(live.local?.holder).toBe('live-replicate');

    // The crash: no release, the record stays live for a whole TTL.
    await first.stop('SIGKILL');
    const dead = await leaseView();
    expect(dead.state).toBe('held');
    expect(dead.record.instanceId).toBe(firstId);
    expect(dead.local?.holder).toBe('dead-process');
    expect(dead.local?.detail).toContain(`pid ${first.child.pid}`);
    // Without the database, the pid alone tells it (gone).
    const byPid = await runCli(['lease', url], { env });
    expect(byPid.stdout).toContain('on this host: dead-process');

    const second = startBackupd(['replicate', databasePath, url, '--listen', '127.0.0.1:0'], {
      env,
      label: 'restarted',
    });
    running.push(second);
    const secondUrl = await listeningUrl(second);
    // Shipping again: a restore point written after the restart, far inside the old lease's TTL.
    await waitFor(
      'the restarted replicate to ship a restore point',
      () => events(second, 'backup.restore_point_written').length > 0,
      { timeoutMs: WAIT_MS, describe: () => second.describe() },
    );
    expect(instanceIdOf(second)).toBe(firstId);
    const locked = events(second, 'backupd.database_locked')[0];
    expect(locked).toMatchObject({ instanceId: firstId, instanceIdKept: true });
    const acquired = events(second, 'lease.acquired');
    expect(acquired).toHaveLength(1);
    // A new tenure, not a continuation: the fencing token moved on.
    expect(acquired[0]).toMatchObject({
      how: 'reclaim',
      previousHolder: firstId,
      generation: dead.record.generation + 1,
    });
    expect(events(second, 'backup.lease_held_elsewhere')).toEqual([]);
    await waitFor(
      'the restarted replicate to be healthy',
      async () => (await getText(`${secondUrl}/healthz`)).status === 200,
      { timeoutMs: WAIT_MS, describe: () => second.describe() },
    );
    const back = await leaseView();
    expect(back.record).toMatchObject({
      instanceId: firstId,
      pid: second.child.pid,
      generation: dead.record.generation + 1,
    });
    expect(back.local?.holder).toBe('live-replicate');

    expect((await second.stop('SIGTERM')).code).toBe(0);
    await writer.stop('SIGTERM');
  }, 90_000);

  test('a second replicate of the same database to another URL is refused at once naming the holder (before any restore or application); after the holder stops, the next one starts', async () => {
    const server = versitygw!;
    const url = s3Url(server, randomPrefix('backupd-one'));
    const otherUrl = s3Url(server, randomPrefix('backupd-other'));
    const env = s3Env(server, { BACKUPD_INTERVAL: '200ms', BACKUPD_LEASE_TTL: LEASE_TTL });
    const databasePath = join(directory, 'one.db');
    await createWalDatabase(databasePath);

    const holder = startBackupd(['replicate', databasePath, url], { env, label: 'holder' });
    running.push(holder);
    await waitFor(
      'the holder to ship a restore point',
      () => events(holder, 'backup.restore_point_written').length > 0,
      { timeoutMs: WAIT_MS, describe: () => holder.describe() },
    );

    const refused = await runCli(['replicate', databasePath, otherUrl], {
      env,
      timeoutMs: WAIT_MS,
    });
    expect(refused.code, refused.stderr).toBe(6);
    expect(refused.stderr).toContain('is already being replicated by another backupd replicate');
    expect(refused.stderr).toContain(`pid ${holder.child.pid} on ${hostname()}`);
    // The holder's destination, without credentials.
    expect(refused.stderr).toMatch(/backing up to s3:\/\/\S+backupd-one-/);
    expect(refused.stderr).not.toContain(server.secretAccessKey);
    expect(refused.stderr).not.toContain('backup.lease');
    // Nothing of the refused one started: no worker, no banner.
    expect(refused.stderr).not.toContain('backupd.replica_started');
    expect(refused.stdout).toBe('');

    // With a first boot and an application: refused before either runs.
    const marker = join(directory, 'application-ran');
    const refusedExec = await runCli(
      ['replicate', databasePath, otherUrl, '--restore-if-missing', '--exec', `touch ${marker}`],
      { env, timeoutMs: WAIT_MS },
    );
    expect(refusedExec.code, refusedExec.stderr).toBe(6);
    expect(existsSync(marker)).toBe(false);

    // The holder record in the sidecar directory names the holder.
    const record = JSON.parse(
      readFileSync(
        join(dirname(databasePath), `.${basename(databasePath)}-backupd`, 'holder.json'),
        'utf8',
      ),
    ) as {
      pid: number;
      instanceId: string;
    };
    expect(record.pid).toBe(holder.child.pid);
    expect(record.instanceId).toBe(instanceIdOf(holder));

    expect((await holder.stop('SIGTERM')).code).toBe(0);
    const next = startBackupd(['replicate', databasePath, otherUrl], { env, label: 'next' });
    running.push(next);
    await waitFor(
      'the next one to ship a restore point',
      () => events(next, 'backup.restore_point_written').length > 0,
      { timeoutMs: WAIT_MS, describe: () => next.describe() },
    );
    expect(events(next, 'backupd.database_in_use')).toEqual([]);
    expect(instanceIdOf(next)).toBe(record.instanceId);
    expect((await next.stop('SIGTERM')).code).toBe(0);
  }, 90_000);
});

describe('a restore over a database a running replicate backs up', () => {
  const { directory, running } = suiteWorkspace('restore-over-live');

  test('is refused with exit 6 naming the replicate, --force included, and leaves the database as it is; once the replicate stops, --force restores', async () => {
    const url = pathToFileURL(join(directory, 'backups')).href;
    const databasePath = join(directory, 'live.db');
    const env = baseEnv();
    await createWalDatabase(databasePath);
    const holder = startBackupd(['replicate', databasePath, url], { env, label: 'holder' });
    running.push(holder);
    await waitFor(
      'the replicate to write a restore point',
      () => events(holder, 'backup.restore_point_written').length > 0,
      { timeoutMs: WAIT_MS, describe: () => holder.describe() },
    );
    // A commit the backup's restore point may not hold yet: a restore over
    // the database would lose it.
    const application = new DatabaseSync(databasePath);
    application.exec("INSERT INTO notes (body) VALUES ('only in the live database')");

    for (const flags of [['--force'], []]) {
      const refused = await runCli(['restore', url, databasePath, ...flags], { env });
      expect(refused.code, refused.stderr).toBe(6);
      expect(refused.stderr).toContain('is being backed up by a running backupd replicate');
      expect(refused.stderr).toContain(`pid ${holder.child.pid} on ${hostname()}`);
      expect(refused.stderr).toContain('stop that replicate first');
    }
    const kept = application
      .prepare("SELECT count(*) AS n FROM notes WHERE body = 'only in the live database'")
      .get() as { n: number };
    expect(kept.n).toBe(1);
    application.close();

    expect((await holder.stop('SIGTERM')).code, holder.describe()).toBe(0);
    const restored = await runCli(['restore', url, databasePath, '--force'], { env });
    expect(restored.code, restored.stderr).toBe(0);
    const check = new DatabaseSync(databasePath, { readOnly: true });
    const { n } = check.prepare('SELECT count(*) AS n FROM notes').get() as { n: number };
    check.close();
    // The graceful stop's final restore point holds the late commit too.
    expect(n).toBe(21);
  }, 90_000);
});
