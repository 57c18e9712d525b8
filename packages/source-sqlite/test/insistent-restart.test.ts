/**
 * The insistent restart (README, "How large the WAL gets"): where the tap
 * gets the write lock only now and then, the ordinary restart lets go of its
 * first take when commits landed since its copy and then fails to take the
 * lock again; a restart that insists uses that first take to the end. The
 * tap's writer connection here is scripted: its first `BEGIN IMMEDIATE`
 * finds one commit of the application's landed since the tap's copy, and
 * every later one finds the lock busy. Deterministic: no second process, no
 * timing.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { afterEach, describe, expect, it } from 'vitest';
import { type CheckpointContext, runCheckpoint } from '../src/checkpoints.ts';
import { CopyProgress } from '../src/copy-progress.ts';
import { HeldLog } from '../src/held-log.ts';
import { HeldReaders, READER_BUSY_TIMEOUT_MS } from '../src/held-readers.ts';
import { openTapConnection, openWriterConnection } from '../src/open-database.ts';
import { QuietOpener } from '../src/quiet-descriptors.ts';
import { SqliteTap } from '../src/tap.ts';
import { resolveTapOptions } from '../src/tap-options.ts';
import { WalCapture } from '../src/wal-capture.ts';

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0).reverse()) cleanup();
});

/** SQLite's SQLITE_BUSY as node:sqlite reports it. */
function busy(): Error {
  return Object.assign(new Error('database is locked'), { errcode: 5 });
}

function setUp(tapOptions: { captureBudgetBytes?: number } = {}, rows = 50) {
  const directory = mkdtempSync(join(tmpdir(), 'backupd-insistent-restart-'));
  cleanups.push(() => rmSync(directory, { recursive: true, force: true }));
  const path = join(directory, 'app.db');
  const application = new DatabaseSync(path, { timeout: 5000 });
  application.exec('PRAGMA journal_mode=WAL; PRAGMA wal_autocheckpoint=0;');
  application.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)');
  const insert = application.prepare('INSERT INTO t (v) VALUES (?)');
  for (let i = 0; i < rows; i += 1) insert.run(`row ${i}`);

  const options = resolveTapOptions({ busyTimeoutMs: 2, ...tapOptions });
  const realWriter = openWriterConnection(path, 0);
  const readers = new HeldReaders([
    openTapConnection(path, READER_BUSY_TIMEOUT_MS),
    openTapConnection(path, READER_BUSY_TIMEOUT_MS),
  ]);
  const opener = new QuietOpener();
  const progress = new CopyProgress();
  const log = new HeldLog(4096, { maxHeldLogBytes: 1 << 30 });
  const capture = new WalCapture({
    path,
    pageSize: 4096,
    opener,
    wallNow: Date.now,
    progress,
    keptCommits: () => log.commits,
  });
  cleanups.push(() => {
    readers.close();
    realWriter.close();
    capture.close();
    application.close();
  });
  let takes = 0;
  const writer = {
    exec(sql: string): void {
      if (sql === 'BEGIN IMMEDIATE') {
        takes += 1;
        // The first take: one commit landed since the tap's copy. Later
        // takes: the application holds the lock.
        if (takes === 1) insert.run('landed after the copy');
        else throw busy();
      }
      realWriter.exec(sql);
    },
  } as unknown as DatabaseSync;
  const captureIntoLog = (budgetBytes: number) => capture.read(log, budgetBytes);
  const context: CheckpointContext = {
    options,
    readers,
    writer,
    capture,
    progress,
    captureIntoLog,
    advance: () => {
      captureIntoLog(options.captureBudgetBytes);
      if (capture.caughtUp) readers.moveForward();
    },
  };
  context.advance();
  return { context, log, takes: () => takes };
}

