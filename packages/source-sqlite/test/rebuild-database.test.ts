/**
 * SQLite restore: to a commit number, to a time, atomic, refuses to overwrite
 * without force, never leaves an old WAL beside the restored file, and leaves
 * nothing behind when a check fails.
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { afterEach, describe, expect, it } from 'vitest';
import { encodeCommitFrame, pageHash } from '../src/commit-record.ts';
import { sqliteContentHash as contentHash } from '../src/content-hash.ts';
import { restoreSqliteDatabase } from '../src/rebuild-database.ts';
import { SqliteRestoreCorruptError } from '../src/sqlite-errors.ts';
import { SqliteTap } from '../src/tap.ts';
import { hashOf } from './harness.ts';

const directories: string[] = [];
afterEach(() => {
  for (const directory of directories.splice(0))
    rmSync(directory, { recursive: true, force: true });
});

/** A database with 6 commits captured by a tap, commit times 1000, 2000, … 6000. */
async function capturedDatabase() {
  const directory = mkdtempSync(join(tmpdir(), 'backupd-sqlite-restore-'));
  directories.push(directory);
  const path = join(directory, 'app.db');
  const application = new DatabaseSync(path);
  application.exec('PRAGMA journal_mode=WAL; CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)');
  let now = 0;
  const tap = SqliteTap.open(path, { wallNow: () => now });
  const snapshotChunks: Uint8Array[] = [];
  for await (const chunk of tap.snapshot()!.read()) snapshotChunks.push(chunk);
  const snapshot = Buffer.concat(snapshotChunks);
  tap.releaseSnapshot();
  const hashes = [contentHash(application)];
  for (let commit = 1; commit <= 6; commit += 1) {
    application.prepare('INSERT INTO t (v) VALUES (?)').run(`row ${commit}`);
    now = commit * 1000;
    tap.capture();
    hashes.push(contentHash(application));
  }
  const log = tap.readLog(0, tap.logLength)!.bytes;
  tap.close();
  application.close();
  return { directory, snapshot, log, hashes };
}

