/**
 * The application restarts the WAL while a new generation's snapshot reads
 * the WAL's frames (its overlay), placed there on purpose: the test wraps
 * `readSync` and commits from inside the tap's read.
 *
 * The set-up is the one where this can happen: every frame of the WAL is
 * already in the database file (a PASSIVE checkpoint copied them all), so
 * the tap's reader holds read mark 0 and the application's next commit
 * restarts the WAL and overwrites its frames from the start. The tap reads
 * the WAL in pieces of 1024 frames. After the first piece, the application
 * commits a transaction of more than 1024 frames; the tap's second piece then
 * finds the new cycle's frames, and the first piece alone holds older
 * versions of pages the database file already holds newer. The snapshot must
 * still be exactly the state after the application's transaction.
 */

import * as fs from 'node:fs';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { sqliteContentHash as contentHash } from '../src/content-hash.ts';
import { integrityCheck, restoreSqliteDatabase } from '../src/rebuild-database.ts';
import { SqliteTap } from '../src/tap.ts';
import { hashOf, openApplicationDatabase } from './harness.ts';

/** Called after every `readSync` of the code under test (set per test). */
const reads = vi.hoisted(() => ({
  after: null as null | ((fd: number, position: unknown) => void),
}));

vi.mock('node:fs', async (importOriginal) => {
  const real = await importOriginal<typeof import('node:fs')>();
  const readSync = (fd: number, ...rest: unknown[]): number => {
    const n = (real.readSync as (...args: unknown[]) => number)(fd, ...rest);
    reads.after?.(fd, rest[3]);
    return n;
  };
  return { ...real, default: { ...real, readSync }, readSync };
});

const ROWS = 1200;
const BODY_BYTES = 3000; // one row per leaf page at 4 KiB pages
const WAL_HEADER_BYTES = 32;

const cleanups: (() => void)[] = [];
afterEach(() => {
  reads.after = null;
  for (const cleanup of cleanups.splice(0).reverse()) cleanup();
});

function walSalts(path: string): string {
  return fs.readFileSync(`${path}-wal`).subarray(16, 24).toString('hex');
}

describe('a WAL restart while a new generation reads its snapshot', () => {
  it('leaves a snapshot equal to the state after the restarting commit', async () => {
    const { path, application } = openApplicationDatabase(
      'backupd-sqlite-restart-during-read-',
      cleanups,
    );
    const directory = dirname(path);
    application.exec('ALTER TABLE t ADD COLUMN n INTEGER');
    application.exec(
      `WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM k WHERE i < ${ROWS})
       INSERT INTO t SELECT i, randomblob(${BODY_BYTES}), 0 FROM k`,
    );
    application.exec('PRAGMA wal_checkpoint(TRUNCATE)');
    // One WAL cycle of 1100 one-frame transactions that rewrite the same 50
    // pages over and over: its first 1024 frames hold older versions of
    // pages that its last frames hold newer.
    const bump = application.prepare('UPDATE t SET n = n + 1 WHERE id = ?');
    for (let i = 0; i < 1100; i += 1) bump.run((i % 50) + 1);
    const copied = application.prepare('PRAGMA wal_checkpoint(PASSIVE)').get() as {
      log: number;
      checkpointed: number;
    };
    expect(copied.log).toBeGreaterThan(1024);
    expect(copied.checkpointed).toBe(copied.log);
    const before = contentHash(application);
    const saltsBefore = walSalts(path);

    // After the tap's first piece of the -wal file (offset 32, the first
    // frame), one transaction rewrites 1100 other pages: it restarts the WAL
    // and its frames overwrite the old cycle's past the first piece.
    const walIno = fs.statSync(`${path}-wal`).ino;
    let restartedDuringRead = false;
    reads.after = (fd, position) => {
      if (restartedDuringRead || position !== WAL_HEADER_BYTES) return;
      if (fs.fstatSync(fd).ino !== walIno) return;
      restartedDuringRead = true;
      application.exec(`UPDATE t SET body = randomblob(${BODY_BYTES}) WHERE id > 100`);
    };
    const tap = SqliteTap.open(path);
    cleanups.push(() => tap.close());
    reads.after = null;
    expect(restartedDuringRead).toBe(true);
    expect(walSalts(path)).not.toBe(saltsBefore);
    const after = contentHash(application);
    expect(after).not.toBe(before);

    const snapshot = tap.snapshot();
    if (snapshot === null) throw new Error('a new tap has no snapshot');
    const image: Uint8Array[] = [];
    for await (const chunk of snapshot.read()) image.push(chunk);
    const atSnapshot = join(directory, 'at-snapshot.db');
    await restoreSqliteDatabase({
      targetPath: atSnapshot,
      snapshot: Buffer.concat(image),
      log: [],
    });
    expect(integrityCheck(atSnapshot)).toBe('ok');
    expect(hashOf(atSnapshot, contentHash), 'the snapshot is the state after the restart').toBe(
      after,
    );

    // The generation's log starts right after the snapshot: one more commit
    // is one record, and snapshot plus log is the state after it.
    application.exec('INSERT INTO t VALUES (0, NULL, 0)');
    expect(tap.capture()).toBe(1);
    const last = contentHash(application);
    const log = tap.readLog(0, tap.logLength);
    if (log === null) throw new Error('the log is empty');
    const atLast = join(directory, 'at-last.db');
    await restoreSqliteDatabase({
      targetPath: atLast,
      snapshot: Buffer.concat(image),
      log: log.bytes,
    });
    expect(integrityCheck(atLast)).toBe('ok');
    expect(hashOf(atLast, contentHash)).toBe(last);
  });
});
