/**
 * Crash at every write of a restart that continues a generation: a first
 * life stops gracefully (leaving `.<db>-backupd/resume`), the application
 * commits while backupd is stopped, and a second life continues the
 * generation with one record of the changed pages, then ships more. For
 * n = 0, 1, 2, … the second life is killed before its n-th bucket write
 * (its tap closed without the graceful record, as a SIGKILL leaves it);
 * then a third life starts on the stale record. After every n: `verify
 * --deep` passes, every restore point restores to a state the application
 * went through (integrity_check ok), and the third life's latest restore
 * point is the database exactly. The loop ends at the first n whose second
 * life completes. Run in clear, encrypted with the operator's identity on
 * the writer (the generation is continued), and encrypted without it (each
 * life starts a generation of its own, with a fresh snapshot).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { type AgeIdentity, generateIdentity, parseIdentity, parseRecipient } from '@x/age-envelope';
import { BackupWorker, type EncryptionOptions } from '@x/backup-worker';
import { SimulatedCrashError, TestHooks } from '@x/backup-worker/testing';
import { FakeClock } from '@x/lease';
import { listRestorePoints, restore, verify } from '@x/restore';
import { MemoryStore } from '@x/store';
import { readSegmentObjectHeader } from '@x/wal-segment';
import { afterEach, describe, expect, it } from 'vitest';
import { sqliteContentHash } from '../src/content-hash.ts';
import { integrityCheck } from '../src/rebuild-database.ts';
import { sqliteMaterializer } from '../src/sqlite-materializer.ts';
import { SqliteSource } from '../src/sqlite-source.ts';
import { hashOf as contentHashOf } from './harness.ts';

const directories: string[] = [];
afterEach(() => {
  for (const directory of directories.splice(0))
    rmSync(directory, { recursive: true, force: true });
});

const hashOf = (path: string): string => contentHashOf(path, sqliteContentHash);

type Life = { source: SqliteSource; worker: BackupWorker };

const operatorKey = generateIdentity();
const operatorIdentity = parseIdentity(operatorKey.identity, 'operator key');
const operatorRecipient = parseRecipient(operatorKey.recipient);

interface Variant {
  readonly name: string;
  /** The writer's encryption option; none: in clear. */
  readonly encryption?: EncryptionOptions;
  /** What restores and verifies with. */
  readonly identities: readonly AgeIdentity[];
  /** Whether a second life continues the first one's generation. */
  readonly continues: boolean;
}

const VARIANTS: readonly Variant[] = [
  { name: 'in clear', identities: [], continues: true },
  {
    name: 'encrypted, the writer holding the identity',
    encryption: { recipients: [operatorRecipient], identities: [operatorIdentity] },
    identities: [operatorIdentity],
    continues: true,
  },
  {
    name: 'encrypted, the writer holding recipients only',
    encryption: { recipients: [operatorRecipient] },
    identities: [operatorIdentity],
    continues: false,
  },
];

/** Every snapshot and log object says it is encrypted, or none does. */
async function expectObjectsEncrypted(store: MemoryStore, encrypted: boolean): Promise<void> {
  const objects = (await store.list('p/')).objects.filter((object) =>
    /\.(seg|snap)$/.test(object.key),
  );
  expect(objects.length).toBeGreaterThan(0);
  for (const object of objects) {
    const header = readSegmentObjectHeader((await store.get(object.key))!.body);
    expect(header.encryption, object.key).toBe(encrypted ? 'age-x25519' : 'none');
  }
}

