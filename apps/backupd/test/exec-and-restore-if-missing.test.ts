/**
 * `replicate --exec` and `--restore-if-missing`, end to end with the CLI as a
 * child process on the embedded default store (a local directory):
 * - the application runs as backupd's child; backupd exits with its code,
 *   after shipping what it committed (a final restore point);
 * - a signal sent to backupd reaches the application, and backupd follows it out;
 * - a database that is missing is restored first, and the restored database
 *   continues the prefix it came from (a second lineage adopting it).
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { baseEnv, runCli, startBackupd, waitFor } from './helpers/cli.ts';

const directory = mkdtempSync(join(tmpdir(), 'backupd-exec-'));
afterAll(() => rmSync(directory, { recursive: true, force: true }));

const env = baseEnv({
  BACKUPD_INTERVAL: '200ms',
  BACKUPD_LEASE_TTL: '3s',
  BACKUPD_RESTORE_POINT_INTERVAL: '200ms',
});

/** A shell command running a small Node program (the "application"), passed as base64 so no shell quoting can bend it. */
function application(source: string): string {
  const encoded = Buffer.from(source, 'utf8').toString('base64');
  return `${JSON.stringify(process.execPath)} -e "eval(Buffer.from('${encoded}', 'base64').toString())"`;
}

function insertRows(database: string, from: number, count: number): string {
  return `const { DatabaseSync } = require('node:sqlite');
const db = new DatabaseSync(${JSON.stringify(database)});
db.exec("PRAGMA busy_timeout = 10000");
for (let i = ${from}; i < ${from + count}; i++) db.exec('INSERT INTO t VALUES (' + i + ')');
db.close();`;
}

function rowCount(database: string): number {
  const db = new DatabaseSync(database, { readOnly: true });
  try {
    return (db.prepare('SELECT count(*) AS n FROM t').get() as { n: number }).n;
  } finally {
    db.close();
  }
}

describe('replicate --exec and --restore-if-missing', () => {
  const database = join(directory, 'app.db');
  const backups = pathToFileURL(join(directory, 'app.db-backups')).href;

  it('runs the application as a child, ships its commits, and exits with its code', async () => {
    const db = new DatabaseSync(database);
    db.exec('PRAGMA journal_mode=WAL; CREATE TABLE t (x INTEGER);');
    db.close();
    const app = application(
      `${insertRows(database, 0, 20)}\nsetTimeout(() => process.exit(7), 300);`,
    );
    const result = await runCli(['replicate', database, backups, '--exec', app], {
      env,
      timeoutMs: 60_000,
    });
    expect(result.code, result.stderr).toBe(7);
    const restored = join(directory, 'restored-1.db');
    const restore = await runCli(['restore', backups, restored], { env });
    expect(restore.code, restore.stderr).toBe(0);
    expect(rowCount(restored)).toBe(20);
  });

  it('forwards SIGTERM to the application and exits with its code once it has stopped', async () => {
    const marker = join(directory, 'got-sigterm');
    const ready = join(directory, 'app-ready');
    const app = application(
      `const fs = require('node:fs');
process.on('SIGTERM', () => { fs.writeFileSync(${JSON.stringify(marker)}, 'yes'); process.exit(0); });
fs.writeFileSync(${JSON.stringify(ready)}, 'yes');
setInterval(() => {}, 1000);`,
    );
    const backupd = startBackupd(['replicate', database, backups, '--exec', app], { env });
    // The signal must find the application listening for it.
    await waitFor('the application to start', () => existsSync(ready), {
      describe: () => backupd.describe(),
    });
    const exit = await backupd.stop('SIGTERM');
    expect(existsSync(marker)).toBe(true);
    expect(exit.code, backupd.describe()).toBe(0);
  });

  it('restores a missing database first, then continues the prefix it came from', async () => {
    rmSync(database, { force: true });
    rmSync(`${database}-wal`, { force: true });
    rmSync(`${database}-shm`, { force: true });
    for (const name of ['state', 'lineage', 'parent'])
      rmSync(join(directory, '.app.db-backupd', name), { force: true });
    const app = application(
      `${insertRows(database, 100, 5)}\nsetTimeout(() => process.exit(0), 300);`,
    );
    const result = await runCli(
      ['replicate', database, backups, '--restore-if-missing', '--exec', app],
      {
        env,
        timeoutMs: 60_000,
      },
    );
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).toContain('backupd.restore_if_missing');
    const restored = join(directory, 'restored-2.db');
    const restore = await runCli(['restore', backups, restored], { env });
    expect(restore.code, restore.stderr).toBe(0);
    expect(rowCount(restored)).toBe(25);
    const listed = await runCli(['ls', backups, '--json'], { env });
    const points = JSON.parse(listed.stdout) as { lineage?: string; latest: boolean }[];
    const lineages = new Set(points.map((point) => point.lineage));
    // The restored database backs up as a lineage of its own beside its parent's restore points.
    expect(lineages.size).toBe(2);
    expect(points.filter((point) => point.latest)).toHaveLength(1);
  });
});
