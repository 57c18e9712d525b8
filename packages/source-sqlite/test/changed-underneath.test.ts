/**
 * What the tap does when the database changes underneath it: each case with
 * its typed error, or its continue / new-generation behaviour.
 */
import {
  closeSync,
  copyFileSync,
  mkdtempSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  truncateSync,
  writeSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { afterEach, describe, expect, it } from 'vitest';
import {
  SqliteCaptureStoppedError,
  SqliteDatabaseReplacedError,
  SqliteNotWalError,
  SqliteWalRestartedUnderneathError,
} from '../src/sqlite-errors.ts';
import { SqliteTap } from '../src/tap.ts';

const directories: string[] = [];
const taps: SqliteTap[] = [];
const connections: DatabaseSync[] = [];
afterEach(() => {
  for (const tap of taps.splice(0)) tap.close();
  for (const connection of connections.splice(0)) if (connection.isOpen) connection.close();
  for (const directory of directories.splice(0))
    rmSync(directory, { recursive: true, force: true });
});

function database(journalMode = 'WAL') {
  const directory = mkdtempSync(join(tmpdir(), 'backupd-sqlite-underneath-'));
  directories.push(directory);
  const path = join(directory, 'app.db');
  const application = new DatabaseSync(path, { timeout: 0 });
  connections.push(application);
  application.exec(`PRAGMA journal_mode=${journalMode}; PRAGMA wal_autocheckpoint=0`);
  application.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, body BLOB)');
  const insert = (count: number) => {
    for (let i = 0; i < count; i += 1)
      application.prepare('INSERT INTO t (body) VALUES (randomblob(3000))').run();
  };
  return { directory, path, application, insert };
}

function open(path: string): SqliteTap {
  const tap = SqliteTap.open(path, { passiveCheckpointPages: 1000, truncateCheckpointPages: 5000 });
  taps.push(tap);
  tap.releaseSnapshot();
  return tap;
}

function walSalts(path: string): [number, number] {
  const bytes = readFileSync(`${path}-wal`);
  return [bytes.readUInt32BE(16), bytes.readUInt32BE(20)];
}

describe('SQLite tap: changed underneath', () => {
  it('refuses a database not in WAL mode, says how to switch, and never switches it', () => {
    const { path, application } = database('DELETE');
    let caught: unknown;
    try {
      SqliteTap.open(path);
    } catch (error) {
      caught = error;
    }
    expect(SqliteNotWalError.isInstance(caught)).toBe(true);
    expect((caught as SqliteNotWalError).journalMode).toBe('delete');
    expect((caught as Error).message).toContain('PRAGMA journal_mode=WAL;');
    const mode = application.prepare('PRAGMA journal_mode').get() as { journal_mode: string };
    expect(mode.journal_mode).toBe('delete');
  });

  it('continues across a WAL the application restarted itself (new salts), losing no commit', () => {
    const { path, application, insert } = database();
    const tap = open(path);
    insert(5);
    tap.maintain();
    tap.maintain(); // quiet: copies the rest and moves the reader to mark 0
    const before = walSalts(path);
    const truncate = application.prepare('PRAGMA wal_checkpoint(TRUNCATE)').get() as {
      busy: number;
    };
    expect(truncate.busy).toBe(0);
    insert(3);
    expect(walSalts(path)).not.toEqual(before);
    tap.capture();
    expect(tap.commits).toBe(8);
  });

  it('reports a database file replaced by another (new inode); a reopen starts a new generation', () => {
    const { path, directory, insert } = database();
    const tap = open(path);
    insert(2);
    tap.capture();
    const other = join(directory, 'other.db');
    const replacement = new DatabaseSync(other);
    replacement.exec('PRAGMA journal_mode=WAL; CREATE TABLE other (x)');
    replacement.close();
    renameSync(other, path);
    expect(() => tap.capture()).toThrow(SqliteDatabaseReplacedError);
    const reopened = open(path);
    expect(reopened.generationId).not.toBe(tap.generationId);
  });

  it('reports a database file truncated underneath', () => {
    const { path, application, insert } = database();
    insert(20);
    application.prepare('PRAGMA wal_checkpoint(TRUNCATE)').get();
    const tap = open(path);
    tap.capture();
    truncateSync(path, tap.pageSize * 2);
    let caught: unknown;
    try {
      tap.capture();
    } catch (error) {
      caught = error;
    }
    expect(SqliteCaptureStoppedError.isInstance(caught)).toBe(true);
    expect((caught as SqliteCaptureStoppedError).code).toBe('SQLITE_DATABASE_TRUNCATED');
    expect((caught as SqliteCaptureStoppedError).fileBytes).toBe(tap.pageSize * 2);
  });

  it('stops at the last valid commit before a corrupt committed frame and reports it', () => {
    const { path, insert } = database();
    const tap = open(path);
    insert(3);
    tap.capture();
    expect(tap.commits).toBe(3);
    const validLog = tap.logLength;
    const frameBytes = 24 + tap.pageSize;
    const firstNewFrame = tap.walFrames;
    insert(4);
    // Flip one byte inside the page of the first frame tap has not read.
    const fd = openSync(`${path}-wal`, 'r+');
    try {
      writeSync(fd, Buffer.from([0xa5]), 0, 1, 32 + firstNewFrame * frameBytes + 24 + 100);
    } finally {
      closeSync(fd);
    }
    let caught: unknown;
    try {
      tap.capture();
    } catch (error) {
      caught = error;
    }
    expect(SqliteCaptureStoppedError.isInstance(caught)).toBe(true);
    expect((caught as SqliteCaptureStoppedError).code).toBe('SQLITE_CORRUPT_WAL_FRAME');
    const error = caught as SqliteCaptureStoppedError;
    expect(error.frame).toBe(firstNewFrame + 1);
    expect(error.lastValidCommit).toBe(3);
    expect(tap.commits).toBe(3);
    expect(tap.logLength).toBe(validLog);
    // It keeps reporting, never skips past the bad frame.
    expect(() => tap.capture()).toThrow(SqliteCaptureStoppedError);
  });

  it('meta: an uncommitted (rolled back) tail with a bad checksum is not reported as corruption', () => {
    const { path, application, insert } = database();
    const tap = open(path);
    insert(2);
    // A big transaction spills frames into the WAL, then rolls back: frames
    // with this cycle's salts remain past the last commit.
    application.exec('PRAGMA cache_size=2');
    application.exec('BEGIN');
    for (let i = 0; i < 30; i += 1)
      application.prepare('INSERT INTO t (body) VALUES (randomblob(3000))').run();
    application.exec('ROLLBACK');
    insert(1);
    expect(() => tap.capture()).not.toThrow();
    expect(tap.commits).toBe(3);
  });

  it('reports a -wal file replaced by another (new inode); startGeneration begins a new generation', () => {
    const { path, directory, insert } = database();
    const tap = open(path);
    insert(2);
    tap.capture();
    const copy = join(directory, 'copy-wal');
    copyFileSync(`${path}-wal`, copy);
    renameSync(copy, `${path}-wal`);
    expect(() => tap.capture()).toThrow(SqliteWalRestartedUnderneathError);
    const before = tap.generationId;
    expect(tap.startGeneration()).not.toBe(before);
    expect(tap.commits).toBe(0);
    expect(tap.snapshot()).not.toBeNull();
  });
});
