/**
 * No transaction is too large: one larger than a capture's byte budget is
 * read over several captures, each going on where the one before stopped
 * (never from the transaction's first frame again), each reading at most
 * its budget and one piece; into the held log, into a generation's
 * snapshot overlay, and under the write lock of a forced restart. Frames
 * the wal-index does not count as committed (a transaction being written,
 * or rolled back) are never taken, and a committed frame failing its
 * checksum inside a large transaction is reported, not read forever.
 *
 * What each capture reads is counted at `readSync` on the `-wal` file.
 */
import { closeSync, openSync, readSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { describe, expect, it, vi } from 'vitest';
import { sqliteContentHash as contentHash } from '../src/content-hash.ts';
import { restoreSqliteDatabase } from '../src/rebuild-database.ts';
import { SqliteCaptureStoppedError } from '../src/sqlite-errors.ts';
import { SqliteTap } from '../src/tap.ts';
import { READ_CHUNK_FRAMES } from '../src/wal-capture.ts';
import { WAL_FRAME_HEADER_BYTES, WAL_HEADER_BYTES } from '../src/wal-file.ts';
import { hashOf, testWorkspace } from './harness.ts';

const walReads = vi.hoisted(() => ({ bytes: 0 }));

vi.mock('node:fs', async (importOriginal) => {
  const actual = await importOriginal<typeof import('node:fs')>();
  const counted = ((fd: number, ...rest: unknown[]) => {
    const read = (actual.readSync as (...args: unknown[]) => number)(fd, ...rest);
    try {
      if (actual.readlinkSync(`/proc/self/fd/${fd}`).endsWith('-wal')) walReads.bytes += read;
    } catch {
      // Not a descriptor /proc can name: not the WAL.
    }
    return read;
  }) as typeof actual.readSync;
  return { ...actual, readSync: counted, default: { ...actual, readSync: counted } };
});

const PAGE_SIZE = 4096;
const FRAME_BYTES = WAL_FRAME_HEADER_BYTES + PAGE_SIZE;
const PIECE_BYTES = READ_CHUNK_FRAMES * FRAME_BYTES;
const BUDGET = 16 * 1024 * 1024;
const MIB = 1024 * 1024;

const workspace = testWorkspace();

function openApplication(directory: string): { path: string; application: DatabaseSync } {
  const path = join(directory, 'app.db');
  const application = new DatabaseSync(path, { timeout: 5000 });
  // A small page cache: a large transaction spills frames into the WAL
  // before its commit, as large ones do.
  application.exec(
    'PRAGMA journal_mode=WAL; PRAGMA wal_autocheckpoint=0; PRAGMA cache_size=-1024;',
  );
  application.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, body BLOB)');
  application.exec("INSERT INTO t (body) VALUES ('before')");
  workspace.onCleanup(() => application.close());
  return { path, application };
}

/** One transaction of `mib` rows of 1 MiB (random, so no two pages are alike). */
function largeTransaction(application: DatabaseSync, mib: number): void {
  application.exec('BEGIN');
  const insert = application.prepare('INSERT INTO t (body) VALUES (randomblob(?))');
  for (let i = 0; i < mib; i += 1) insert.run(MIB);
  application.exec('COMMIT');
}

async function snapshotOf(tap: SqliteTap): Promise<Buffer> {
  const chunks: Uint8Array[] = [];
  for await (const chunk of tap.snapshot()!.read()) chunks.push(chunk);
  return Buffer.concat(chunks);
}

async function restoredHash(
  directory: string,
  name: string,
  snapshot: Uint8Array,
  log: Uint8Array,
): Promise<string> {
  const target = join(directory, `${name}.db`);
  await restoreSqliteDatabase({ targetPath: target, snapshot, log });
  return hashOf(target, contentHash);
}

function openTap(path: string, options: Parameters<typeof SqliteTap.open>[1] = {}): SqliteTap {
  const tap = SqliteTap.open(path, { captureBudgetBytes: BUDGET, ...options });
  workspace.onCleanup(() => tap.close());
  return tap;
}

/** Captures until caught up (at most `limit` calls); the WAL bytes each call read. */
function captureAll(tap: SqliteTap, limit: number): number[] {
  const reads: number[] = [];
  do {
    const before = walReads.bytes;
    tap.capture();
    reads.push(walReads.bytes - before);
  } while (!tap.caughtUp && reads.length < limit);
  return reads;
}

