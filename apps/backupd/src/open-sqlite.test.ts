/**
 * The SQLite source as the daemon opens it: `checkpoint.holdLock` reaches the
 * tap, and the source reports the hold where the metrics read it.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { afterEach, describe, expect, it } from 'vitest';
import { singleDatabaseConfig } from './config.ts';
import { sqliteSourceFactory } from './open-sqlite.ts';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** Where the tap can hold the lock (see the SQLite README: 64-bit Linux). */
const canHold = process.platform === 'linux' && ['x64', 'arm64'].includes(process.arch);

/** Opens the source for a fresh database with `env`, commits past SQLite's auto-checkpoint size, and reports the hold. */
async function holdAfterCommits(env: Record<string, string>): Promise<boolean | undefined> {
  const directory = mkdtempSync(join(tmpdir(), 'backupd-open-sqlite-'));
  cleanups.push(() => rmSync(directory, { recursive: true, force: true }));
  const path = join(directory, 'app.db');
  const application = new DatabaseSync(path);
  cleanups.push(() => application.close());
  application.exec('PRAGMA journal_mode=WAL; PRAGMA wal_autocheckpoint=0');
  application.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, body BLOB)');
  const config = singleDatabaseConfig(
    { path, url: `file://${join(directory, 'backups')}` },
    { env, baseDir: '/' },
  );
  const database = config.databases[0]!;
  const { openSource } = await sqliteSourceFactory(config)(database);
  if (openSource === undefined) throw new Error('the SQLite factory opens its source on demand');
  const source = await openSource({});
  cleanups.push(async () => {
    await source.close?.();
  });
  for (let i = 0; i < 1100; i += 1)
    application.exec('INSERT INTO t (body) VALUES (randomblob(100))');
  await source.afterStep?.(null);
  return (await source.durablePosition()).engine?.checkpointLockHeld;
}

describe('sqliteSourceFactory', () => {
  it.skipIf(!canHold)('holds the checkpoint lock by default once commits land', async () => {
    expect(await holdAfterCommits({})).toBe(true);
  });

  it('does not with checkpoint.holdLock off', async () => {
    expect(await holdAfterCommits({ BACKUPD_CHECKPOINT_HOLD_LOCK: 'off' })).toBe(false);
  });
});
