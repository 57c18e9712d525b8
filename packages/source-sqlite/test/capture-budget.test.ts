/**
 * A capture reads at most `captureBudgetBytes` of WAL: against a backlog it
 * stops early (`caughtUp` false) and the next capture goes on where it
 * stopped, so the event loop is never held for the whole backlog. Until a
 * capture reaches the WAL's end the tap neither moves its reader nor
 * restarts the WAL, so nothing it has not read can be overwritten.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { afterEach, describe, expect, it } from 'vitest';
import { sqliteContentHash as contentHash } from '../src/content-hash.ts';
import { restoreSqliteDatabase } from '../src/rebuild-database.ts';
import { SqliteTap } from '../src/tap.ts';
import { hashOf } from './harness.ts';

const directories: string[] = [];
afterEach(() => {
  for (const directory of directories.splice(0))
    rmSync(directory, { recursive: true, force: true });
});

describe('a capture within its byte budget', () => {
  it('reads a backlog in pieces, loses nothing, and restarts the WAL only once caught up', async () => {
    const directory = mkdtempSync(join(tmpdir(), 'backupd-capture-budget-'));
    directories.push(directory);
    const path = join(directory, 'app.db');
    const application = new DatabaseSync(path, { timeout: 5000 });
    application.exec('PRAGMA journal_mode=WAL; PRAGMA wal_autocheckpoint=0;');
    application.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)');
    // One byte: every capture reads one piece (1024 frames) and stops.
    const tap = SqliteTap.open(path, { captureBudgetBytes: 1, maxHeldLogBytes: 1 << 30 });
    try {
      const chunks: Uint8Array[] = [];
      for await (const chunk of tap.snapshot()!.read()) chunks.push(chunk);
      tap.releaseSnapshot();
      const snapshot = Buffer.concat(chunks);
      const insert = application.prepare('INSERT INTO t (v) VALUES (?)');
      for (let i = 0; i < 3000; i += 1) insert.run(`row ${i}`);
      const expected = contentHash(application);

      tap.capture();
      expect(tap.caughtUp).toBe(false);
      expect(tap.commits).toBeGreaterThan(0);
      expect(tap.commits).toBeLessThan(3000);
      // Not caught up: no restart, whatever the WAL's size.
      const skipped = tap.checkpoint('truncate');
      expect(skipped.busy).toBe(true);
      expect(skipped.walRestartable).toBe(false);

      let captures = 1;
      while (!tap.caughtUp && captures < 100) {
        tap.capture();
        captures += 1;
      }
      expect(tap.caughtUp).toBe(true);
      expect(captures).toBeGreaterThanOrEqual(2);
      expect(tap.commits).toBe(3000);
      const log = tap.readLog(0, tap.logLength)!;
      const target = join(directory, 'restored.db');
      await restoreSqliteDatabase({ targetPath: target, snapshot, log: log.bytes });
      expect(hashOf(target, contentHash)).toBe(expected);
      // Caught up: the restart goes through.
      tap.releaseLog(tap.logLength);
      expect(tap.checkpoint('truncate').walRestartable).toBe(true);
    } finally {
      tap.close();
      application.close();
    }
  });
});
