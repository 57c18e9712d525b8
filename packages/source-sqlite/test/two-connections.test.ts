/**
 * The SQLite behaviour the tap's safety rests on, measured with two
 * node:sqlite connections (written down in the README). If a SQLite upgrade
 * changed any of it, these fail before anything else does.
 */
import { execFileSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { afterEach, describe, expect, it } from 'vitest';

const directories: string[] = [];
afterEach(() => {
  for (const directory of directories.splice(0))
    rmSync(directory, { recursive: true, force: true });
});

function setUp() {
  const directory = mkdtempSync(join(tmpdir(), 'backupd-sqlite-facts-'));
  directories.push(directory);
  const path = join(directory, 'facts.db');
  // No busy wait: a busy checkpoint answers at once.
  const application = new DatabaseSync(path, { timeout: 0 });
  application.exec('PRAGMA journal_mode=WAL; PRAGMA wal_autocheckpoint=0; CREATE TABLE t(x)');
  const walHeader = () => {
    let bytes: Buffer;
    try {
      bytes = readFileSync(`${path}-wal`);
    } catch {
      return { length: 0, salt1: null, salt2: null, sequence: null };
    }
    if (bytes.length < 32)
      return { length: bytes.length, salt1: null, salt2: null, sequence: null };
    return {
      length: bytes.length,
      sequence: bytes.readUInt32BE(12),
      salt1: bytes.readUInt32BE(16),
      salt2: bytes.readUInt32BE(20),
    };
  };
  const checkpoint = (mode: string) =>
    ({ ...application.prepare(`PRAGMA wal_checkpoint(${mode})`).get() }) as {
      busy: number;
      log: number;
      checkpointed: number;
    };
  const reader = new DatabaseSync(path, { timeout: 1000 });
  const beginRead = () => {
    reader.exec('BEGIN');
    reader.prepare('SELECT count(*) FROM sqlite_schema').get();
  };
  return { path, application, reader, beginRead, walHeader, checkpoint };
}

describe('node:sqlite WAL facts the tap relies on', () => {
  it('a held read transaction (mark ≥ 1) makes TRUNCATE busy, copy only up to the mark and keep the salts', () => {
    const { application, reader, beginRead, walHeader, checkpoint } = setUp();
    for (let i = 0; i < 3; i += 1) application.exec(`INSERT INTO t VALUES (${i})`);
    beginRead();
    const before = walHeader();
    for (let i = 0; i < 3; i += 1) application.exec(`INSERT INTO t VALUES (${i})`);
    const result = checkpoint('TRUNCATE');
    expect(result.busy).toBe(1);
    expect(result.checkpointed).toBeLessThan(result.log);
    const after = walHeader();
    expect(after.salt1).toBe(before.salt1);
    expect(after.salt2).toBe(before.salt2);
    application.exec('INSERT INTO t VALUES (99)');
    expect(walHeader().length).toBeGreaterThan(after.length); // appended, not restarted
    reader.exec('ROLLBACK');
    // Without the reader the same checkpoint empties the WAL: the held reader is what protects the frames.
    expect(checkpoint('TRUNCATE').busy).toBe(0);
    expect(walHeader().length).toBe(0);
  });

  it('a read transaction begun on a fully checkpointed WAL (mark 0) lets nothing new be checkpointed', () => {
    const { application, reader, beginRead, checkpoint, walHeader } = setUp();
    application.exec('INSERT INTO t VALUES (1)');
    expect(checkpoint('PASSIVE')).toMatchObject({ busy: 0 });
    beginRead();
    application.exec('INSERT INTO t VALUES (2)');
    const truncate = checkpoint('TRUNCATE');
    expect(truncate.busy).toBe(1);
    expect(truncate.checkpointed).toBe(0);
    application.exec('INSERT INTO t VALUES (3)');
    expect(checkpoint('PASSIVE').checkpointed).toBe(0);
    expect(walHeader().length).toBeGreaterThan(0);
    reader.exec('ROLLBACK');
  });

  it('TRUNCATE on an empty WAL still restarts it: the checkpoint sequence is no frame counter', () => {
    const { application, checkpoint, walHeader, path } = setUp();
    application.exec('INSERT INTO t VALUES (1)');
    const first = walHeader();
    for (let i = 0; i < 3; i += 1) checkpoint('TRUNCATE');
    expect(statSync(`${path}-wal`).size).toBe(0);
    application.exec('INSERT INTO t VALUES (2)');
    const next = walHeader();
    expect(next.salt2).not.toBe(first.salt2);
    expect(next.sequence! - first.sequence!).toBe(3);
  });

  it('closing any descriptor of the -shm file drops the read marks this process holds', async () => {
    // Why the tap keeps its own descriptors open for its whole life. POSIX
    // locks are per process and inode, so only another process sees it.
    const { application, beginRead, path } = setUp();
    application.exec('INSERT INTO t VALUES (1)');
    beginRead();
    application.exec('INSERT INTO t VALUES (2)');
    const truncateElsewhere = () => {
      const script = `const { DatabaseSync } = require('node:sqlite');
        const d = new DatabaseSync(process.argv[1]);
        process.stdout.write(JSON.stringify({ ...d.prepare('PRAGMA wal_checkpoint(TRUNCATE)').get() }));`;
      const output = execFileSync(process.execPath, ['-e', script, path], { encoding: 'utf8' });
      return JSON.parse(output) as { busy: number };
    };
    expect(truncateElsewhere().busy).toBe(1);
    closeSync(openSync(`${path}-shm`, 'r'));
    expect(truncateElsewhere().busy).toBe(0);
  });
});
