/**
 * `backupd replicate --dir` end to end: every database of a directory
 * (subdirectories too with --recursive) is backed up under its own URL and
 * restores with the ordinary `restore` command; asleep, the directory sends
 * no request and holds no descriptor of any database; a commit while asleep
 * wakes it, also when the application checkpoints the WAL away before the
 * wake; a database created later is picked up, a removed one stops and
 * stays restorable; a matching file that is not a WAL database is refused
 * (logged, exit 4 at the stop) while the others go on, and so is one whose
 * place in the bucket holds another database's backup. Killed (SIGKILL)
 * while databases are awake, a restart ships what they hold. On S3, the
 * databases share one store under the URL's prefix, and a URL that holds
 * one database's backup is refused.
 */
import { readdirSync, readlinkSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import {
  baseEnv,
  getText,
  listeningUrl,
  metricValue,
  type RunningProcess,
  runCli,
  s3Env,
  s3Url,
  startBackupd,
  suiteWorkspace,
  waitFor,
} from './helpers/cli.ts';
import { databaseHash } from './helpers/content-hash.ts';
import { missingReason, s3Server } from './helpers/servers.ts';

function createDatabase(path: string, rows = 20): void {
  const database = new DatabaseSync(path);
  database.exec('PRAGMA journal_mode = WAL');
  database.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT NOT NULL)');
  const insert = database.prepare('INSERT INTO t (body) VALUES (?)');
  for (let i = 0; i < rows; i += 1) insert.run(`row ${i} ${'x'.repeat(200)}`);
  database.close();
}

/** `replicate --dir` of `tenants` to `url`, asleep after 1 s, logging JSON at debug level; then `extra`. */
function directoryArgs(tenants: string, url: string, ...extra: string[]): string[] {
  return [
    'replicate',
    '--dir',
    tenants,
    url,
    '--sleep-after',
    '1s',
    '--log-format',
    'json',
    '--log-level',
    'debug',
    ...extra,
  ];
}

function events(backupd: RunningProcess, name: string, database?: string) {
  return backupd
    .logEvents()
    .filter(
      (event) => event.event === name && (database === undefined || event.database === database),
    );
}

/** Whether the database has slept more times than `count` since the process started. */
function sleptMoreThan(backupd: RunningProcess, database: string, count: number): boolean {
  return events(backupd, 'backupd.database_asleep', database).length > count;
}

function requestsTotal(metrics: string): number {
  let total = 0;
  for (const line of metrics.split('\n'))
    if (line.startsWith('backupd_requests_total{'))
      total += Number(line.slice(line.lastIndexOf(' ') + 1));
  return total;
}

/** The files of `directory` the process holds open (sidecar lock files aside). */
function openFilesIn(pid: number, directory: string): string[] {
  const held: string[] = [];
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    let target: string;
    try {
      target = readlinkSync(`/proc/${pid}/fd/${fd}`);
    } catch {
      continue;
    }
    if (target.startsWith(`${directory}/`) && !target.includes('-backupd/')) held.push(target);
  }
  return held;
}

async function restoredHash(url: string, target: string, env: Record<string, string | undefined>) {
  const restored = await runCli(['restore', url, target], { env });
  expect(restored.code, restored.stderr).toBe(0);
  return databaseHash(target);
}

