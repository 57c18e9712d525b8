import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { describe, expect, it } from 'vitest';
import { fingerprintOf } from './file-fingerprint.ts';

describe('fingerprintOf', () => {
  it('changes with a commit, and with a checkpoint that empties the WAL', () => {
    const path = join(mkdtempSync(join(tmpdir(), 'fingerprint-')), 'a.db');
    const database = new DatabaseSync(path);
    database.exec('PRAGMA journal_mode = WAL; CREATE TABLE t (x)');
    const before = fingerprintOf(path)!;
    database.exec('INSERT INTO t VALUES (1)');
    const committed = fingerprintOf(path)!;
    expect(committed.key).not.toBe(before.key);
    database.exec('PRAGMA wal_checkpoint(TRUNCATE)');
    const checkpointed = fingerprintOf(path)!;
    expect(checkpointed.key).not.toBe(committed.key);
    database.close();
    expect(checkpointed.changedAtMs).toBeGreaterThan(0);
  });

  it('counts an empty WAL as none, and a missing database as gone', () => {
    const directory = mkdtempSync(join(tmpdir(), 'fingerprint-'));
    const path = join(directory, 'a.db');
    writeFileSync(path, 'x');
    const alone = fingerprintOf(path)!;
    writeFileSync(`${path}-wal`, '');
    expect(fingerprintOf(path)!.key).toBe(alone.key);
    expect(fingerprintOf(join(directory, 'missing.db'))).toBeNull();
  });

  it('never throws: a path stat refuses gets a fingerprint that says why', () => {
    const refused = fingerprintOf(join(tmpdir(), 'x'.repeat(5000)));
    expect(refused).toEqual({ key: 'unreadable: ENAMETOOLONG', changedAtMs: null });
  });
});
