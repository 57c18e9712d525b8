/**
 * A database file replaced underneath a running SqliteSource: the old
 * file's tap is closed at once and never read again; a replacement that is
 * not a SQLite database in WAL mode gives SqliteDatabaseUnavailableError at
 * every call (naming the cause) while the source keeps trying; the first
 * call after a WAL database is back opens it as a new generation, which the
 * worker ships and restore rebuilds exactly.
 */
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { BackupWorker } from '@x/backup-worker';
import { FakeClock } from '@x/lease';
import { restore } from '@x/restore';
import { MemoryStore } from '@x/store';
import { afterEach, describe, expect, it } from 'vitest';
import { sqliteContentHash as contentHash } from '../src/content-hash.ts';
import {
  SqliteDatabaseUnavailableError,
  SqliteNotWalError,
  SqliteOpenRefusedError,
} from '../src/sqlite-errors.ts';
import { sqliteMaterializer } from '../src/sqlite-materializer.ts';
import { SqliteSource } from '../src/sqlite-source.ts';
import { hashOf } from './harness.ts';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A database made beside `path` and renamed over it (a new inode, as a copy or restore leaves). */
function replaceWith(path: string, journalMode: 'WAL' | 'DELETE', rows: number): string {
  const other = `${path}.new`;
  const database = new DatabaseSync(other);
  database.exec(`PRAGMA journal_mode=${journalMode}`);
  database.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, body BLOB)');
  for (let i = 0; i < rows; i += 1) database.exec('INSERT INTO t (body) VALUES (randomblob(300))');
  const hash = contentHash(database);
  database.close();
  renameSync(other, path);
  return hash;
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected a rejection');
}

describe('a database file replaced underneath the source', () => {
  it('by a non-WAL file: a typed error at every call, never the closed tap; a WAL database back opens a new generation', async () => {
    const directory = mkdtempSync(join(tmpdir(), 'backupd-replaced-'));
    cleanups.push(() => rmSync(directory, { recursive: true, force: true }));
    const path = join(directory, 'app.db');
    replaceWith(path, 'WAL', 5);
    const source = SqliteSource.open({ path, captureIntervalMs: 0 });
    cleanups.push(() => source.close());
    const store = new MemoryStore();
    const worker = new BackupWorker({
      store,
      prefix: 'p',
      source,
      clock: new FakeClock(),
      manifestIntervalMs: 0,
    });
    await worker.runOnce();
    const first = await source.durablePosition();
    const oldTap = source.tap;

    replaceWith(path, 'DELETE', 3);
    for (let call = 0; call < 3; call += 1) {
      const error = await rejection(source.observe());
      expect(SqliteDatabaseUnavailableError.isInstance(error)).toBe(true);
      expect(SqliteNotWalError.isInstance((error as Error).cause)).toBe(true);
      expect((error as Error).message).toContain('journal_mode=delete');
    }
    expect(SqliteDatabaseUnavailableError.isInstance(await rejection(worker.runOnce()))).toBe(true);
    expect(
      SqliteDatabaseUnavailableError.isInstance(await rejection(source.durablePosition())),
    ).toBe(true);
    // The old file's tap is closed: nothing reads its descriptors again.
    expect(() => oldTap.capture()).toThrow(/closed/);

    // Something else again (not a database at all): still typed, the cause named.
    writeFileSync(`${path}.junk`, 'not a database');
    renameSync(`${path}.junk`, path);
    const junk = await rejection(source.observe());
    expect(SqliteOpenRefusedError.isInstance((junk as Error).cause)).toBe(true);
    expect(((junk as Error).cause as SqliteOpenRefusedError).code).toBe('SQLITE_NOT_A_DATABASE');

    const hash = replaceWith(path, 'WAL', 7);
    await worker.runOnce();
    const reopened = await source.durablePosition();
    expect(reopened.engineGeneration).not.toBe(first.engineGeneration);
    // One commit counted for the break, as at any new generation.
    expect(reopened.commitCount).toBe((first.commitCount ?? Number.NaN) + 1);
    await worker.runOnce();
    const target = join(directory, 'restored');
    await restore(store, 'p', target, {
      materializer: sqliteMaterializer({ databaseName: 'app.db' }),
    });
    expect(hashOf(join(target, 'app.db'), contentHash)).toBe(hash);
  });
});
