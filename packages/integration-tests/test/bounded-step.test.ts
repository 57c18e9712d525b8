/**
 * A step is bounded, whatever the application does meanwhile. Under an
 * application that commits faster than the bucket takes the log, a step that
 * chased the log's moving end never ended: no restore point was written
 * after the first, and the source could not let go of what had shipped.
 * What must hold:
 * - a step ships up to what was durable when it began, then writes its
 *   restore point; what landed meanwhile is the next step's;
 * - once a restore point is due, a step stops shipping and writes it, even
 *   when what was durable at its start is not all shipped yet;
 * - a step that overran the interval is followed at once by the next.
 */

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import type { BackupSource } from '@x/engine';
import { FakeClock } from '@x/lease';
import { listRestorePoints } from '@x/restore';
import { SqliteSource } from '@x/source-sqlite';
import { MemoryStore } from '@x/store';
import { afterEach, describe, expect, it } from 'vitest';
import { manualWorker } from './helpers/worker.ts';

const directories: string[] = [];
afterEach(() => {
  for (const directory of directories.splice(0))
    rmSync(directory, { recursive: true, force: true });
});

/**
 * The SQLite source, with `duringRead` run after every range the worker
 * reads: an application committing while the worker ships.
 */
function withWorkDuringReads(source: SqliteSource, duringRead: () => void): BackupSource {
  return new Proxy(source, {
    get(target, property) {
      if (property === 'readWalRange')
        return async (...args: Parameters<SqliteSource['readWalRange']>) => {
          const range = await target.readWalRange(...args);
          duringRead();
          return range;
        };
      const value: unknown = Reflect.get(target, property, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

function application(): { path: string; database: DatabaseSync } {
  const directory = mkdtempSync(join(tmpdir(), 'backup-worker-bounded-'));
  directories.push(directory);
  const path = join(directory, 'app.db');
  const database = new DatabaseSync(path, { timeout: 5000 });
  database.exec('PRAGMA journal_mode=WAL; CREATE TABLE t (id INTEGER PRIMARY KEY, body BLOB)');
  return { path, database };
}

async function newestCommit(store: MemoryStore): Promise<number> {
  const points = await listRestorePoints(store, 'p');
  return Math.max(...points.map((point) => point.commitSeq));
}

describe('a bounded step', () => {
  it('ships what was durable when it began and writes its restore point, however much lands meanwhile', async () => {
    const { path, database } = application();
    const source = SqliteSource.open({ path, captureIntervalMs: 0 });
    let extra = 50;
    const racing = withWorkDuringReads(source, () => {
      if (extra-- > 0) database.exec('INSERT INTO t (body) VALUES (randomblob(100))');
    });
    const store = new MemoryStore();
    // Segments of one commit each (a commit here is one 4 KiB page).
    const worker = manualWorker(store, racing, { maxSegmentBytes: 5_000 });
    try {
      await worker.runOnce();
      const base = await newestCommit(store);
      database.exec('INSERT INTO t (body) VALUES (randomblob(100))');
      await worker.runOnce();
      // One commit was durable when the step began; the ones the
      // application made while it shipped wait for the next step.
      expect(await newestCommit(store)).toBe(base + 1);
      const steps = [];
      while ((await newestCommit(store)) < base + 51 && steps.length < 100) {
        await worker.runOnce();
        steps.push(await newestCommit(store));
      }
      expect(await newestCommit(store)).toBe(base + 51);
      // Each step wrote a restore point of its own.
      expect(new Set(steps).size).toBe(steps.length);
    } finally {
      await source.close();
      database.close();
    }
  });

  it('stops shipping once a restore point is due, writes it, and steps again at once', async () => {
    const { path, database } = application();
    // Whole pages (no page patches): each commit's record is a 4 KiB page,
    // so a 5,000-byte segment holds one commit.
    const source = SqliteSource.open({ path, captureIntervalMs: 0, maxPageBaseBytes: 0 });
    const clock = new FakeClock();
    // Each segment takes 4 s to ship: the 10 s restore point falls due
    // after the third.
    const slow = withWorkDuringReads(source, () => clock.advance(4_000));
    const store = new MemoryStore();
    const worker = manualWorker(store, slow, {
      clock,
      maxSegmentBytes: 5_000,
      manifestIntervalMs: 10_000,
      walIntervalMs: 1_000,
    });
    try {
      await worker.runOnce();
      const base = await newestCommit(store);
      for (let i = 0; i < 12; i += 1)
        database.exec('INSERT INTO t (body) VALUES (randomblob(100))');
      clock.advance(10_000);
      const delay = await worker.step();
      const first = await newestCommit(store);
      expect(first).toBeGreaterThan(base);
      expect(first).toBeLessThan(base + 12);
      // It overran its 1 s interval: the next step is due at once.
      expect(delay).toBe(0);
      let steps = 0;
      while ((await newestCommit(store)) < base + 12 && steps < 20) {
        // The last restore point, too, waits until one is due.
        clock.advance(10_000);
        await worker.step();
        steps += 1;
      }
      expect(await newestCommit(store)).toBe(base + 12);
      expect(steps).toBeGreaterThan(1);
    } finally {
      await source.close();
      database.close();
    }
  });
});
