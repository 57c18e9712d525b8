/**
 * A restart whose copy meets another connection's checkpoint in progress
 * (SQLite runs one at a time and answers any other with busy at once) waits
 * for it instead of giving up: an application past its auto-checkpoint size
 * runs one after every commit, right when the write lock is free.
 */
import { spawn } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { SqliteTap } from '../src/tap.ts';
import { openApplicationDatabase } from './harness.ts';

/** Checkpoints in a loop (nothing much to copy: each holds the checkpoint lock briefly) until stdin closes. */
const CHECKPOINTER = `
const { DatabaseSync } = require('node:sqlite');
const db = new DatabaseSync(process.argv[1]);
const checkpoint = db.prepare('PRAGMA wal_checkpoint(PASSIVE)');
let open = true;
process.stdin.on('end', () => { open = false; });
process.stdin.resume();
process.stdout.write('ready\\n');
const loop = () => {
  const until = Date.now() + 20;
  while (Date.now() < until) checkpoint.get();
  if (open) setImmediate(loop); else db.close();
};
loop();
`;

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0).reverse()) cleanup();
});

describe('SQLite tap restart beside a running checkpoint', () => {
  it('waits for the other checkpoint and restarts', async () => {
    const { path, application } = openApplicationDatabase('backupd-sqlite-restart-busy-', cleanups);
    const tap = SqliteTap.open(path, { passiveCheckpointPages: 1e9, truncateCheckpointPages: 1e9 });
    cleanups.push(() => tap.close());
    tap.releaseSnapshot();

    const child = spawn(process.execPath, ['-e', CHECKPOINTER, path], {
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    const exited = new Promise((resolve) => child.on('exit', resolve));
    cleanups.push(() => child.kill());
    await new Promise<void>((resolve) => child.stdout.once('data', () => resolve()));

    const attempts = 40;
    let restartable = 0;
    for (let i = 0; i < attempts; i += 1) {
      application.exec('INSERT INTO t (body) VALUES (randomblob(3000))');
      const report = tap.checkpoint('truncate');
      if (report.walRestartable) restartable += 1;
      await new Promise((resolve) => setImmediate(resolve));
    }
    child.stdin.end();
    await exited;
    // The other connection holds the checkpoint lock much of the time; a
    // restart that gave up on meeting it would fail about as often.
    expect(restartable).toBeGreaterThanOrEqual(attempts - 2);
  }, 30_000);
});
