/**
 * A first boot in a container, end to end through the real command: nothing
 * was backed up at the URL yet.
 * - `replicate --restore-if-missing --exec` starts fresh: the application
 *   creates the database, backupd backs it up once it is in WAL mode, and
 *   exits with the application's code;
 * - `restore --if-replica-exists` does nothing (exit 0) on an empty prefix,
 *   and restores as usual from one with data;
 * - a prefix with data whose restore fails is never started over.
 */
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { baseEnv, runCli, suiteWorkspace } from './helpers/cli.ts';

const env = baseEnv({
  BACKUPD_INTERVAL: '200ms',
  BACKUPD_LEASE_TTL: '3s',
  BACKUPD_RESTORE_POINT_INTERVAL: '200ms',
});

/** A shell command running a small Node program, passed as base64 so no shell quoting can bend it. */
function application(source: string): string {
  const encoded = Buffer.from(source, 'utf8').toString('base64');
  return `${JSON.stringify(process.execPath)} -e "eval(Buffer.from('${encoded}', 'base64').toString())"`;
}

/** The application of a first boot: creates the database in WAL mode, writes rows, exits with `code`. */
function creatingApplication(database: string, rows: number, code: number): string {
  return application(`const { DatabaseSync } = require('node:sqlite');
setTimeout(() => {
  const db = new DatabaseSync(${JSON.stringify(database)});
  db.exec("PRAGMA busy_timeout = 10000");
  db.exec('PRAGMA journal_mode=WAL; CREATE TABLE t (x INTEGER);');
  for (let i = 0; i < ${rows}; i++) db.exec('INSERT INTO t VALUES (' + i + ')');
  db.close();
  setTimeout(() => process.exit(${code}), 300);
}, 300);`);
}

function rowCount(database: string): number {
  const db = new DatabaseSync(database, { readOnly: true });
  try {
    return (db.prepare('SELECT count(*) AS n FROM t').get() as { n: number }).n;
  } finally {
    db.close();
  }
}

describe('first boot: nothing backed up yet', () => {
  const { directory } = suiteWorkspace('first-boot');
  const populated = pathToFileURL(join(directory, 'populated')).href;

  it('replicate --restore-if-missing --exec starts fresh, backs up what the application created, exits with its code', async () => {
    const database = join(directory, 'fresh.db');
    const result = await runCli(
      [
        'replicate',
        database,
        populated,
        '--restore-if-missing',
        '--exec',
        creatingApplication(database, 30, 0),
      ],
      { env, timeoutMs: 60_000 },
    );
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).toContain(
      `restore-if-missing: nothing backed up at ${populated} yet; starting fresh`,
    );
    const listed = await runCli(['ls', populated, '--json'], { env });
    expect(listed.code, listed.stderr).toBe(0);
    expect((JSON.parse(listed.stdout) as unknown[]).length).toBeGreaterThan(0);
    const restored = join(directory, 'restored.db');
    const restore = await runCli(['restore', populated, restored], { env });
    expect(restore.code, restore.stderr).toBe(0);
    expect(rowCount(restored)).toBe(30);
  });

  it('replicate --restore-if-missing without --exec and without the database: exit 1 naming it', async () => {
    const database = join(directory, 'never.db');
    const empty = pathToFileURL(join(directory, 'empty-1')).href;
    const result = await runCli(['replicate', database, empty, '--restore-if-missing'], { env });
    expect(result.code, result.stderr).toBe(1);
    expect(result.stderr).toContain(`${database} does not exist and nothing was backed up`);
    expect(existsSync(database)).toBe(false);
  });

  it('restore --if-replica-exists on an empty prefix: exit 0, nothing created', async () => {
    const empty = pathToFileURL(join(directory, 'empty-2')).href;
    const target = join(directory, 'out.db');
    const result = await runCli(['restore', '--if-replica-exists', empty, target], { env });
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toBe(
      `nothing was backed up at ${empty} yet; nothing restored (--if-replica-exists)\n`,
    );
    expect(existsSync(target)).toBe(false);
    // Without the flag, the same restore still fails.
    const plain = await runCli(['restore', empty, target], { env });
    expect(plain.code).toBe(1);
    expect(existsSync(target)).toBe(false);
  });

  it('restore --if-replica-exists on a prefix with data restores it', async () => {
    const target = join(directory, 'out-populated.db');
    const result = await runCli(['restore', '--if-replica-exists', populated, target], { env });
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toContain('restored commit');
    expect(rowCount(target)).toBe(30);
  });

  it('a prefix with data and a corrupt LATEST: --restore-if-missing fails and creates no database', async () => {
    const broken = join(directory, 'broken');
    const source = join(directory, 'source.db');
    const app = creatingApplication(source, 5, 0);
    const seeded = await runCli(
      ['replicate', source, pathToFileURL(broken).href, '--restore-if-missing', '--exec', app],
      { env, timeoutMs: 60_000 },
    );
    expect(seeded.code, seeded.stderr).toBe(0);
    const latest = join(broken, 'backup', 'LATEST~obj');
    expect(existsSync(latest)).toBe(true);
    writeFileSync(latest, 'not a restore point');
    const database = join(directory, 'from-broken.db');
    const result = await runCli(
      [
        'replicate',
        database,
        pathToFileURL(broken).href,
        '--restore-if-missing',
        '--exec',
        creatingApplication(database, 1, 0),
      ],
      { env, timeoutMs: 60_000 },
    );
    expect(result.code, result.stderr).not.toBe(0);
    expect(result.stderr).not.toContain('starting fresh');
    expect(existsSync(database)).toBe(false);
    const restore = await runCli(
      ['restore', '--if-replica-exists', pathToFileURL(broken).href, join(directory, 'x.db')],
      { env },
    );
    expect(restore.code).not.toBe(0);
  });
});
