/**
 * Batching while the worker is behind: past `maxHeldLogBytes` of log held
 * unshipped, the tap merges new commits into one record (the newest version
 * of each page, the database size after the last) until the worker reads the
 * log's end. What must hold:
 * - the merged log restores to exactly the state after the batch, and every
 *   commit outside batches stays restorable on its own;
 * - a commit inside a batch is refused by name, with the batch's edges as
 *   the nearest restorable commits (never a silently different state);
 * - the bytes a batch ships are bounded by the pages it touched, not by its
 *   commits;
 * - once the backlog is shipped, commits get records of their own again;
 * - through the worker, a restore point's commit count counts every commit
 *   of a batch.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { BackupWorker } from '@x/backup-worker';
import { FakeClock } from '@x/lease';
import { NoRestorePointError, restore } from '@x/restore';
import { MemoryStore } from '@x/store';
import { afterEach, describe, expect, it } from 'vitest';
import { decodeCommitRecord, splitLogFrames } from '../src/commit-record.ts';
import { sqliteContentHash as contentHash } from '../src/content-hash.ts';
import { restoreSqliteDatabase } from '../src/rebuild-database.ts';
import { sqliteCommitAtTime } from '../src/restore-point-at-time.ts';
import { sqliteMaterializer } from '../src/sqlite-materializer.ts';
import { SqliteSource } from '../src/sqlite-source.ts';
import { SqliteTap } from '../src/tap.ts';
import { hashOf } from './harness.ts';

const directories: string[] = [];
afterEach(() => {
  for (const directory of directories.splice(0))
    rmSync(directory, { recursive: true, force: true });
});

function applicationDatabase(): { directory: string; path: string; application: DatabaseSync } {
  const directory = mkdtempSync(join(tmpdir(), 'backupd-sqlite-batching-'));
  directories.push(directory);
  const path = join(directory, 'app.db');
  const application = new DatabaseSync(path, { timeout: 5000 });
  application.exec('PRAGMA journal_mode=WAL; CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)');
  application.exec("INSERT INTO t (v) VALUES ('first')");
  return { directory, path, application };
}

async function snapshotOf(tap: SqliteTap): Promise<Buffer> {
  const chunks: Uint8Array[] = [];
  for await (const chunk of tap.snapshot()!.read()) chunks.push(chunk);
  tap.releaseSnapshot();
  return Buffer.concat(chunks);
}

describe('the tap batches commits while more than maxHeldLogBytes waits unshipped', () => {
  it('merges them into one record that restores exactly, and refuses a commit inside it by name', async () => {
    const { directory, path, application } = applicationDatabase();
    let now = 0;
    // Any log held at all starts a batch.
    const tap = SqliteTap.open(path, { wallNow: () => now, maxHeldLogBytes: 1 });
    try {
      const snapshot = await snapshotOf(tap);
      const hashes = [contentHash(application)];
      const update = application.prepare('UPDATE t SET v = ? WHERE id = 1');
      // Commit 1 finds nothing held: a record of its own.
      now = 1000;
      update.run('commit 1');
      hashes.push(contentHash(application));
      tap.capture();
      expect([tap.commits, tap.batchedCommits]).toEqual([1, 0]);
      // Commits 2..201 find a record held: one batch, sealed when asked.
      for (let commit = 2; commit <= 201; commit += 1) {
        now = commit * 1000;
        update.run(`commit ${commit}`);
        hashes.push(contentHash(application));
        tap.capture();
      }
      expect([tap.commits, tap.batchedCommits]).toEqual([1, 200]);
      const lengthBeforeSeal = tap.logLength;
      tap.sealBatch();
      expect([tap.commits, tap.batchedCommits]).toEqual([201, 0]);
      const log = tap.readLog(0, tap.logLength)!;
      expect(log.commits).toBe(201);
      // The batch holds one version of each page it touched, not 200.
      expect(tap.logLength - lengthBeforeSeal).toBeLessThan(4 * tap.pageSize);

      for (const commits of [0, 1, 201]) {
        const target = join(directory, `restored-${commits}.db`);
        await restoreSqliteDatabase({ targetPath: target, snapshot, log: log.bytes, commits });
        expect(hashOf(target, contentHash), `commit ${commits}`).toBe(hashes[commits]);
      }
      const inside = restoreSqliteDatabase({
        targetPath: join(directory, 'inside.db'),
        snapshot,
        log: log.bytes,
        commits: 100,
      });
      await expect(inside).rejects.toMatchObject({
        name: 'SqliteRestoreRefusedError',
        code: 'SQLITE_RESTORE_POINT_UNAVAILABLE',
      });
      await expect(inside).rejects.toThrow(
        /inside a batch of commits 2 to 201.*restorable are 1 and 201/,
      );

      // A time inside the batch gets the state before it; its last commit's time, all of it.
      const beforeBatchEnd = join(directory, 'time-before.db');
      await restoreSqliteDatabase({
        targetPath: beforeBatchEnd,
        snapshot,
        log: log.bytes,
        time: 150_000,
      });
      expect(hashOf(beforeBatchEnd, contentHash)).toBe(hashes[1]);
      const atBatchEnd = join(directory, 'time-at.db');
      await restoreSqliteDatabase({
        targetPath: atBatchEnd,
        snapshot,
        log: log.bytes,
        time: 201_000,
      });
      expect(hashOf(atBatchEnd, contentHash)).toBe(hashes[201]);

      // Shipped and released: the next commit is a record of its own again.
      tap.releaseLog(tap.logLength);
      update.run('commit 202');
      tap.capture();
      expect([tap.commits, tap.batchedCommits]).toEqual([202, 0]);
    } finally {
      tap.close();
      application.close();
    }
  });

  it('writes a record per commit while the held log stays under the bound', async () => {
    const { path, application } = applicationDatabase();
    const tap = SqliteTap.open(path, { maxHeldLogBytes: 1024 * 1024 });
    try {
      await snapshotOf(tap);
      for (let i = 0; i < 20; i += 1) application.exec(`UPDATE t SET v = 'n${i}' WHERE id = 1`);
      tap.capture();
      expect([tap.commits, tap.batchedCommits]).toEqual([20, 0]);
      const log = tap.readLog(0, tap.logLength)!;
      expect(log.commits).toBe(20);
      // One frame per commit: twenty records, none of them a batch.
      const { payloads } = splitLogFrames(log.bytes);
      expect(payloads.map((payload) => decodeCommitRecord(payload).commits)).toEqual(
        Array(20).fill(1),
      );
    } finally {
      tap.close();
      application.close();
    }
  });

  it('through the worker: restore points count every batched commit, restore refuses a commit inside a batch naming its edges', async () => {
    const { directory, path, application } = applicationDatabase();
    let now = 0;
    const source = SqliteSource.open({
      path,
      captureIntervalMs: 0,
      maxHeldLogBytes: 1,
      wallNow: () => now,
    });
    const store = new MemoryStore();
    const worker = new BackupWorker({
      store,
      prefix: 'p',
      source,
      clock: new FakeClock(),
      manifestIntervalMs: 0,
    });
    try {
      await worker.runOnce(); // the snapshot's restore point
      const base = (await source.durablePosition()).commitCount!;
      const hashes: string[] = [];
      const update = application.prepare('UPDATE t SET v = ? WHERE id = 1');
      now = 1000;
      update.run('one');
      hashes.push(contentHash(application));
      // A worker step captures commit 1 (a record), then the source's own
      // captures (ticks, here by hand) batch what follows while it is held.
      source.tap.capture();
      for (let i = 2; i <= 50; i += 1) {
        now = i * 1000;
        update.run(`commit ${i}`);
        hashes.push(contentHash(application));
        source.tap.capture();
      }
      expect(source.tap.batchedCommits).toBe(49);
      await worker.runOnce();
      const position = await source.durablePosition();
      expect(position.commitCount).toBe(base + 50);
      const materializer = sqliteMaterializer({ databaseName: 'app.db' });
      const latest = await restore(store, 'p', join(directory, 'latest'), { materializer });
      expect(latest.commitSeq).toBe(base + 50);
      expect(hashOf(join(directory, 'latest', 'app.db'), contentHash)).toBe(hashes[49]);
      const first = await restore(store, 'p', join(directory, 'first'), {
        materializer,
        target: { kind: 'commit', commitSeq: base + 1 },
      });
      expect(first.commitSeq).toBe(base + 1);
      expect(hashOf(join(directory, 'first', 'app.db'), contentHash)).toBe(hashes[0]);
      const inside = restore(store, 'p', join(directory, 'inside'), {
        materializer,
        target: { kind: 'commit', commitSeq: base + 20 },
      });
      await expect(inside).rejects.toThrow(NoRestorePointError);
      await expect(inside).rejects.toMatchObject({
        nearestBelow: base + 1,
        nearestAbove: base + 50,
      });
      // By time: inside the batch, the state before it; at its end, all of it.
      expect(await sqliteCommitAtTime(store, 'p', 30_000)).toMatchObject({ commitSeq: base + 1 });
      expect(await sqliteCommitAtTime(store, 'p', 50_000)).toMatchObject({ commitSeq: base + 50 });
    } finally {
      await source.close();
      application.close();
    }
  });
});
