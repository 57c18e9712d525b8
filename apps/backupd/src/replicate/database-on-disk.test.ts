import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { afterAll, describe, expect, it } from 'vitest';
import { databaseOnDisk, describeOnDisk } from './database-on-disk.ts';

const directory = mkdtempSync(join(tmpdir(), 'database-on-disk-'));
afterAll(() => rmSync(directory, { recursive: true, force: true }));

describe('databaseOnDisk', () => {
  it('a WAL database with an empty schema and no frames is empty', () => {
    const path = join(directory, 'empty.db');
    const db = new DatabaseSync(path);
    db.exec('PRAGMA journal_mode=WAL');
    db.close();
    expect(databaseOnDisk(path)).toMatchObject({ state: 'empty', pages: 1, walFrames: 0 });
  });

  it('a table, or commits still in the WAL, are content; frames are counted from the WAL length', () => {
    const path = join(directory, 'content.db');
    const db = new DatabaseSync(path);
    db.exec('PRAGMA journal_mode=WAL; CREATE TABLE t (x)');
    for (let i = 0; i < 10; i += 1) db.exec(`INSERT INTO t VALUES (${i})`);
    const open = databaseOnDisk(path);
    expect(open.state).toBe('content');
    expect(open.walFrames).toBeGreaterThanOrEqual(11);
    expect(describeOnDisk(open)).toMatch(
      /has \d+ bytes \(\d+ pages\) and its WAL \d+ bytes \(up to \d+ frames\)/,
    );
    db.close();
    expect(databaseOnDisk(path)).toMatchObject({ state: 'content', walBytes: 0, walFrames: 0 });
  });

  it('a zero-length file is empty; a missing one, a directory or another file are not', () => {
    const zero = join(directory, 'zero.db');
    writeFileSync(zero, '');
    expect(databaseOnDisk(zero).state).toBe('empty');
    expect(databaseOnDisk(join(directory, 'absent.db')).state).toBe('missing');
    expect(databaseOnDisk(directory).state).toBe('unreadable');
    const other = join(directory, 'other.db');
    writeFileSync(other, 'not a database');
    expect(databaseOnDisk(other).state).toBe('content');
  });
});
