/**
 * Opening a SQLite source names the real cause of each failure with its own
 * error, and never creates a database file at a missing path.
 *
 * Not covered: a read-only location (`SQLITE_READ_ONLY_LOCATION`). The tests
 * run as root, for whom a directory without write permission is still
 * writable, and a read-only filesystem needs a mount.
 */
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  SqliteDatabaseMissingError,
  SqliteNotWalError,
  SqliteOpenRefusedError,
} from '../src/sqlite-errors.ts';
import { SqliteSource } from '../src/sqlite-source.ts';
import { SqliteTap } from '../src/tap.ts';

let root: string;

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'sqlite-open-errors-'));
});

afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

function openError(path: string): unknown {
  try {
    SqliteSource.open({ path, captureIntervalMs: 0 }).close();
  } catch (error) {
    return error;
  }
  throw new Error(`opening ${path} did not fail`);
}

function createDatabase(path: string, journalMode: string): void {
  const database = new DatabaseSync(path);
  database.exec(
    `PRAGMA journal_mode=${journalMode}; CREATE TABLE t (x); INSERT INTO t VALUES (1);`,
  );
  database.close();
}

describe('opening a SQLite source', () => {
  it('names a missing database file and creates nothing there', async () => {
    const path = join(root, 'missing.db');
    const error = openError(path);
    expect(SqliteDatabaseMissingError.isInstance(error)).toBe(true);
    expect((error as Error).message).toContain(`${path} does not exist`);
    expect((error as SqliteDatabaseMissingError).code).toBe('SQLITE_DATABASE_MISSING');
    expect(existsSync(path)).toBe(false);
    expect(await readdir(root)).toEqual([]);
    // The tap on its own does not create it either.
    expect(() => SqliteTap.open(path)).toThrow(/does not exist/);
    expect(existsSync(path)).toBe(false);
  });

  it('refuses a bad maxHeldLogRecords or maxPageBaseBytes by name, before opening anything', async () => {
    const path = join(root, 'app.db');
    createDatabase(path, 'WAL');
    const before = await readdir(root);
    for (const [options, named] of [
      [{ maxHeldLogRecords: 0 }, /maxHeldLogRecords must be a whole number of at least 1, not 0/],
      [{ maxHeldLogRecords: 1.5 }, /maxHeldLogRecords .* not 1\.5/],
      [
        { maxPageBaseBytes: -1 },
        /maxPageBaseBytes must be a whole number of bytes \(0 or more\), not -1/,
      ],
      [{ maxPageBaseBytes: Number.NaN }, /maxPageBaseBytes .* not NaN/],
    ] as const) {
      expect(() => SqliteTap.open(path, options)).toThrow(named);
      expect(() => SqliteTap.open(path, options)).toThrow(RangeError);
    }
    // Nothing was opened: no -wal or -shm beside the database.
    expect(await readdir(root)).toEqual(before);
    // The bounds themselves open.
    SqliteTap.open(path, { maxHeldLogRecords: 1, maxPageBaseBytes: 0 }).close();
  });

  it('names a directory as not a file', async () => {
    const path = join(root, 'a-directory');
    await mkdir(path);
    const error = openError(path);
    expect(SqliteOpenRefusedError.isInstance(error)).toBe(true);
    expect((error as SqliteOpenRefusedError).code).toBe('SQLITE_NOT_A_FILE');
    expect((error as SqliteOpenRefusedError).kind).toBe('directory');
    expect((error as Error).message).toContain(`${path} is a directory, not a database file`);
  });

  it('names a file of random bytes as not a SQLite database', async () => {
    const path = join(root, 'random.db');
    const bytes = new Uint8Array(8192);
    crypto.getRandomValues(bytes);
    await writeFile(path, bytes);
    const error = openError(path);
    expect(SqliteOpenRefusedError.isInstance(error)).toBe(true);
    expect((error as SqliteOpenRefusedError).code).toBe('SQLITE_NOT_A_DATABASE');
    expect((error as Error).message).toContain(`${path} is not a SQLite database`);
    expect((error as Error).message).toContain('SQLite format 3');
    expect(Buffer.from(await readFile(path)).equals(Buffer.from(bytes))).toBe(true);
  });

  it('names a text file as not a SQLite database', async () => {
    const path = join(root, 'notes.txt');
    await writeFile(path, 'these are notes, not a database\n'.repeat(20));
    const error = openError(path);
    expect(SqliteOpenRefusedError.isInstance(error)).toBe(true);
    expect((error as SqliteOpenRefusedError).code).toBe('SQLITE_NOT_A_DATABASE');
    expect((error as Error).message).toContain(`${path} is not a SQLite database`);
  });

  it('names an empty file as not a SQLite database', async () => {
    const path = join(root, 'empty.db');
    await writeFile(path, '');
    const error = openError(path);
    expect(SqliteOpenRefusedError.isInstance(error)).toBe(true);
    expect((error as SqliteOpenRefusedError).code).toBe('SQLITE_NOT_A_DATABASE');
    expect((error as Error).message).toContain(
      `${path} is not a SQLite database (the file is empty)`,
    );
  });

  it('names a WAL database with a corrupt header as unreadable, not as another journal mode', async () => {
    const path = join(root, 'corrupt.db');
    createDatabase(path, 'WAL');
    const image = Buffer.from(await readFile(path));
    // Keep the magic, destroy the rest of the header (page size, versions...).
    image.fill(0xab, 16, 100);
    await writeFile(path, image);
    const error = openError(path);
    expect(SqliteOpenRefusedError.isInstance(error)).toBe(true);
    expect((error as SqliteOpenRefusedError).code).toBe('SQLITE_DATABASE_UNREADABLE');
    expect(SqliteNotWalError.isInstance(error)).toBe(false);
    expect((error as Error).message).toContain(
      `${path} looks like a SQLite database but SQLite cannot read it`,
    );
    expect((error as Error).message).toContain('corrupt');
  });

  it('reports another journal mode only for a valid database in it', async () => {
    const path = join(root, 'rollback.db');
    createDatabase(path, 'DELETE');
    const error = openError(path);
    expect(SqliteNotWalError.isInstance(error)).toBe(true);
    expect((error as SqliteNotWalError).journalMode).toBe('delete');
    expect((error as Error).message).toContain(`${path} uses journal_mode=delete`);
  });

  it('opens a valid WAL database', async () => {
    const path = join(root, 'good.db');
    createDatabase(path, 'WAL');
    const source = SqliteSource.open({ path, captureIntervalMs: 0 });
    try {
      expect((await source.durablePosition()).commitCount).toBe(0);
    } finally {
      await source.close();
    }
  });
});
