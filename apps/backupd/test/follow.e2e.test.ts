/**
 * `backupd follow` end to end, with encryption: a follower with the
 * identity keeps a read-only copy up to date while `replicate` ships (and
 * across a restart of `replicate` that continues the generation), prints
 * one JSON line per state with --json, serves its lag and applied commit in
 * /metrics and on the status page, never shows the secret key, and stops
 * (SIGTERM, exit 0) leaving the target equal to a restore. Without the
 * identity it fails before writing the target; on a database it did not
 * create it refuses (exit 3) unless --force; a second follow of the same
 * target is refused (exit 6).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import {
  baseEnv,
  getText,
  listeningUrl,
  metricValue,
  runCli,
  startBackupd,
  suiteWorkspace,
  waitFor,
} from './helpers/cli.ts';
import { databaseHash } from './helpers/content-hash.ts';

const bin = fileURLToPath(new URL('../../../.servers/bin/', import.meta.url));
const AGE_KEYGEN = join(bin, 'age-keygen');
const present = existsSync(AGE_KEYGEN);
if (!present && process.env.CI === 'true')
  throw new Error(`age-keygen is required under CI=true: run scripts/install-servers.sh`);

describe.skipIf(!present)('backupd follow', () => {
  const { directory, running } = suiteWorkspace('follow');
  const env = baseEnv({ BACKUPD_RESTORE_POINT_INTERVAL: '2s' });

  it('keeps a read-only copy up to date, reports its lag, and stops as restored', async () => {
    const keyFile = join(directory, 'key.txt');
    execFileSync(AGE_KEYGEN, ['-o', keyFile], { stdio: 'pipe' });
    const recipient = execFileSync(AGE_KEYGEN, ['-y', keyFile], { encoding: 'utf8' }).trim();
    const secret = readFileSync(keyFile, 'utf8').match(/AGE-SECRET-KEY-1[0-9A-Z]+/)![0];
    const source = join(directory, 'app.db');
    const app = new DatabaseSync(source);
    app.exec('PRAGMA journal_mode=WAL; CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT)');
    const url = pathToFileURL(join(directory, 'bucket')).href;
    let replicate = startBackupd(['replicate', source, url, '--log-format', 'json'], {
      env: { ...env, BACKUPD_AGE_RECIPIENTS: recipient },
    });
    running.push(replicate);
    const insert = app.prepare('INSERT INTO t (body) VALUES (?)');
    insert.run('first');
    await waitFor(
      'a restore point',
      () => replicate.logEvents().some((e) => e.event === 'backup.restore_point_written'),
      { describe: () => replicate.describe(), timeoutMs: 30_000 },
    );

    // Without the identity: refused before the target is written.
    const target = join(directory, 'replica', 'app.db');
    const keyless = await runCli(['follow', url, target], { env });
    expect(keyless.code, keyless.stderr).toBe(1);
    expect(keyless.stderr).toMatch(/identit|recipient/i);
    expect(existsSync(target)).toBe(false);

    const follow = startBackupd(
      [
        'follow',
        url,
        target,
        '--age-identity-file',
        keyFile,
        '--json',
        '--poll',
        '200ms',
        '--log-format',
        'json',
        '--listen',
        '127.0.0.1:0',
      ],
      { env },
    );
    running.push(follow);
    const status = await listeningUrl(follow);
    const shown = (): number => {
      if (!existsSync(target)) return -1;
      const reader = new DatabaseSync(target, { readOnly: true });
      try {
        return (reader.prepare('SELECT count(*) AS n FROM t').get() as { n: number }).n;
      } finally {
        reader.close();
      }
    };
    const commitRows = async (from: number) => {
      for (let i = from; i < from + 15; i += 1) {
        insert.run(`row ${i}`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      const rows = (app.prepare('SELECT count(*) AS n FROM t').get() as { n: number }).n;
      await waitFor(`the follower at ${rows} rows`, () => shown() === rows, {
        describe: () => follow.describe(),
        timeoutMs: 30_000,
      });
      return rows;
    };
    await commitRows(0);
    // Every commit so far was captured before this moment, every later one after it.
    const between = new Date().toISOString();
    // The writer restarts (a new tenure that continues the generation): followed on.
    expect(await replicate.stop('SIGTERM', 30_000), replicate.describe()).toEqual({
      code: 0,
      signal: null,
    });
    replicate = startBackupd(['replicate', source, url, '--log-format', 'json'], {
      env: { ...env, BACKUPD_AGE_RECIPIENTS: recipient },
    });
    running.push(replicate);
    const rows = await commitRows(15);
    const lines = follow.stdout
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(lines.length).toBeGreaterThan(1);
    expect(lines.every((line) => line.event === 'backupd.follow_applied')).toBe(true);
    const seqs = lines.map((line) => line.commitSeq as number);
    expect([...seqs].sort((a, b) => a - b)).toEqual(seqs);

    const metrics = (await getText(`${status}/metrics`)).body;
    // The lines read so far may end before the state the metrics show.
    expect(metricValue(metrics, 'backupd_follow_applied_commit')).toBeGreaterThanOrEqual(
      seqs.at(-1)!,
    );
    expect(metricValue(metrics, 'backupd_follow_commits_behind')).toBeGreaterThanOrEqual(0);
    expect(metricValue(metrics, 'backupd_lag_seconds')).toBeGreaterThanOrEqual(0);
    expect(metricValue(metrics, 'backupd_requests_total', { operation: 'put' })).toBe(0);
    expect(metricValue(metrics, 'backupd_requests_total', { operation: 'delete' })).toBe(0);
    const page = (await getText(`${status}/`)).body;
    expect(page).toContain('follower (takes none)');
    expect((await getText(`${status}/healthz`)).status).toBe(200);

    // One follower per target.
    const second = await runCli(['follow', url, target, '--age-identity-file', keyFile], { env });
    expect(second.code, second.stderr).toBe(6);

    expect(await follow.stop('SIGTERM', 30_000), follow.describe()).toEqual({
      code: 0,
      signal: null,
    });
    app.close();
    expect(await replicate.stop('SIGTERM', 30_000), replicate.describe()).toEqual({
      code: 0,
      signal: null,
    });
    // Stopped: the file is in WAL mode, as a restore leaves it, with what it showed.
    expect(readFileSync(target)[18]).toBe(2);
    expect(shown()).toBe(rows);
    const restored = join(directory, 'restored.db');
    const restore = await runCli(['restore', url, restored, '--age-identity-file', keyFile], {
      env,
    });
    expect(restore.code, restore.stderr).toBe(0);
    expect(databaseHash(target)).toBe(databaseHash(restored));

    // Time travel: the state at `between` (15 rows), and exit 0 since later commits exist.
    const travelled = join(directory, 'travelled.db');
    const travel = await runCli(
      ['follow', url, travelled, '--until', between, '--age-identity-file', keyFile],
      { env },
    );
    expect(travel.code, travel.stderr).toBe(0);
    const old = new DatabaseSync(travelled, { readOnly: true });
    expect((old.prepare('SELECT count(*) AS n FROM t').get() as { n: number }).n).toBe(15 + 1);
    old.close();

    for (const text of [follow.stdout, follow.stderr, keyless.stderr, metrics, page])
      expect(text).not.toContain(secret);
  }, 120_000);

  it('refuses a database it did not create (exit 3) unless --force', async () => {
    const source = join(directory, 'plain.db');
    const app = new DatabaseSync(source);
    app.exec('PRAGMA journal_mode=WAL; CREATE TABLE t (x)');
    app.exec("INSERT INTO t VALUES ('backed up')");
    app.close();
    const url = pathToFileURL(join(directory, 'plain-bucket')).href;
    const replicate = startBackupd(['replicate', source, url, '--log-format', 'json'], { env });
    running.push(replicate);
    await waitFor(
      'a restore point',
      () => replicate.logEvents().some((e) => e.event === 'backup.restore_point_written'),
      { describe: () => replicate.describe(), timeoutMs: 30_000 },
    );
    const mine = join(directory, 'mine.db');
    const other = new DatabaseSync(mine);
    other.exec("CREATE TABLE mine (x); INSERT INTO mine VALUES ('precious')");
    other.close();
    const refused = await runCli(['follow', url, mine], { env });
    expect(refused.code, refused.stderr).toBe(3);
    expect(refused.stderr).toMatch(/not created by a follow/);
    const kept = new DatabaseSync(mine, { readOnly: true });
    expect(kept.prepare('SELECT x FROM mine').get()).toEqual({ x: 'precious' });
    kept.close();

    const forced = startBackupd(
      ['follow', url, mine, '--force', '--latest-only', '--log-format', 'json'],
      { env },
    );
    running.push(forced);
    await waitFor(
      'the forced follow',
      () => forced.logEvents().some((e) => e.event === 'backupd.follow_applied'),
      { describe: () => forced.describe(), timeoutMs: 30_000 },
    );
    expect(await forced.stop('SIGTERM', 30_000)).toEqual({ code: 0, signal: null });
    const now = new DatabaseSync(mine, { readOnly: true });
    expect(now.prepare('SELECT x FROM t').get()).toEqual({ x: 'backed up' });
    now.close();
    await replicate.stop('SIGTERM', 30_000);
  }, 90_000);
});
