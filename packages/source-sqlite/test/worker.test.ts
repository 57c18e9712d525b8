/**
 * SqliteSource under the real BackupWorker, and the package's restore with
 * the SQLite materializer: every restore point restores to the exact content
 * the application had at that commit; and the ranges it hands the worker
 * carry their CRC-32, so no segment is read twice.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { crc32 } from 'node:zlib';
import { BackupWorker } from '@x/backup-worker';
import { FakeClock } from '@x/lease';
import { restore } from '@x/restore';
import { MemoryStore } from '@x/store';
import { afterEach, describe, expect, it } from 'vitest';
import { sqliteContentHash as contentHash } from '../src/content-hash.ts';
import { integrityCheck } from '../src/rebuild-database.ts';
import { sqliteCommitAtTime } from '../src/restore-point-at-time.ts';
import { sqliteSidecarFiles } from '../src/sidecar-files.ts';
import { sqliteMaterializer } from '../src/sqlite-materializer.ts';
import { SqliteSource } from '../src/sqlite-source.ts';
import { hashOf } from './harness.ts';

const directories: string[] = [];
afterEach(() => {
  for (const directory of directories.splice(0))
    rmSync(directory, { recursive: true, force: true });
});

/** A WAL database with table `t` in a directory of its own, open as the application. */
function applicationDatabase(label: string): {
  directory: string;
  path: string;
  application: DatabaseSync;
} {
  const directory = mkdtempSync(join(tmpdir(), label));
  directories.push(directory);
  const path = join(directory, 'app.db');
  const application = new DatabaseSync(path, { timeout: 5000 });
  application.exec('PRAGMA journal_mode=WAL; CREATE TABLE t (id INTEGER PRIMARY KEY, body BLOB)');
  return { directory, path, application };
}