describe('a restart where the tap gets the write lock only now and then', () => {
  it('insisting, restarts the WAL on its first take, with every commit captured', () => {
    const { context, log, takes } = setUp();
    const report = runCheckpoint('truncate', context, 'insist');
    expect(takes()).toBe(1);
    expect(report.busy).toBe(false);
    expect(report.walRestartable).toBe(true);
    // 50 rows and the commit that landed after the copy (the table's
    // creation came before the tap's first capture too).
    expect(log.commits + log.batchedCommits).toBe(52);
  });

  it('not insisting, lets go of that take and does not restart (what the insistent restart fixes)', () => {
    const { context, takes } = setUp();
    const report = runCheckpoint('truncate', context, 'ordinary');
    expect(takes()).toBeGreaterThan(1);
    expect(report.busy).toBe(true);
    expect(report.walRestartable).toBe(false);
  });
});

describe('a restart with a capture backlog past one capture budget', () => {
  // The capture reads in pieces of 1024 frames and stops between pieces
  // once past its budget: one frame's worth of budget against a backlog of
  // three thousand frames (one per commit) leaves most of it unread.
  const captureBudgetBytes = 24 + 4096;
  const rows = 3000;

  it('forced, reads the whole backlog under its first take and restarts the WAL', () => {
    const { context, log, takes } = setUp({ captureBudgetBytes }, rows);
    expect(context.capture.caughtUp).toBe(false);
    const report = runCheckpoint('truncate', context, 'force');
    expect(takes()).toBe(1);
    expect(report.busy).toBe(false);
    expect(report.walRestartable).toBe(true);
    expect(log.commits + log.batchedCommits).toBe(rows + 2);
  });

  it('insisting, does not restart (what forcing fixes: such a tap never catches up)', () => {
    const { context } = setUp({ captureBudgetBytes }, rows);
    expect(context.capture.caughtUp).toBe(false);
    const report = runCheckpoint('truncate', context, 'insist');
    expect(report.walRestartable).toBe(false);
    expect(context.capture.caughtUp).toBe(false);
  });
});

/** A tap with a restart threshold of 100 frames on a new database, its snapshot released. */
function tapWithThreshold100() {
  const directory = mkdtempSync(join(tmpdir(), 'backupd-insistent-restart-'));
  cleanups.push(() => rmSync(directory, { recursive: true, force: true }));
  const path = join(directory, 'app.db');
  const application = new DatabaseSync(path, { timeout: 5000 });
  application.exec('PRAGMA journal_mode=WAL; PRAGMA wal_autocheckpoint=0;');
  application.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)');
  const tap = SqliteTap.open(path, { truncateCheckpointPages: 100 });
  cleanups.push(() => {
    tap.close();
    application.close();
  });
  tap.releaseSnapshot();
  return { tap, insert: application.prepare('INSERT INTO t (v) VALUES (?)') };
}

describe('when the tap insists', () => {
  it('past 1.5 times truncateCheckpointPages, not between it and that', () => {
    const { tap, insert } = tapWithThreshold100();
    // One frame per commit (the same leaf page, or the next one).
    const commitUntil = (frames: number) => {
      while (tap.walFrames < frames) {
        insert.run('x'.repeat(100));
        tap.capture();
      }
    };
    commitUntil(120);
    tap.maintain();
    expect(tap.insistentRestarts).toBe(0);
    commitUntil(160);
    tap.maintain();
    expect(tap.insistentRestarts).toBe(1);
  });

  it('forces past 1.5 times the threshold when the capture is behind, and leaves an idle restartable WAL alone', () => {
    const { tap, insert } = tapWithThreshold100();
    // About 200 frames landed and none captured: past 150, behind.
    for (let i = 0; i < 200; i += 1) insert.run('x'.repeat(100));
    const report = tap.maintain();
    expect(tap.forcedRestarts).toBe(1);
    expect(report?.walRestartable).toBe(true);
    expect(tap.caughtUp).toBe(true);
    const restarts = tap.checkpointCounts.truncate;
    // Nothing committed since: no more restarts (no write lock per tick).
    tap.maintain();
    tap.maintain();
    expect(tap.checkpointCounts.truncate).toBe(restarts);
    // The next commit starts the WAL over.
    insert.run('after');
    tap.capture();
    expect(tap.walFrames).toBeLessThan(5);
  });
});