describe('a transaction larger than the capture budget', () => {
  it('is captured over a few captures, each within the budget and one piece, and restores exactly', async () => {
    const directory = workspace.directory('large-transaction');
    const { path, application } = openApplication(directory);
    const tap = openTap(path, { maxHeldLogBytes: 1 << 30 });
    const snapshot = await snapshotOf(tap);
    tap.releaseSnapshot();

    largeTransaction(application, 40);
    const expected = contentHash(application);

    const first = captureAll(tap, 1);
    // Read in part: nothing taken yet, not caught up, and no restart.
    expect(tap.caughtUp).toBe(false);
    expect(tap.commits).toBe(0);
    // (The restart captures first, within the budget too.)
    const beforeRestart = walReads.bytes;
    const refused = tap.checkpoint('truncate');
    expect(refused.walRestartable).toBe(false);
    const restartRead = walReads.bytes - beforeRestart;

    const reads = [...first, restartRead, ...captureAll(tap, 20)];
    expect(tap.caughtUp).toBe(true);
    expect(tap.commits).toBe(1);
    // 40 MiB in captures of 16 MiB and a piece: three, never from the start again.
    expect(reads.filter((read) => read > 0).length).toBeLessThanOrEqual(3);
    for (const read of reads) expect(read).toBeLessThanOrEqual(BUDGET + PIECE_BYTES + 2 * 32);
    const walBytes = WAL_HEADER_BYTES + tap.walFrames * FRAME_BYTES;
    const total = reads.reduce((sum, read) => sum + read, 0);
    expect(total).toBeGreaterThanOrEqual(40 * MIB);
    expect(total).toBeLessThanOrEqual(walBytes + reads.length * (PIECE_BYTES + 2 * 32));

    const log = tap.readLog(0, tap.logLength)!;
    expect(await restoredHash(directory, 'restored', snapshot, log.bytes)).toBe(expected);
    // Caught up: the reader moves and the WAL restarts.
    tap.releaseLog(tap.logLength);
    expect(tap.checkpoint('truncate').walRestartable).toBe(true);
  }, 60_000);

  it('is read into the snapshot overlay at a generation start once, even when a capture had read part of it', async () => {
    const directory = workspace.directory('large-overlay');
    const { path, application } = openApplication(directory);
    const tap = openTap(path);
    await snapshotOf(tap);
    tap.releaseSnapshot();

    largeTransaction(application, 40);
    const expected = contentHash(application);
    captureAll(tap, 1);
    expect(tap.caughtUp).toBe(false);

    // The part read is dropped with the generation: the overlay reads the WAL from its start.
    const before = walReads.bytes;
    tap.startGeneration();
    const overlayRead = walReads.bytes - before;
    expect(tap.caughtUp).toBe(true);
    const walBytes = WAL_HEADER_BYTES + tap.walFrames * FRAME_BYTES;
    expect(tap.walFrames).toBeGreaterThan((40 * MIB) / PAGE_SIZE);
    expect(overlayRead).toBeGreaterThanOrEqual(40 * MIB);
    expect(overlayRead).toBeLessThanOrEqual(walBytes + PIECE_BYTES);

    const snapshot = await snapshotOf(tap);
    tap.releaseSnapshot();
    expect(await restoredHash(directory, 'at-start', snapshot, new Uint8Array(0))).toBe(expected);
    // And the log after it.
    largeTransaction(application, 20);
    application.exec("UPDATE t SET body = 'after' WHERE id = 1");
    const later = contentHash(application);
    captureAll(tap, 10);
    expect(tap.commits).toBe(2);
    const log = tap.readLog(0, tap.logLength)!;
    expect(await restoredHash(directory, 'after', snapshot, log.bytes)).toBe(later);
  }, 60_000);

  it('is read whole, from where a capture stopped, by a forced restart under the write lock', async () => {
    const directory = workspace.directory('large-forced');
    const { path, application } = openApplication(directory);
    // A low threshold: 60 MiB of WAL is far past twice it, so the restart is forced.
    const tap = openTap(path, { truncateCheckpointPages: 1000, maxHeldLogBytes: 1 << 30 });
    const snapshot = await snapshotOf(tap);
    tap.releaseSnapshot();

    largeTransaction(application, 60);
    const expected = contentHash(application);
    const first = captureAll(tap, 1)[0]!;
    expect(tap.caughtUp).toBe(false);

    const before = walReads.bytes;
    const report = tap.maintain();
    const underLock = walReads.bytes - before;
    expect(tap.forcedRestarts).toBe(1);
    expect(report?.walRestartable).toBe(true);
    expect(tap.commits).toBe(1);
    // The rest only: what the capture before had read is not read again.
    const walBytes = WAL_HEADER_BYTES + 60 * MIB;
    expect(first + underLock).toBeLessThanOrEqual(walBytes + 2 * PIECE_BYTES);

    const log = tap.readLog(0, tap.logLength)!;
    expect(await restoredHash(directory, 'restored', snapshot, log.bytes)).toBe(expected);
  }, 60_000);

  it('takes nothing of a transaction still being written or rolled back', async () => {
    const directory = workspace.directory('large-uncommitted');
    const { path, application } = openApplication(directory);
    const tap = openTap(path, { maxHeldLogBytes: 1 << 30 });
    const snapshot = await snapshotOf(tap);
    tap.releaseSnapshot();
    const before = contentHash(application);

    // Spilled into the WAL, not committed: nothing to take.
    application.exec('BEGIN');
    const insert = application.prepare('INSERT INTO t (body) VALUES (randomblob(?))');
    for (let i = 0; i < 24; i += 1) insert.run(MIB);
    const beingWritten = walReads.bytes;
    captureAll(tap, 1);
    expect(walReads.bytes - beingWritten).toBeLessThan(PIECE_BYTES);
    expect(tap.caughtUp).toBe(true);
    expect(tap.commits).toBe(0);
    application.exec('ROLLBACK');
    captureAll(tap, 10);
    expect(tap.commits).toBe(0);

    // A small commit over the rolled-back frames, then a large one: both, and nothing else.
    application.exec("INSERT INTO t (body) VALUES ('small')");
    captureAll(tap, 10);
    expect(tap.commits).toBe(1);
    largeTransaction(application, 24);
    const expected = contentHash(application);
    expect(expected).not.toBe(before);
    const reads = captureAll(tap, 10);
    expect(reads.length).toBeLessThanOrEqual(2);
    expect(tap.commits).toBe(2);
    const log = tap.readLog(0, tap.logLength)!;
    expect(await restoredHash(directory, 'restored', snapshot, log.bytes)).toBe(expected);
  }, 60_000);

  it('is a SqliteCaptureStoppedError (SQLITE_CORRUPT_WAL_FRAME) when one of its committed frames fails its checksum', async () => {
    const directory = workspace.directory('large-corrupt');
    const { path, application } = openApplication(directory);
    const tap = openTap(path);
    await snapshotOf(tap);
    tap.releaseSnapshot();
    largeTransaction(application, 40);

    // A byte of a page in the second capture's part of the transaction.
    const badFrame = Math.floor(BUDGET / FRAME_BYTES) + 3 * READ_CHUNK_FRAMES;
    const offset = WAL_HEADER_BYTES + (badFrame - 1) * FRAME_BYTES + WAL_FRAME_HEADER_BYTES + 100;
    const wal = openSync(`${path}-wal`, 'r+');
    const byte = new Uint8Array(1);
    readSync(wal, byte, 0, 1, offset);
    byte[0] = byte[0]! ^ 0xff;
    writeSync(wal, byte, 0, 1, offset);
    closeSync(wal);

    let error: unknown = null;
    for (let call = 0; call < 10 && error === null; call += 1) {
      try {
        tap.capture();
      } catch (thrown) {
        error = thrown;
      }
    }
    expect(SqliteCaptureStoppedError.isInstance(error)).toBe(true);
    expect((error as SqliteCaptureStoppedError).code).toBe('SQLITE_CORRUPT_WAL_FRAME');
    expect((error as SqliteCaptureStoppedError).frame).toBe(badFrame);
    expect((error as SqliteCaptureStoppedError).walOffset).toBe(
      WAL_HEADER_BYTES + (badFrame - 1) * FRAME_BYTES,
    );
    expect(tap.commits).toBe(0);
  }, 60_000);
});