describe('SqliteSource with the BackupWorker', () => {
  it('ships commits across WAL restarts; restores manifests, a commit between manifests and a time exactly', async () => {
    const { directory, path, application } = applicationDatabase('backupd-sqlite-worker-');
    // Commit times: round r's commits are seen at 1000 × (r + 1) ms.
    let now = 0;
    const source = SqliteSource.open({
      path,
      passiveCheckpointPages: 20,
      truncateCheckpointPages: 60,
      captureIntervalMs: 0,
      wallNow: () => now,
    });
    const store = new MemoryStore();
    const worker = new BackupWorker({
      store,
      prefix: 'p',
      source,
      clock: new FakeClock(),
      manifestIntervalMs: 0,
      // One generation across the WAL restarts this test is about (its WAL
      // outgrows the small database many times over).
      snapshotLogFactor: 0,
      // Every commit restorable: no compaction merges them.
      compactionLevels: [],
    });
    const checkpointer = new DatabaseSync(path, { timeout: 0 });
    try {
      const hashes = [contentHash(application)];
      const lastCommitOfRound: number[] = [];
      for (let round = 0; round < 12; round += 1) {
        now = 1000 * (round + 1);
        for (let i = 0; i < 4; i += 1) {
          application
            .prepare('INSERT INTO t (body) VALUES (randomblob(?))')
            .run(100 + ((round * 7 + i) % 5) * 2000);
          hashes.push(contentHash(application));
          if (i === 2) {
            // Always deletes one row, so it is always exactly one commit.
            application.exec('DELETE FROM t WHERE id = (SELECT min(id) FROM t)');
            hashes.push(contentHash(application));
          }
        }
        // The application's own checkpoints, including a restart of the WAL.
        checkpointer.prepare('PRAGMA wal_checkpoint(TRUNCATE)').get();
        await worker.runOnce();
        lastCommitOfRound.push(hashes.length - 1);
      }
      await worker.runOnce();
      const latest = hashes.length - 1;
      expect((await source.durablePosition()).commitCount).toBe(latest);
      const reports = source.tap.takeCheckpointReports();
      expect(reports.some((report) => report.walRestartable)).toBe(true);

      const materializer = sqliteMaterializer({ databaseName: 'app.db' });
      for (const commitSeq of [0, 1, 13, 27, 42, latest]) {
        const target = join(directory, `restore-${commitSeq}`);
        const result = await restore(store, 'p', target, {
          target: { kind: 'commit', commitSeq },
          materializer,
        });
        expect(result.commitSeq).toBe(commitSeq);
        const restored = join(target, 'app.db');
        expect(integrityCheck(restored)).toBe('ok');
        expect(hashOf(restored, contentHash), `commit ${commitSeq}`).toBe(hashes[commitSeq]);
        expect(readdirSync(target).sort()).toEqual(['.app.db-backupd', 'app.db']);
        expect(readdirSync(join(target, '.app.db-backupd')).sort()).toEqual(['parent', 'state']);
      }

      // To a time: the newest commit seen at or before it.
      const atTime = await sqliteCommitAtTime(store, 'p', 5500);
      expect(atTime).toMatchObject({ commitSeq: lastCommitOfRound[4], commitTime: 5000 });
      const target = join(directory, 'restore-at-time');
      await restore(store, 'p', target, {
        target: {
          kind: 'restore-point',
          manifestKey: atTime!.manifestKey,
          commitSeq: atTime!.commitSeq,
        },
        materializer,
      });
      expect(hashOf(join(target, 'app.db'), contentHash)).toBe(hashes[lastCommitOfRound[4]!]);
      // Before the first commit, after the snapshot (taken at 0): the snapshot's state.
      expect(await sqliteCommitAtTime(store, 'p', 500)).toMatchObject({
        commitSeq: 0,
        commitTime: 0,
      });
      expect(await sqliteCommitAtTime(store, 'p', -1)).toBeNull();
    } finally {
      checkpointer.close();
      await source.close();
      application.close();
    }
  });

  it('has the commit count on disk before it hands out a length or bytes covering commits its timer captured', async () => {
    const { path, application } = applicationDatabase('backupd-sqlite-state-');
    // The timer captures; no worker step runs in between.
    const source = SqliteSource.open({ path, captureIntervalMs: 5 });
    const persisted = () =>
      (JSON.parse(readFileSync(sqliteSidecarFiles(path).state, 'utf8')) as { commitCount: number })
        .commitCount;
    try {
      for (let i = 0; i < 3; i += 1)
        application.exec('INSERT INTO t (body) VALUES (randomblob(100))');
      const deadline = Date.now() + 5000;
      while (source.tap.commits < 3 && Date.now() < deadline)
        await new Promise((resolve) => setTimeout(resolve, 5));
      expect(source.tap.commits).toBe(3);
      const position = await source.durablePosition();
      expect(position.commitCount).toBe(3);
      expect(persisted()).toBe(3);
      application.exec('INSERT INTO t (body) VALUES (randomblob(100))');
      while (source.tap.commits < 4 && Date.now() < deadline)
        await new Promise((resolve) => setTimeout(resolve, 5));
      const range = await source.readWalRange(position.durableLength, source.tap.logLength);
      expect(range?.frames).toBe(1);
      expect(persisted()).toBe(4);
    } finally {
      await source.close();
      application.close();
    }
  });

  it('hands out the CRC-32 of every range it reads, for ranges of one or many commits', async () => {
    const { path, application } = applicationDatabase('backupd-sqlite-crc-');
    const source = SqliteSource.open({ path, captureIntervalMs: 0 });
    try {
      // Commits of different sizes (one page to several), so records differ in length.
      for (let i = 0; i < 12; i += 1)
        application.exec(`INSERT INTO t (body) VALUES (randomblob(${100 + i * 1500}))`);
      source.tap.capture();
      const position = await source.durablePosition();
      let cursor = source.tap.logStart;
      let ranges = 0;
      while (cursor < position.durableLength) {
        const range = await source.readWalRange(cursor, position.durableLength, {
          maxBytes: 20_000,
        });
        expect(range).not.toBeNull();
        expect(range!.crc32).toBe(crc32(range!.bytes) >>> 0);
        cursor = range!.end;
        ranges += 1;
      }
      expect(ranges).toBeGreaterThan(2);
    } finally {
      await source.close();
      application.close();
    }
  });
});
