/**
 * A hot database beside many ordinary ones in one `replicate --dir`: one
 * application commits 5,000 times a second to `hot.db` while another commits
 * once a second to each of 100 others. Over a 20 s window none of the 100 is
 * starved: its lag (whole seconds the oldest unshipped byte waited, from
 * `/metrics?per-database=1`, sampled every half second) never passes 2,
 * two intervals; and after the stop each restores to exactly what was
 * committed. (A writer with no pause at all, on two cores, still takes the
 * others past that: see the README's Limits.)
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import {
  baseEnv,
  getText,
  listeningUrl,
  metricValue,
  RunningProcess,
  runCli,
  startBackupd,
  suiteWorkspace,
  waitFor,
} from './helpers/cli.ts';
import { databaseHash } from './helpers/content-hash.ts';

const ORDINARY = 100;
/** The hot database's commits a second: 5,000 times each ordinary one's. */
const HOT_COMMITS_PER_SECOND = 5000;
const WINDOW_MS = 20_000;

/** Commits at the rate given after the database's path, one row each, until killed. */
const AT_A_RATE = `
const { DatabaseSync } = require('node:sqlite');
const [path, perSecond] = process.argv.slice(1);
const database = new DatabaseSync(path);
database.exec('PRAGMA busy_timeout = 10000; PRAGMA synchronous = NORMAL');
const insert = database.prepare('INSERT INTO rows (text) VALUES (?)');
const text = 'x'.repeat(100);
const started = Date.now();
let commits = 0;
setInterval(() => {
  const due = Math.floor(((Date.now() - started) / 1000) * Number(perSecond));
  for (; commits < due; commits++) {
    database.exec('BEGIN IMMEDIATE');
    insert.run(text);
    database.exec('COMMIT');
  }
}, 5);
`;

/** One row a second into each database named on the command line, until killed. */
const ONCE_A_SECOND = `
const { DatabaseSync } = require('node:sqlite');
const inserts = process.argv.slice(1).map((path) => {
  const database = new DatabaseSync(path);
  database.exec('PRAGMA busy_timeout = 10000');
  return database.prepare('INSERT INTO rows (text) VALUES (?)');
});
setInterval(() => { for (const insert of inserts) insert.run(new Date().toISOString()); }, 1000);
`;

function createDatabase(path: string): void {
  const database = new DatabaseSync(path);
  database.exec(
    'PRAGMA journal_mode = WAL; CREATE TABLE rows (id INTEGER PRIMARY KEY, text TEXT NOT NULL)',
  );
  database.close();
}

/** The largest lag of each database in a `/metrics?per-database=1` text. */
function lagsByDatabase(metrics: string): Map<string, number> {
  const lags = new Map<string, number>();
  for (const line of metrics.split('\n')) {
    if (!line.startsWith('backupd_lag_seconds{')) continue;
    const database = /database="([^"]*)"/.exec(line)?.[1];
    if (database !== undefined) lags.set(database, Number(line.slice(line.lastIndexOf(' ') + 1)));
  }
  return lags;
}

describe('a hot database (5,000 commits a second) beside 100 ordinary ones', () => {
  const { directory, running } = suiteWorkspace('directory-fairness');

  it('starves none of them: each ships within two intervals, and restores exactly', async () => {
    const tenants = join(directory, 'tenants');
    mkdirSync(tenants);
    const hot = join(tenants, 'hot.db');
    createDatabase(hot);
    const ordinary = Array.from({ length: ORDINARY }, (_, i) =>
      join(tenants, `tenant-${String(i).padStart(3, '0')}.db`),
    );
    for (const path of ordinary) createDatabase(path);
    const url = pathToFileURL(join(directory, 'bucket')).href;
    const env = baseEnv();
    const backupd = startBackupd(
      ['replicate', '--dir', tenants, url, '--listen', '127.0.0.1:0', '--log-format', 'json'],
      { env },
    );
    running.push(backupd);
    const status = await listeningUrl(backupd);
    const metrics = async (query = '') => (await getText(`${status}/metrics${query}`)).body;
    await waitFor(
      'every database backed up once',
      async () => {
        const text = await metrics();
        return (
          (metricValue(text, 'backupd_directory_wakes_total') ?? 0) >= ORDINARY + 1 &&
          metricValue(text, 'backupd_directory_databases', { state: 'asleep' }) === ORDINARY + 1
        );
      },
      { describe: () => backupd.describe(), timeoutMs: 120_000 },
    );

    const hotWriter = new RunningProcess(
      'hot writer',
      process.execPath,
      ['-e', AT_A_RATE, hot, String(HOT_COMMITS_PER_SECOND)],
      { env },
    );
    const onceASecond = new RunningProcess(
      'once-a-second writer',
      process.execPath,
      ['-e', ONCE_A_SECOND, ...ordinary],
      { env },
    );
    running.push(hotWriter, onceASecond);
    await waitFor(
      'every database awake',
      async () =>
        metricValue(await metrics(), 'backupd_directory_databases', { state: 'awake' }) ===
        ORDINARY + 1,
      { describe: () => backupd.describe(), timeoutMs: 120_000 },
    );
    // Past each wake's first ship.
    await new Promise((resolve) => setTimeout(resolve, 5000));

    const worst = new Map<string, number>();
    const ends = Date.now() + WINDOW_MS;
    let samples = 0;
    while (Date.now() < ends) {
      const lags = lagsByDatabase(await metrics('?per-database=1'));
      for (const [database, lag] of lags)
        worst.set(database, Math.max(worst.get(database) ?? 0, lag));
      samples += 1;
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
    expect(samples).toBeGreaterThan(10);
    for (const path of ordinary) {
      expect(worst.has(path), `${path} was reported`).toBe(true);
      expect(worst.get(path), `${path}: worst lag`).toBeLessThanOrEqual(2);
    }
    expect(worst.has(hot)).toBe(true);

    await onceASecond.stop('SIGKILL');
    await hotWriter.stop('SIGKILL');
    expect(await backupd.stop('SIGTERM', 60_000), backupd.describe()).toEqual({
      code: 0,
      signal: null,
    });
    for (const path of [hot, ordinary[0]!, ordinary[ORDINARY - 1]!]) {
      const name = path.slice(tenants.length + 1);
      const target = join(directory, `restored-${name}`);
      const restored = await runCli(['restore', `${url}/${name}`, target], { env });
      expect(restored.code, restored.stderr).toBe(0);
      expect(databaseHash(target), name).toBe(databaseHash(path));
    }
  }, 300_000);
});
