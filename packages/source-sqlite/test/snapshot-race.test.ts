/**
 * A generation's snapshot taken while the WAL is completely checkpointed but
 * not yet restarted: the tap's reader then holds read mark 0, which lets the
 * application's next commit restart the WAL and overwrite its first frames at
 * any moment, also while the tap is building the snapshot. Every snapshot
 * must still be a state the application really had.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { sqliteContentHash as contentHash } from '../src/content-hash.ts';
import { integrityCheck, restoreSqliteDatabase } from '../src/rebuild-database.ts';
import { SqliteTap } from '../src/tap.ts';
import { createDatabase, hashOf, startWriter } from './harness.ts';

const directories: string[] = [];
afterEach(() => {
  for (const directory of directories.splice(0))
    rmSync(directory, { recursive: true, force: true });
});

async function collect(chunks: AsyncIterable<Uint8Array>): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  for await (const chunk of chunks) parts.push(chunk);
  return Buffer.concat(parts);
}

describe('SQLite snapshot while the application restarts the WAL', () => {
  it('is always a state the application had', async () => {
    const directory = mkdtempSync(join(tmpdir(), 'backupd-sqlite-snapshot-race-'));
    directories.push(directory);
    const path = join(directory, 'app.db');
    createDatabase(path);
    const writer = startWriter(path, {
      transactions: 1500,
      seed: 7,
      checkpoints: 'passive-loop',
    });
    const snapshots: Uint8Array[] = [];
    while (!writer.finished) {
      const tap = SqliteTap.open(path);
      try {
        const snapshot = tap.snapshot();
        if (snapshot === null) throw new Error('a new tap has no snapshot');
        snapshots.push(await collect(snapshot.read()));
      } finally {
        tap.close();
      }
      await new Promise((resolve) => setImmediate(resolve));
    }
    await writer.done;
    expect(snapshots.length).toBeGreaterThan(20);

    let previous = -1;
    for (const [index, image] of snapshots.entries()) {
      const target = join(directory, `snapshot-${index}.db`);
      await restoreSqliteDatabase({ targetPath: target, snapshot: image, log: [] });
      expect(integrityCheck(target), `snapshot ${index}`).toBe('ok');
      const commit = writer.hashes.indexOf(hashOf(target, contentHash));
      expect(commit, `snapshot ${index} is a state the application had`).toBeGreaterThanOrEqual(0);
      expect(commit).toBeGreaterThanOrEqual(previous);
      previous = commit;
      rmSync(target, { force: true });
    }
  }, 120_000);
});
