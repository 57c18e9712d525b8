/**
 * `backupd follow` killed with SIGKILL again and again while `replicate`
 * ships commits, each time started again on the same target: a reader
 * process that opens the target read-only throughout sees only whole
 * states (an invariant every transaction keeps) in commit order, and after
 * a last graceful stop the target equals a restore of the bucket.
 */
import { spawn } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { setTimeout as sleep } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { baseEnv, runCli, startBackupd, suiteWorkspace, waitFor } from './helpers/cli.ts';
import { databaseHash } from './helpers/content-hash.ts';

/** Reads the target read-only until the stop file exists; prints what it saw. */
const READER = `
import { existsSync } from 'node:fs';
import { DatabaseSync } from 'node:sqlite';
const [path, stopFile] = process.argv.slice(2);
let reads = 0, torn = 0, regressions = 0, refused = 0, last = -1;
while (!existsSync(stopFile)) {
  if (!existsSync(path)) { await new Promise((r) => setTimeout(r, 5)); continue; }
  try {
    const db = new DatabaseSync(path, { readOnly: true, timeout: 10000 });
    for (let i = 0; i < 20; i += 1) {
      db.exec('BEGIN');
      const sum = db.prepare('SELECT sum(bal) AS s FROM acct').get().s;
      const n = db.prepare('SELECT n FROM seq').get().n;
      db.exec('COMMIT');
      reads += 1;
      if (sum !== 0) torn += 1;
      if (n < last) regressions += 1;
      last = n;
    }
    db.close();
  } catch {
    refused += 1;
    await new Promise((r) => setTimeout(r, 5));
  }
  await new Promise((r) => setTimeout(r, 2));
}
console.log(JSON.stringify({ reads, torn, regressions, refused, last }));
`;

describe('backupd follow killed and started again', () => {
  const { directory, running } = suiteWorkspace('follow-kill');
  const env = baseEnv({ BACKUPD_RESTORE_POINT_INTERVAL: '1s' });

  it('never shows a torn state, and ends equal to a restore', async () => {
    const source = join(directory, 'app.db');
    const app = new DatabaseSync(source);
    app.exec(`PRAGMA journal_mode=WAL;
      CREATE TABLE acct (id INTEGER PRIMARY KEY, bal INTEGER NOT NULL);
      CREATE TABLE seq (n INTEGER NOT NULL);
      INSERT INTO seq VALUES (0)`);
    for (let i = 0; i < 50; i += 1) app.exec('INSERT INTO acct (bal) VALUES (0)');
    let seq = 0;
    const commit = () => {
      seq += 1;
      const amount = 1 + (seq % 7);
      app.exec('BEGIN IMMEDIATE');
      app.prepare('UPDATE acct SET bal = bal - ? WHERE id = ?').run(amount, 1 + (seq % 50));
      app.prepare('UPDATE acct SET bal = bal + ? WHERE id = ?').run(amount, 1 + ((seq * 3) % 50));
      app.exec('UPDATE seq SET n = n + 1');
      app.exec('COMMIT');
    };
    const url = pathToFileURL(join(directory, 'bucket')).href;
    const replicate = startBackupd(['replicate', source, url, '--log-format', 'json'], { env });
    running.push(replicate);
    commit();
    await waitFor(
      'a restore point',
      () => replicate.logEvents().some((e) => e.event === 'backup.restore_point_written'),
      { describe: () => replicate.describe(), timeoutMs: 30_000 },
    );

    const target = join(directory, 'replica', 'app.db');
    const script = join(directory, 'reader.mjs');
    const stopFile = join(directory, 'reader.stop');
    writeFileSync(script, READER);
    const reader = spawn(process.execPath, [script, target, stopFile], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let report = '';
    reader.stdout!.on('data', (chunk) => {
      report += String(chunk);
    });
    const readerDone = new Promise((resolve) => reader.on('exit', resolve));

    const follow = () =>
      startBackupd(['follow', url, target, '--poll', '200ms', '--log-format', 'json'], { env });
    for (let life = 0; life < 6; life += 1) {
      const follower = follow();
      running.push(follower);
      // Commits keep landing while it runs; killed after 0.5 to 2 s.
      const until = Date.now() + 500 + ((life * 433) % 1500);
      while (Date.now() < until) {
        commit();
        await sleep(40);
      }
      expect(await follower.stop('SIGKILL'), follower.describe()).toMatchObject({
        signal: 'SIGKILL',
      });
    }
    const last = follow();
    running.push(last);
    for (let i = 0; i < 10; i += 1) {
      commit();
      await sleep(40);
    }
    await waitFor(
      `the follower at commit ${seq}`,
      () => {
        if (!existsSync(target)) return false;
        try {
          const db = new DatabaseSync(target, { readOnly: true });
          try {
            return (db.prepare('SELECT n FROM seq').get() as { n: number }).n === seq;
          } finally {
            db.close();
          }
        } catch {
          return false;
        }
      },
      { describe: () => last.describe(), timeoutMs: 30_000 },
    );
    writeFileSync(stopFile, '');
    await readerDone;
    expect(await last.stop('SIGTERM', 30_000), last.describe()).toEqual({ code: 0, signal: null });
    const seen = JSON.parse(report) as { reads: number; torn: number; regressions: number };
    expect(seen.reads, report).toBeGreaterThan(100);
    expect(seen, report).toMatchObject({ torn: 0, regressions: 0 });

    app.close();
    expect(await replicate.stop('SIGTERM', 30_000), replicate.describe()).toEqual({
      code: 0,
      signal: null,
    });
    const restored = join(directory, 'restored.db');
    const restore = await runCli(['restore', url, restored], { env });
    expect(restore.code, restore.stderr).toBe(0);
    expect(databaseHash(target)).toBe(databaseHash(restored));
  }, 120_000);
});