describe('restoreSqliteDatabase', () => {
  it('restores every commit number exactly, and the newest commit at or before a time', async () => {
    const { directory, snapshot, log, hashes } = await capturedDatabase();
    for (let commit = 0; commit <= 6; commit += 1) {
      const target = join(directory, `commit-${commit}.db`);
      await restoreSqliteDatabase({ targetPath: target, snapshot, log, commits: commit });
      expect(hashOf(target, contentHash)).toBe(hashes[commit]);
    }
    const byTime = join(directory, 'by-time.db');
    const result = await restoreSqliteDatabase({ targetPath: byTime, snapshot, log, time: 3500 });
    expect(result.commitsApplied).toBe(3);
    expect(result.lastCommitTime).toBe(3000);
    expect(hashOf(byTime, contentHash)).toBe(hashes[3]);
    const latest = join(directory, 'latest.db');
    expect(
      (await restoreSqliteDatabase({ targetPath: latest, snapshot, log })).commitsApplied,
    ).toBe(6);
  });

  it('restores the same from a log that arrives in chunks of any size, a record split across many', async () => {
    const { directory, snapshot, log, hashes } = await capturedDatabase();
    for (const size of [1, 3, 7, 64, 4099, log.byteLength]) {
      const chunks = function* () {
        for (let at = 0; at < log.byteLength; at += size) yield log.subarray(at, at + size);
      };
      for (const commits of [undefined, 4]) {
        const target = join(directory, `chunks-${size}-${commits ?? 'latest'}.db`);
        const result = await restoreSqliteDatabase({
          targetPath: target,
          snapshot,
          log: chunks(),
          ...(commits === undefined ? {} : { commits }),
        });
        expect(result.commitsApplied, `chunks of ${size}`).toBe(commits ?? 6);
        expect(hashOf(target, contentHash)).toBe(hashes[commits ?? 6]);
      }
    }
    // A log cut inside a record: the commits before it, or a refusal when more were asked for.
    const cut = log.subarray(0, log.byteLength - 5);
    await expect(
      restoreSqliteDatabase({
        targetPath: join(directory, 'cut.db'),
        snapshot,
        log: cut,
        commits: 6,
      }),
    ).rejects.toThrow(SqliteRestoreCorruptError);
  });

  it('refuses a commit the log does not hold, and a time before the snapshot', async () => {
    const { directory, snapshot, log } = await capturedDatabase();
    const target = join(directory, 'x.db');
    await expect(
      restoreSqliteDatabase({ targetPath: target, snapshot, log, commits: 7 }),
    ).rejects.toMatchObject({
      name: 'SqliteRestoreRefusedError',
      code: 'SQLITE_RESTORE_POINT_UNAVAILABLE',
    });
    await expect(
      restoreSqliteDatabase({ targetPath: target, snapshot, log, time: 5, snapshotTime: 10 }),
    ).rejects.toMatchObject({
      name: 'SqliteRestoreRefusedError',
      code: 'SQLITE_RESTORE_POINT_UNAVAILABLE',
    });
    expect(readdirSync(directory).filter((name) => name.includes('x.db'))).toEqual([]);
  });

  it('refuses to overwrite a database (or a stray -wal) unless forced; forced, removes the old -wal first', async () => {
    const { directory, snapshot, log, hashes } = await capturedDatabase();
    const target = join(directory, 'target.db');
    writeFileSync(`${target}-wal`, 'stale wal of another database');
    await expect(
      restoreSqliteDatabase({ targetPath: target, snapshot, log }),
    ).rejects.toMatchObject({
      name: 'SqliteRestoreRefusedError',
      code: 'SQLITE_RESTORE_TARGET_EXISTS',
    });
    expect(existsSync(target)).toBe(false);
    await restoreSqliteDatabase({ targetPath: target, snapshot, log, commits: 2, force: true });
    expect(existsSync(`${target}-wal`)).toBe(false);
    expect(hashOf(target, contentHash)).toBe(hashes[2]);
    await expect(
      restoreSqliteDatabase({ targetPath: target, snapshot, log }),
    ).rejects.toMatchObject({
      name: 'SqliteRestoreRefusedError',
      code: 'SQLITE_RESTORE_TARGET_EXISTS',
    });
    await restoreSqliteDatabase({ targetPath: target, snapshot, log, force: true });
    expect(hashOf(target, contentHash)).toBe(hashes[6]);
  });

  it('leaves nothing at the target when a log frame fails its CRC', async () => {
    const { directory, snapshot, log } = await capturedDatabase();
    const damaged = log.slice();
    damaged[damaged.byteLength - 10]! ^= 0xff;
    const target = join(directory, 'damaged.db');
    await expect(
      restoreSqliteDatabase({ targetPath: target, snapshot, log: damaged }),
    ).rejects.toThrow(SqliteRestoreCorruptError);
    expect(readdirSync(directory).filter((name) => name.includes('damaged'))).toEqual([]);
  });

  it('leaves nothing at the target when the image fails integrity_check', async () => {
    const { directory, snapshot, log } = await capturedDatabase();
    const broken = Buffer.from(snapshot);
    // Garbage over the header of page 2 (the table's root page).
    const pageSize = broken.readUInt16BE(16);
    broken.fill(0x42, pageSize, pageSize + 8);
    const target = join(directory, 'broken.db');
    await expect(
      restoreSqliteDatabase({ targetPath: target, snapshot: broken, log, commits: 0 }),
    ).rejects.toThrow(SqliteRestoreCorruptError);
    expect(readdirSync(directory).filter((name) => name.includes('broken'))).toEqual([]);
  });

  it('refuses a page rebuilt from a patch that the tap captured as another page (its recorded hash)', async () => {
    const directory = mkdtempSync(join(tmpdir(), 'backupd-sqlite-restore-'));
    directories.push(directory);
    const source = join(directory, 'source.db');
    const application = new DatabaseSync(source);
    application.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT)');
    const insert = application.prepare("INSERT INTO t (body) VALUES (printf('%0800d', ?))");
    for (let row = 0; row < 4; row += 1) insert.run(row);
    application.close();
    const snapshot = readFileSync(source);
    const pageSize = snapshot.readUInt16BE(16);
    // Page 2 holds the rows: a run of '0' digits in one of them.
    const page = snapshot.subarray(pageSize, 2 * pageSize);
    const digits = page.indexOf('0'.repeat(100));
    expect(digits).toBeGreaterThan(0);
    const patch = { offset: digits, bytes: Buffer.from('7') };
    // The version the patch was computed over differs ten bytes on.
    const capturedBase = Buffer.from(page);
    capturedBase[digits + 10] = '1'.charCodeAt(0);
    const log = (over: Uint8Array) => {
      const version = Buffer.from(over);
      version.set(patch.bytes, patch.offset);
      return encodeCommitFrame({
        pageSize,
        databasePages: snapshot.byteLength / pageSize,
        commitTime: 1,
        walSalt1: 0,
        walSalt2: 0,
        commitFrame: 0,
        pages: new Map(),
        patches: new Map([[2, [patch]]]),
        patchHashes: new Map([[2, pageHash(version)]]),
      });
    };

    const sound = join(directory, 'sound.db');
    await restoreSqliteDatabase({ targetPath: sound, snapshot, log: log(page) });
    const wrong = join(directory, 'wrong.db');
    const refusal = await restoreSqliteDatabase({
      targetPath: wrong,
      snapshot,
      log: log(capturedBase),
    }).catch((error: unknown) => error);
    expect(SqliteRestoreCorruptError.isInstance(refusal)).toBe(true);
    const pageHashFinding = (refusal as SqliteRestoreCorruptError).pageHash;
    expect(pageHashFinding).toMatchObject({ page: 2, commit: 1 });
    expect(pageHashFinding!.found).not.toBe(pageHashFinding!.expected);
    expect((refusal as Error).message).toMatch(
      /page 2 rebuilt from a patch hashes [0-9a-f]{16}, and commit 1 of the log recorded [0-9a-f]{16}/,
    );
    expect(existsSync(wrong)).toBe(false);
    // SQLite itself finds nothing wrong with that page: only the hash does.
    await restoreSqliteDatabase({
      targetPath: wrong,
      snapshot,
      log: log(capturedBase),
      checkPageHashes: false,
    });
    expect(hashOf(wrong, contentHash)).not.toBe(hashOf(source, contentHash));
  });
});
