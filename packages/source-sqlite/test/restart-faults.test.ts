/**
 * A WAL restart that throws under the write lock (checkpoints.ts): at each
 * step it takes there (the capture, ending the reader, the copy, beginning
 * the new reader) an injected failure still leaves the write lock released,
 * so the application's next commit does not answer busy, and the tap either
 * goes on with its reader held or, when it could not begin one again, ends
 * the generation (SqliteReaderLostError) instead of capturing on. Every
 * commit stays restorable.
 */
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { MemoryStore } from '@x/store';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { sqliteContentHash } from '../src/content-hash.ts';
import { HeldReaders } from '../src/held-readers.ts';
import { SqliteReaderLostError, SqliteWalRestartedUnderneathError } from '../src/sqlite-errors.ts';
import { SqliteTap } from '../src/tap.ts';
import { WalCapture } from '../src/wal-capture.ts';
import { hashOf, openApplicationDatabase, TapShipper } from './harness.ts';

const cleanups: (() => void)[] = [];
afterEach(() => {
  vi.restoreAllMocks();
  for (const cleanup of cleanups.splice(0).reverse()) cleanup();
});

const injected = () => new Error('injected fault');

type Step = 'capture' | 'end reader' | 'end reader, half way' | 'copy' | 'begin reader';

/**
 * Arms one failure at `step` of the next restart; the spies only throw once
 * `armed.on` is set, and each failure happens once.
 */
function inject(step: Step): { on: boolean } {
  const armed = { on: false };
  let underLock = false;
  const read = WalCapture.prototype.read;
  vi.spyOn(WalCapture.prototype, 'read').mockImplementation(function (
    this: WalCapture,
    into,
    budget,
  ) {
    // The restart's capture is the one without a budget.
    if (armed.on && budget === Number.POSITIVE_INFINITY) {
      if (step === 'capture') {
        armed.on = false;
        throw injected();
      }
      underLock = true;
    }
    return read.call(this, into, budget);
  });
  const letGo = HeldReaders.prototype.letGo;
  vi.spyOn(HeldReaders.prototype, 'letGo').mockImplementation(function (this: HeldReaders) {
    if (armed.on && step === 'end reader') {
      armed.on = false;
      throw injected();
    }
    letGo.call(this);
  });
  const prepare = DatabaseSync.prototype.prepare;
  vi.spyOn(DatabaseSync.prototype, 'prepare').mockImplementation(function (
    this: DatabaseSync,
    sql: string,
  ) {
    if (armed.on && underLock && step === 'copy' && sql.includes('wal_checkpoint(PASSIVE)')) {
      armed.on = false;
      throw injected();
    }
    return prepare.call(this, sql);
  });
  const exec = DatabaseSync.prototype.exec;
  vi.spyOn(DatabaseSync.prototype, 'exec').mockImplementation(function (
    this: DatabaseSync,
    sql: string,
  ) {
    if (armed.on && underLock && step === 'begin reader' && sql === 'BEGIN') {
      armed.on = false;
      throw injected();
    }
    // The reader's transaction ends, and the call throws all the same.
    if (armed.on && underLock && step === 'end reader, half way' && sql === 'ROLLBACK') {
      armed.on = false;
      exec.call(this, sql);
      throw injected();
    }
    return exec.call(this, sql);
  });
  return armed;
}

async function setUp() {
  const { path, application } = openApplicationDatabase('backupd-restart-faults-', cleanups);
  // No busy wait: a write lock left held answers SQLITE_BUSY at once.
  application.exec('PRAGMA busy_timeout=0');
  const insert = (count: number) => {
    for (let i = 0; i < count; i += 1)
      application.exec('INSERT INTO t (body) VALUES (randomblob(500))');
  };
  insert(20);
  const tap = SqliteTap.open(path, {
    passiveCheckpointPages: 1_000_000,
    truncateCheckpointPages: 30,
    busyTimeoutMs: 1000,
  });
  cleanups.push(() => tap.close());
  const shipper = new TapShipper(new MemoryStore(), 'faults', tap);
  await shipper.step({ maintain: false });
  return { path, application, insert, tap, shipper };
}

describe('a restart that throws under the write lock', () => {
  for (const step of [
    'capture',
    'end reader',
    'end reader, half way',
    'copy',
    'begin reader',
  ] as const) {
    it(`at ${step}: releases the lock, and every commit stays restorable`, async () => {
      const { path, application, insert, tap, shipper } = await setUp();
      insert(40);
      await shipper.step({ maintain: false });
      const armed = inject(step);
      armed.on = true;
      let thrown: unknown = null;
      try {
        tap.checkpoint('truncate');
      } catch (error) {
        thrown = error;
      }
      expect(armed.on).toBe(false);
      expect(thrown).not.toBeNull();
      vi.restoreAllMocks();

      // The application commits at once: the lock is not held.
      expect(() => insert(5)).not.toThrow();
      expect(application.isTransaction).toBe(false);
      // With a reader of the tap's held, the application's own restart
      // cannot drop those commits before they are captured.
      application.prepare('PRAGMA wal_checkpoint(TRUNCATE)').get();

      if (step === 'begin reader') {
        // No reader for a moment: the generation ends, and the tap says so
        // at every capture until a new one starts.
        expect(SqliteReaderLostError.isInstance(thrown)).toBe(true);
        expect(SqliteWalRestartedUnderneathError.isInstance(thrown)).toBe(true);
        expect(() => tap.capture()).toThrow(SqliteReaderLostError);
        tap.startGeneration();
      } else {
        expect((thrown as Error).message).toBe('injected fault');
      }
      // On from there: more commits, restarts that go through, a restore
      // that equals the application's database.
      for (let round = 0; round < 3; round += 1) {
        insert(40);
        await shipper.step();
      }
      expect(shipper.checkpoints.some((report) => report.walRestartable)).toBe(true);
      await shipper.step({ maintain: false });
      const restored = join(path, '..', 'restored.db');
      await shipper.restore(restored);
      expect(hashOf(restored, sqliteContentHash)).toBe(sqliteContentHash(application));
    });
  }
});
