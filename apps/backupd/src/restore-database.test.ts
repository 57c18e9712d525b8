/**
 * A restore racing the retention of a compaction: the restore point a
 * restore picked is superseded and deleted (manifest, then the fine
 * segments only it named) while the restore reads it. A restore of the
 * latest state picks again (`@x/restore`); a restore by time searches the
 * time again (here). Both restore a state the database went through, from
 * the newer restore point, never an `ObjectMissingError`.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { BackupWorker } from '@x/backup-worker';
import { FakeClock } from '@x/lease';
import { parseManifest } from '@x/manifest';
import { listRestorePoints } from '@x/restore';
import { SqliteSource, sqliteContentHash } from '@x/source-sqlite';
import { MemoryStore } from '@x/store';
import { ForwardingStore, type StoreOperation } from '@x/store/adapter';
import { afterEach, describe, expect, it } from 'vitest';
import { restoreDatabase } from './restore-database.ts';

const directories: string[] = [];
const closers: (() => unknown)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
  for (const directory of directories.splice(0))
    rmSync(directory, { recursive: true, force: true });
});

function hashOf(path: string): string {
  const database = new DatabaseSync(path, { readOnly: true });
  try {
    return sqliteContentHash(database);
  } finally {
    database.close();
  }
}

/** A database backed up with 30 s compaction windows, stepped 5 s of fake time at a time. */
async function compactingBackup() {
  const directory = mkdtempSync(join(tmpdir(), 'backupd-restore-race-'));
  directories.push(directory);
  const path = join(directory, 'app.db');
  const application = new DatabaseSync(path, { timeout: 5000 });
  closers.push(() => application.close());
  application.exec('PRAGMA journal_mode=WAL; CREATE TABLE t (id INTEGER PRIMARY KEY, body BLOB)');
  const insert = application.prepare('INSERT INTO t (body) VALUES (?)');
  for (let i = 0; i < 32; i += 1) insert.run(randomBytes(1000));
  const clock = new FakeClock();
  const source = SqliteSource.open({ path, captureIntervalMs: 0, wallNow: () => clock.wallNow() });
  closers.push(() => source.close());
  const store = new MemoryStore();
  const worker = new BackupWorker({
    store,
    prefix: 'p',
    source,
    clock,
    manifestIntervalMs: 0,
    snapshotIntervalMs: 0,
    snapshotLogFactor: 0,
    compactionLevels: [30_000],
    // What a compaction replaced leaves with its restore point, under the restore.
    exactWindowMs: 0,
  });
  const rewrite = application.prepare('UPDATE t SET body = ? WHERE id = ?');
  /** Every state the database went through (its content hash). */
  const states = new Set([hashOf(path)]);
  let step = 0;
  const advance = async () => {
    rewrite.run(randomBytes(1000), 1 + (step % 32));
    states.add(hashOf(path));
    step += 1;
    for (let i = 0; i < 3; i += 1) {
      await worker.runOnce();
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    await worker.runOnce();
    clock.advance(5_000);
  };
  return { directory, path, clock, store, states, advance };
}

/**
 * `store` as a restore reads it: at its first read of `trigger` (a key
 * prefix), the backup goes on until retention deleted a segment of the
 * restore point read last before it.
 */
function racingStore(
  store: MemoryStore,
  trigger: string,
  advance: () => Promise<void>,
): { store: ForwardingStore; picked: () => string | undefined } {
  let picked: string | undefined;
  let raced = false;
  const racing = new (class extends ForwardingStore {
    protected override async intercept<T>(
      operation: StoreOperation,
      key: string,
      _signal: AbortSignal | undefined,
      proceed: () => Promise<T>,
    ): Promise<T> {
      const read = operation === 'get' || operation === 'getStream';
      if (read && key.startsWith('p/manifest/') && !raced) picked = key;
      if (read && key.startsWith(trigger) && !raced && picked !== undefined) {
        raced = true;
        const named = parseManifest((await store.get(picked))!.body, { prefix: 'p' }).segments;
        for (let i = 0; i < 60; i += 1) {
          const left = await Promise.all(named.map((s) => store.head(s.key)));
          if (left.some((object) => object === null)) break;
          await advance();
        }
        expect(await store.get(picked)).toBeNull();
      }
      return proceed();
    }
  })(store);
  return { store: racing, picked: () => (raced ? picked : undefined) };
}

describe('a restore whose restore point a compaction retires under it', () => {
  it('of the latest state: restores the newer restore point', async () => {
    const { directory, path, store, advance } = await compactingBackup();
    for (let i = 0; i < 3; i += 1) await advance();
    const racing = racingStore(store, 'p/wal/', advance);
    const target = join(directory, 'latest', 'app.db');
    const result = await restoreDatabase(racing.store, 'p', target, { force: false });
    expect(racing.picked()).toBeDefined();
    expect(result.manifestKey).not.toBe(racing.picked());
    // Every step shipped its commit: the latest state is the database's.
    expect(hashOf(target)).toBe(hashOf(path));
  });

  it('by time: searches the time again and restores the state at or before it', async () => {
    const { directory, clock, store, states, advance } = await compactingBackup();
    for (let i = 0; i < 3; i += 1) await advance();
    const time = clock.wallNow() - 1;
    const before = (await listRestorePoints(store, 'p')).at(-1)!.commitSeq;
    // The time search reads commit records first; the race starts at the
    // restore's first snapshot read.
    const racing = racingStore(store, 'p/snapshots/', advance);
    const target = join(directory, 'by-time', 'app.db');
    const result = await restoreDatabase(racing.store, 'p', target, {
      target: { kind: 'time', time },
      force: false,
    });
    expect(racing.picked()).toBeDefined();
    expect(result.manifestKey).not.toBe(racing.picked());
    // Inside the compacted range now: the newest boundary at or before it.
    expect(result.commitSeq).toBeLessThanOrEqual(before);
    expect(states.has(hashOf(target))).toBe(true);
    const direct = join(directory, 'direct', 'app.db');
    await restoreDatabase(store, 'p', direct, {
      target: { kind: 'commit', commitSeq: result.commitSeq },
      force: false,
    });
    expect(hashOf(target)).toBe(hashOf(direct));
  });
});