/** One run of the scenario, the second life killed before its `n`-th write. */
async function crashAt(variant: Variant, n: number): Promise<'completed' | 'crashed'> {
  const { identities } = variant;
  const directory = mkdtempSync(join(tmpdir(), 'backupd-restart-crash-'));
  directories.push(directory);
  const path = join(directory, 'app.db');
  const application = new DatabaseSync(path, { timeout: 5000 });
  const store = new MemoryStore();
  const states = new Set<string>();
  let counter = 0;
  const commit = (count: number) => {
    const update = application.prepare('UPDATE t SET body = ? WHERE id = ?');
    for (let i = 0; i < count; i += 1) {
      counter += 1;
      update.run(new Uint8Array(1024).fill(counter % 251), 1 + ((counter * 7) % 64));
      states.add(hashOf(path));
    }
  };
  const open = (hooks?: TestHooks): Life => {
    const source = SqliteSource.open({ path, captureIntervalMs: 0 });
    const worker = new BackupWorker({
      store,
      prefix: 'p',
      source,
      clock: new FakeClock(),
      manifestIntervalMs: 0,
      ...(variant.encryption === undefined ? {} : { encryption: variant.encryption }),
      ...(hooks === undefined ? {} : { hooks }),
    });
    return { source, worker };
  };
  try {
    application.exec('PRAGMA journal_mode=WAL; CREATE TABLE t (id INTEGER PRIMARY KEY, body BLOB)');
    const seed = application.prepare('INSERT INTO t (body) VALUES (?)');
    for (let i = 0; i < 64; i += 1) seed.run(new Uint8Array(1024).fill(i));
    states.add(hashOf(path));

    const first = open();
    commit(3);
    await first.worker.runOnce();
    commit(2);
    await first.worker.runOnce();
    await first.worker.flush();
    await first.source.close();
    const firstNewest = (await listRestorePoints(store, 'p', { identities })).at(-1)!;
    // Commits backupd does not see: the second life ships their pages as one record.
    commit(4);

    const hooks = new TestHooks();
    hooks.failAfterWrites(n);
    const second = open(hooks);
    let outcome: 'completed' | 'crashed' = 'completed';
    try {
      await second.worker.runOnce();
      commit(2);
      await second.worker.runOnce();
      commit(1);
      // Each step writes its restore point (interval 0); no flush, whose
      // retries wait on the fake clock.
      await second.worker.runOnce();
    } catch (error) {
      if (!SimulatedCrashError.isInstance(error)) throw error;
      outcome = 'crashed';
    }
    // A kill leaves no record: the tap goes without the source's close.
    second.source.tap.close();

    expect((await verify(store, 'p', { deep: true, identities })).ok).toBe(true);
    if (outcome === 'completed') {
      // The second life continued the first one's generation, or (without
      // an identity to read it back) started its own.
      const continued = (await listRestorePoints(store, 'p', { identities })).filter(
        (point) =>
          point.walGeneration === firstNewest.walGeneration &&
          point.commitSeq > firstNewest.commitSeq,
      );
      expect(continued.length > 0).toBe(variant.continues);
    }
    const third = open();
    await third.worker.runOnce();
    await third.worker.runOnce();
    await third.source.close();
    expect((await verify(store, 'p', { deep: true, identities })).ok).toBe(true);

    const points = await listRestorePoints(store, 'p', { identities });
    for (const point of points) {
      const target = join(directory, `restored-${point.commitSeq}-${point.walGeneration}`);
      await restore(store, 'p', target, {
        target: { kind: 'restore-point', manifestKey: point.manifestKey },
        materializer: sqliteMaterializer({ databaseName: 'app.db' }),
        identities,
      });
      const restored = join(target, 'app.db');
      expect(integrityCheck(restored)).toBe('ok');
      expect(states.has(hashOf(restored)), `${point.manifestKey} (n = ${n})`).toBe(true);
    }
    await expectObjectsEncrypted(store, variant.encryption !== undefined);
    const latest = points.find((point) => point.latest)!;
    const target = join(directory, 'restored-latest');
    await restore(store, 'p', target, {
      target: { kind: 'restore-point', manifestKey: latest.manifestKey },
      materializer: sqliteMaterializer({ databaseName: 'app.db' }),
      identities,
    });
    expect(hashOf(join(target, 'app.db')), `latest (n = ${n})`).toBe(hashOf(path));
    return outcome;
  } finally {
    application.close();
  }
}

describe('crash at every write of a restart that continues a generation (SQLite)', () => {
  it.each(VARIANTS)(
    '$name: leaves restore points that verify and restore exactly, and a next start completes',
    async (variant) => {
      let n = 0;
      for (; n < 200; n += 1) {
        if ((await crashAt(variant, n)) === 'completed') break;
      }
      // The second life crashed at several distinct writes before one completed.
      expect(n).toBeGreaterThan(4);
      expect(n).toBeLessThan(200);
    },
  );
});
