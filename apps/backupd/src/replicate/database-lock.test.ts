/**
 * The lock files beside a database and the instance id kept in them. That
 * the kernel releases the lock of a killed holder, and that a second
 * replicate is refused, is tested through the command with real processes
 * (test/one-replicate-per-database.test.ts).
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { lockDatabase, lockFiles } from './database-lock.ts';

const directory = mkdtempSync(join(tmpdir(), 'backupd-database-lock-'));
afterAll(() => rmSync(directory, { recursive: true, force: true }));

describe('the database lock beside the database', () => {
  it('is named after the database, beside it, and a symbolic link of the database shares it', () => {
    const database = join(directory, 'app.db');
    writeFileSync(database, '');
    symlinkSync(database, join(directory, 'link.db'));
    const files = lockFiles(join(directory, 'link.db'));
    expect(files).toEqual(lockFiles(database));
    expect(files.lock.endsWith('/.app.db-backupd/lock')).toBe(true);
    expect(files.holder.endsWith('/.app.db-backupd/holder.json')).toBe(true);
  });

  it('keeps the instance id of an earlier holder on this host, and a new one for a record of another host', () => {
    const database = join(directory, 'kept.db');
    const first = lockDatabase(database, ['file:///backups']);
    const written = JSON.parse(readFileSync(first.files.holder, 'utf8'));
    expect(written).toMatchObject({
      instanceId: first.instanceId,
      host: hostname(),
      pid: process.pid,
      replicas: ['file:///backups'],
    });
    expect(first.reused).toBe(false);
    first.release();

    const second = lockDatabase(database, []);
    expect(second.reused).toBe(true);
    expect(second.instanceId).toBe(first.instanceId);
    second.release();

    // The directory copied to another host: its id is not that host's to reuse.
    writeFileSync(second.files.holder, JSON.stringify({ ...written, host: `not-${hostname()}` }));
    const third = lockDatabase(database, []);
    expect(third.reused).toBe(false);
    expect(third.instanceId).not.toBe(first.instanceId);
    third.release();
  });

  it('a holder record that is not one is replaced, with a new id', () => {
    const database = join(directory, 'garbled.db');
    mkdirSync(dirname(lockFiles(database).holder), { recursive: true });
    writeFileSync(lockFiles(database).holder, '{"instanceId": 5}');
    const lock = lockDatabase(database, []);
    expect(lock.reused).toBe(false);
    expect(lock.instanceId).toMatch(/^[0-9a-f]{32}$/);
    lock.release();
  });
});