describe('backupd replicate --dir', () => {
  const { directory, running } = suiteWorkspace('directory');
  const env = baseEnv({ BACKUPD_RESTORE_POINT_INTERVAL: '1s' });

  it('backs up every database, sleeps while idle, wakes on a change, follows additions and removals', async () => {
    const tenants = join(directory, 'tenants');
    const bucket = join(directory, 'bucket');
    const url = pathToFileURL(bucket).href;
    const { mkdirSync } = await import('node:fs');
    mkdirSync(join(tenants, 'sub'), { recursive: true });
    for (const name of ['a.db', 'b.db', 'sub/c.db'])
      createDatabase(join(tenants, ...name.split('/')));
    createDatabase(join(tenants, '.hidden.db'));
    const rollback = new DatabaseSync(join(tenants, 'plain.db'));
    rollback.exec('CREATE TABLE t (x); INSERT INTO t VALUES (1)');
    rollback.close();

    const backupd = startBackupd(
      directoryArgs(tenants, url, '--recursive', '--rescan', '1s', '--listen', '127.0.0.1:0'),
      { env },
    );
    running.push(backupd);
    const status = await listeningUrl(backupd);
    const a = join(tenants, 'a.db');
    const b = join(tenants, 'b.db');
    const c = join(tenants, 'sub', 'c.db');
    await waitFor(
      'every database asleep once',
      () => [a, b, c].every((path) => sleptMoreThan(backupd, path, 0)) || undefined,
      { describe: () => backupd.describe(), timeoutMs: 60_000 },
    );
    expect(
      events(backupd, 'backupd.database_found')
        .map((event) => event.database)
        .sort(),
    ).toEqual([a, b, join(tenants, 'plain.db'), c].sort());
    expect(events(backupd, 'backupd.database_refused', join(tenants, 'plain.db'))).toHaveLength(1);

    // Asleep: no request over three rescans, no descriptor of any database.
    await waitFor(
      'nothing awake',
      async () => {
        const metrics = (await getText(`${status}/metrics`)).body;
        return (
          metricValue(metrics, 'backupd_directory_databases', { state: 'awake' }) === 0 || undefined
        );
      },
      { describe: () => backupd.describe(), timeoutMs: 30_000 },
    );
    const before = requestsTotal((await getText(`${status}/metrics`)).body);
    await new Promise((resolve) => setTimeout(resolve, 3500));
    const after = requestsTotal((await getText(`${status}/metrics`)).body);
    expect(after - before, 'requests while every database slept').toBe(0);
    expect(before).toBeGreaterThan(0);
    expect(openFilesIn(backupd.child.pid!, tenants)).toEqual([]);

    // The per-database view: a search over the directory's databases, worst first.
    const found = JSON.parse((await getText(`${status}/databases?q=PLAIN`)).body) as {
      databases: { database: string; state: string; problem: string }[];
    };
    expect(found.databases).toEqual([
      expect.objectContaining({
        database: 'plain.db',
        state: 'refused',
        problem: 'not a SQLite database in WAL mode',
      }),
    ]);
    const all = JSON.parse((await getText(`${status}/databases`)).body) as {
      databases: { database: string; state: string }[];
    };
    expect(all.databases.map((row) => `${row.database} ${row.state}`).sort()).toEqual([
      'a.db asleep',
      'b.db asleep',
      'plain.db refused',
      'sub/c.db asleep',
    ]);
    const page = (await getText(`${status}/?q=sub%2F`)).body;
    expect(page).toContain('Databases whose path holds "sub/"');
    expect(page).toContain('sub/c.db');
    expect(page).not.toContain('>a.db<');

    // A commit while asleep, the application's connection kept open.
    const sleptA = events(backupd, 'backupd.database_asleep', a).length;
    const application = new DatabaseSync(a);
    application.prepare('INSERT INTO t (body) VALUES (?)').run('while asleep');
    // A commit and a checkpoint that empties the WAL before backupd can
    // look (it is stopped meanwhile): only the database file tells.
    const sleptB = events(backupd, 'backupd.database_asleep', b).length;
    process.kill(backupd.child.pid!, 'SIGSTOP');
    try {
      const other = new DatabaseSync(b);
      other.exec(
        "BEGIN; DELETE FROM t WHERE id % 2 = 0; INSERT INTO t (body) VALUES ('after checkpoint'); COMMIT; PRAGMA wal_checkpoint(TRUNCATE);",
      );
      other.close();
    } finally {
      process.kill(backupd.child.pid!, 'SIGCONT');
    }
    // A database created while running, and one removed.
    const d = join(tenants, 'sub', 'd.db');
    createDatabase(d, 5);
    rmSync(c);
    await waitFor(
      'a and b asleep again, d backed up, c removed',
      () =>
        (sleptMoreThan(backupd, a, sleptA) &&
          sleptMoreThan(backupd, b, sleptB) &&
          sleptMoreThan(backupd, d, 0) &&
          events(backupd, 'backupd.database_removed', c).length === 1) ||
        undefined,
      { describe: () => backupd.describe(), timeoutMs: 60_000 },
    );
    application.close();

    const stopped = await backupd.stop('SIGTERM', 60_000);
    // plain.db matched the pattern and was not backed up: not a clean stop.
    expect(stopped, backupd.describe()).toEqual({ code: 4, signal: null });
    expect(events(backupd, 'backupd.stopped_incomplete').map((event) => event.database)).toEqual([
      join(tenants, 'plain.db'),
    ]);
    expect(events(backupd, 'backupd.stopped_incomplete')[0]).toMatchObject({
      shortfall: 'refused',
      lastError: expect.stringMatching(/not a SQLite database in WAL mode/),
      reason: expect.stringMatching(/was refused \(not a SQLite database in WAL mode\)/),
    });

    for (const [path, relative] of [
      [a, 'a.db'],
      [b, 'b.db'],
      [d, 'sub/d.db'],
    ] as const)
      expect(
        await restoredHash(
          `${url}/${relative}`,
          join(directory, `restored-${relative.replace('/', '-')}`),
          env,
        ),
        relative,
      ).toBe(databaseHash(path));
    // The removed database's backup stays restorable.
    const restoredC = join(directory, 'restored-c.db');
    const restored = await runCli(['restore', `${url}/sub/c.db`, restoredC], { env });
    expect(restored.code, restored.stderr).toBe(0);
    expect(new DatabaseSync(restoredC).prepare('SELECT count(*) AS n FROM t').get()).toEqual({
      n: 20,
    });
    expect(readdirSync(bucket).sort()).toEqual(['a.db', 'b.db', 'sub']);

    // ls of the directory's URL: every database with its newest restore point.
    const listed = await runCli(['ls', url, '--json'], { env });
    expect(listed.code, listed.stderr).toBe(0);
    const { databases } = JSON.parse(listed.stdout) as {
      databases: { database: string; url: string; commitSeq: number; problem: string | null }[];
    };
    expect(databases.map((entry) => [entry.database, entry.problem])).toEqual([
      ['a.db', null],
      ['b.db', null],
      ['sub/c.db', null],
      ['sub/d.db', null],
    ]);
    expect(databases[0]!.url).toBe(`${url}/a.db`);
    expect(databases[0]!.commitSeq).toBeGreaterThan(0);
    const text = await runCli(['ls', url], { env });
    expect(text.stdout).toMatch(/^DATABASE\s+COMMIT\s+CREATED\s+URL$/m);
    expect(text.stdout).toMatch(/4 databases/);
  });

  it('leaves a database another replicate holds to that one, and backs up the rest', async () => {
    const { mkdirSync } = await import('node:fs');
    const shared = join(directory, 'shared');
    mkdirSync(shared);
    createDatabase(join(shared, 'one.db'));
    createDatabase(join(shared, 'two.db'));
    const alone = startBackupd(
      [
        'replicate',
        join(shared, 'one.db'),
        pathToFileURL(join(directory, 'one-alone')).href,
        '--log-format',
        'json',
      ],
      { env },
    );
    running.push(alone);
    await waitFor(
      'the lone replicate started',
      () => events(alone, 'backupd.database_locked').length > 0 || undefined,
      {
        describe: () => alone.describe(),
        timeoutMs: 30_000,
      },
    );
    const url = pathToFileURL(join(directory, 'shared-bucket')).href;
    const backupd = startBackupd(directoryArgs(shared, url), { env });
    running.push(backupd);
    await waitFor(
      'two.db asleep, one.db left to the other',
      () =>
        (sleptMoreThan(backupd, join(shared, 'two.db'), 0) &&
          events(backupd, 'backupd.database_held_elsewhere', join(shared, 'one.db')).length ===
            1) ||
        undefined,
      { describe: () => backupd.describe(), timeoutMs: 60_000 },
    );
    expect(await backupd.stop('SIGTERM', 30_000), backupd.describe()).toEqual({
      code: 0,
      signal: null,
    });
    expect(await alone.stop('SIGTERM', 30_000), alone.describe()).toEqual({
      code: 0,
      signal: null,
    });
    expect(readdirSync(join(directory, 'shared-bucket'))).toEqual(['two.db']);
  });

  it('takes a directory entry in a config file, beside a database entry', async () => {
    const { mkdirSync, writeFileSync } = await import('node:fs');
    const tenants = join(directory, 'configured');
    mkdirSync(tenants);
    createDatabase(join(tenants, 'x.sqlite'));
    createDatabase(join(tenants, 'ignored.db'));
    const app = join(directory, 'app.db');
    createDatabase(app);
    const tenantsUrl = pathToFileURL(join(directory, 'configured-bucket')).href;
    const appUrl = pathToFileURL(join(directory, 'app-bucket')).href;
    const config = join(directory, 'backupd.yml');
    writeFileSync(
      config,
      `databases:\n  - directory: configured\n    url: ${tenantsUrl}\n    pattern: "*.sqlite"\n    sleepAfter: 1s\n  - path: app.db\n    url: ${appUrl}\n`,
    );
    const backupd = startBackupd(
      ['replicate', '-c', config, '--log-format', 'json', '--log-level', 'debug'],
      {
        env,
      },
    );
    running.push(backupd);
    await waitFor(
      'x.sqlite asleep and app.db backed up',
      () =>
        (sleptMoreThan(backupd, join(tenants, 'x.sqlite'), 0) &&
          events(backupd, 'backup.restore_point_written', app).length > 0) ||
        undefined,
      { describe: () => backupd.describe(), timeoutMs: 60_000 },
    );
    expect(backupd.stdout).toMatch(/backing up the databases of .*configured matching \*\.sqlite/);
    expect(await backupd.stop('SIGTERM', 30_000), backupd.describe()).toEqual({
      code: 0,
      signal: null,
    });
    expect(readdirSync(join(directory, 'configured-bucket'))).toEqual(['x.sqlite']);
    expect(
      await restoredHash(`${tenantsUrl}/x.sqlite`, join(directory, 'restored-x.db'), env),
    ).toBe(databaseHash(join(tenants, 'x.sqlite')));
    expect(await restoredHash(appUrl, join(directory, 'restored-app.db'), env)).toBe(
      databaseHash(app),
    );
  });

  it('killed while databases are awake, a restart ships what they hold', async () => {
    const { mkdirSync } = await import('node:fs');
    const tenants = join(directory, 'killed');
    mkdirSync(tenants);
    const paths = ['k1.db', 'k2.db'].map((name) => join(tenants, name));
    for (const path of paths) createDatabase(path);
    const url = pathToFileURL(join(directory, 'killed-bucket')).href;
    const args = directoryArgs(tenants, url);
    const first = startBackupd(args, { env });
    running.push(first);
    await waitFor(
      'both asleep once',
      () => paths.every((path) => sleptMoreThan(first, path, 0)) || undefined,
      { describe: () => first.describe(), timeoutMs: 60_000 },
    );
    // Commits that wake both, then SIGKILL before either sleeps again.
    const applications = paths.map((path) => new DatabaseSync(path));
    for (const application of applications)
      application.exec(
        "BEGIN; DELETE FROM t WHERE id < 5; INSERT INTO t (body) VALUES ('before the kill'); COMMIT;",
      );
    await waitFor(
      'both woken again',
      () =>
        paths.every((path) => events(first, 'backupd.database_woken', path).length > 1) ||
        undefined,
      { describe: () => first.describe(), timeoutMs: 30_000 },
    );
    expect(await first.stop('SIGKILL')).toEqual({ code: null, signal: 'SIGKILL' });
    for (const application of applications)
      application.exec("INSERT INTO t (body) VALUES ('while stopped')");
    for (const application of applications) application.close();

    const second = startBackupd(args, { env });
    running.push(second);
    await waitFor(
      'both asleep after the restart',
      () => paths.every((path) => sleptMoreThan(second, path, 0)) || undefined,
      { describe: () => second.describe(), timeoutMs: 60_000 },
    );
    expect(await second.stop('SIGTERM', 30_000), second.describe()).toEqual({
      code: 0,
      signal: null,
    });
    for (const path of paths) {
      const name = path.slice(tenants.length + 1);
      expect(
        await restoredHash(`${url}/${name}`, join(directory, `restored-killed-${name}`), env),
        name,
      ).toBe(databaseHash(path));
    }
  });

  it('refuses a database whose place in the bucket holds another database’s backup, and backs up the rest', async () => {
    const { mkdirSync } = await import('node:fs');
    const tenants = join(directory, 'foreign');
    mkdirSync(tenants);
    createDatabase(join(tenants, 'mine.db'));
    createDatabase(join(tenants, 'ok.db'));
    const url = pathToFileURL(join(directory, 'foreign-bucket')).href;
    // Another database backed up, alone, where mine.db's backup would go.
    const other = join(directory, 'other.db');
    createDatabase(other, 35);
    const alone = startBackupd(['replicate', other, `${url}/mine.db`, '--log-format', 'json'], {
      env,
    });
    running.push(alone);
    await waitFor(
      'the other database backed up',
      () => events(alone, 'backup.restore_point_written').length > 0 || undefined,
      { describe: () => alone.describe(), timeoutMs: 30_000 },
    );
    expect(await alone.stop('SIGTERM', 30_000), alone.describe()).toEqual({
      code: 0,
      signal: null,
    });

    const backupd = startBackupd(directoryArgs(tenants, url), { env });
    running.push(backupd);
    const mine = join(tenants, 'mine.db');
    await waitFor(
      'ok.db asleep, mine.db refused',
      () =>
        (sleptMoreThan(backupd, join(tenants, 'ok.db'), 0) &&
          events(backupd, 'backupd.database_refused', mine).length > 0) ||
        undefined,
      { describe: () => backupd.describe(), timeoutMs: 60_000 },
    );
    // Refused once: not woken again and again while the bucket stays as it is.
    await new Promise((resolve) => setTimeout(resolve, 3000));
    expect(events(backupd, 'backupd.database_refused', mine)).toHaveLength(1);
    expect(events(backupd, 'backup.prefix_refused', mine)).toHaveLength(1);
    expect(await backupd.stop('SIGTERM', 30_000), backupd.describe()).toEqual({
      code: 4,
      signal: null,
    });
    const incomplete = events(backupd, 'backupd.stopped_incomplete');
    expect(incomplete.map((event) => event.database)).toEqual([mine]);
    expect(incomplete[0]?.lastError).toMatch(/holds the backups of another store/);
    expect(incomplete[0]?.shortfall).toBe('refused');
    expect(incomplete[0]?.reason).toMatch(/was refused \(.*holds the backups of another store/);
    // The other database's backup is as it was; ok.db's is its own.
    expect(await restoredHash(`${url}/mine.db`, join(directory, 'restored-other.db'), env)).toBe(
      databaseHash(other),
    );
    expect(await restoredHash(`${url}/ok.db`, join(directory, 'restored-ok.db'), env)).toBe(
      databaseHash(join(tenants, 'ok.db')),
    );
  });

  it('refuses a second replicate of the same directory on this host', async () => {
    const tenants = join(directory, 'twice');
    const { mkdirSync } = await import('node:fs');
    mkdirSync(tenants);
    createDatabase(join(tenants, 'one.db'));
    const url = pathToFileURL(join(directory, 'twice-bucket')).href;
    const first = startBackupd(['replicate', '--dir', tenants, url, '--log-format', 'json'], {
      env,
    });
    running.push(first);
    await waitFor(
      'a restore point',
      () => events(first, 'backup.restore_point_written').length > 0 || undefined,
      {
        describe: () => first.describe(),
        timeoutMs: 30_000,
      },
    );
    const second = await runCli(['replicate', '--dir', tenants, url], { env, timeoutMs: 20_000 });
    expect(second.code, second.stderr).toBe(6);
    expect(second.stderr).toMatch(/already being replicated/);
    expect(await first.stop('SIGTERM', 30_000)).toEqual({ code: 0, signal: null });
  });
});

const versitygw = s3Server('versitygw');
if (!versitygw)
  console.warn(`backupd replicate --dir on S3: skipped, ${missingReason('versitygw')}`);

describe.skipIf(!versitygw)('backupd replicate --dir on S3', () => {
  const { directory, running } = suiteWorkspace('directory-s3');

  it('backs each database up under the URL’s prefix, restorable by its own URL', async () => {
    const server = versitygw!;
    const env = s3Env(server, { BACKUPD_RESTORE_POINT_INTERVAL: '1s' });
    const tenants = join(directory, 'tenants');
    const { mkdirSync } = await import('node:fs');
    mkdirSync(tenants);
    for (const name of ['t1.db', 't2.db']) createDatabase(join(tenants, name));
    const prefix = `directory-${Date.now()}`;
    const backupd = startBackupd(directoryArgs(tenants, s3Url(server, prefix)), { env });
    running.push(backupd);
    await waitFor(
      'both asleep',
      () =>
        ['t1.db', 't2.db'].every((name) => sleptMoreThan(backupd, join(tenants, name), 0)) ||
        undefined,
      { describe: () => backupd.describe(), timeoutMs: 60_000 },
    );
    expect(await backupd.stop('SIGTERM', 30_000), backupd.describe()).toEqual({
      code: 0,
      signal: null,
    });
    expect(
      await restoredHash(s3Url(server, `${prefix}/t2.db`), join(directory, 'restored.db'), env),
    ).toBe(databaseHash(join(tenants, 't2.db')));

    const listed = await runCli(['ls', s3Url(server, prefix), '--json'], { env });
    expect(listed.code, listed.stderr).toBe(0);
    expect(
      (JSON.parse(listed.stdout) as { databases: { database: string }[] }).databases.map(
        (entry) => entry.database,
      ),
    ).toEqual(['t1.db', 't2.db']);

    // A URL that is one database's backup is no directory's.
    const refused = await runCli(
      ['replicate', '--dir', tenants, s3Url(server, `${prefix}/t1.db`)],
      {
        env,
        timeoutMs: 30_000,
      },
    );
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/holds the backup of one database/);
  });
});
