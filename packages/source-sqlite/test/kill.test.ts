/**
 * backupd killed (SIGKILL) and restarted at random moments while the
 * application writes and checkpoints: every restore point left in the bucket
 * restores to a state the application really had, in commit order, and the
 * final restore point holds the application's last commit.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BackupWorker } from '@x/backup-worker';
import { FakeClock } from '@x/lease';
import { parseManifestKey } from '@x/manifest';
import { restore } from '@x/restore';
import { FsStore } from '@x/store';
import { afterEach, describe, expect, it } from 'vitest';
import { sqliteContentHash as contentHash } from '../src/content-hash.ts';
import { integrityCheck } from '../src/rebuild-database.ts';
import { sqliteMaterializer } from '../src/sqlite-materializer.ts';
import { SqliteSource } from '../src/sqlite-source.ts';
import { createDatabase, hashOf, startWriter } from './harness.ts';

const directories: string[] = [];
afterEach(() => {
  for (const directory of directories.splice(0))
    rmSync(directory, { recursive: true, force: true });
});

function startBackupd(
  path: string,
  bucket: string,
  prefix: string,
): { child: ChildProcess; closed: Promise<void>; steps: () => number } {
  const child = spawn(
    process.execPath,
    [
      '--conditions=@x/source',
      '--no-warnings',
      join(import.meta.dirname, 'backupd-child.ts'),
      path,
      bucket,
      prefix,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  let steps = 0;
  // Listened for from the start: a child that dies early has closed before anyone waits.
  const closed = new Promise<void>((resolve) => child.once('close', () => resolve()));
  child.stdout!.setEncoding('utf8');
  child.stdout!.on('data', (text: string) => {
    steps += text.split('\n').filter((line) => line.startsWith('{')).length;
  });
  return { child, closed, steps: () => steps };
}

describe('SQLite backup with backupd killed and restarted', () => {
  it('keeps every shipped restore point exact and ends with the last commit', async () => {
    const directory = mkdtempSync(join(tmpdir(), 'backupd-sqlite-kill-'));
    directories.push(directory);
    const path = join(directory, 'app.db');
    const bucket = join(directory, 'bucket');
    createDatabase(path);
    const writer = startWriter(path, {
      transactions: 800,
      seed: 41,
      checkpoints: 'random',
      delayMs: 3,
    });
    let seed = 97;
    const random = () => {
      seed = (seed * 1103515245 + 12345) >>> 0;
      return seed / 0x100000000;
    };
    let kills = 0;
    while (!writer.finished) {
      const backupd = startBackupd(path, bucket, 'db');
      // Killed at a random moment after its first step (start-up alone takes
      // a while on a busy machine, and a run that never steps proves little).
      while (!writer.finished && backupd.steps() < 1 && backupd.child.exitCode === null)
        await new Promise((resolve) => setTimeout(resolve, 10));
      const lifetime = random() * 400;
      const started = Date.now();
      while (!writer.finished && Date.now() - started < lifetime)
        await new Promise((resolve) => setTimeout(resolve, 10));
      backupd.child.kill('SIGKILL');
      await backupd.closed;
      kills += 1;
    }
    await writer.done;
    expect(kills).toBeGreaterThan(1);

    // A last, clean run ships everything.
    const source = SqliteSource.open({ path, captureIntervalMs: 0 });
    const store = new FsStore({ root: bucket });
    const worker = new BackupWorker({
      store,
      prefix: 'db',
      source,
      clock: new FakeClock(),
      manifestIntervalMs: 0,
    });
    try {
      await worker.runOnce();
      await worker.runOnce();
    } finally {
      await source.close();
    }

    const manifests = (await store.list('db/manifest/')).objects
      .map((object) => parseManifestKey('db', object.key))
      .filter((commitSeq): commitSeq is number => commitSeq !== undefined)
      .sort((a, b) => a - b);
    expect(manifests.length).toBeGreaterThan(2);
    const materializer = sqliteMaterializer({ databaseName: 'app.db' });
    let previousWriterCommit = -1;
    for (const commitSeq of manifests) {
      const target = join(directory, `restore-${commitSeq}`);
      await restore(store, 'db', target, { target: { kind: 'commit', commitSeq }, materializer });
      const restored = join(target, 'app.db');
      expect(integrityCheck(restored)).toBe('ok');
      const writerCommit = writer.hashes.indexOf(hashOf(restored, contentHash));
      // A state the application really had, and never older than an earlier restore point.
      expect(writerCommit, `restore point ${commitSeq}`).toBeGreaterThanOrEqual(0);
      expect(writerCommit).toBeGreaterThanOrEqual(previousWriterCommit);
      previousWriterCommit = writerCommit;
      rmSync(target, { recursive: true, force: true });
    }
    expect(previousWriterCommit).toBe(writer.hashes.length - 1);
  });
});
