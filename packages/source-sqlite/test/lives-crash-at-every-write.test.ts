/**
 * Crash at every write of a life that compacts, and of one that takes a
 * scheduled snapshot: the worker ships a steady load for a minute of fake
 * time, with 30 s compaction windows (its writes include segments, restore
 * points, LATEST, compacted objects and the retention that drops superseded
 * restore points and deletes what a compaction replaced), or with a 30 s
 * snapshot interval and no compaction (its writes include a second
 * generation's snapshot and what retention retires of the first). For n = 0, 1, 2, … it is killed before its n-th
 * bucket write (every later write fails, and its tap is closed without the
 * graceful record, as a SIGKILL leaves it). After every n: `verify --deep`
 * passes, every restore point restores to a state the application went
 * through (integrity_check ok); then a second life starts on what the first
 * left, ships again, and its latest restore point is the database exactly.
 * That start has no graceful record: when the bucket's newest restore point
 * is in the newest generation it reads it back and continues it (the delta
 * restart), otherwise it takes a new snapshot; both are counted. The loop
 * ends at the first n whose first life completes; that life must have
 * compacted, or switched generations (else the loop proved nothing about
 * them), and some second start must have continued.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { generateIdentity, parseIdentity, parseRecipient } from '@x/age-envelope';
import { BackupWorker } from '@x/backup-worker';
import { SimulatedCrashError, TestHooks } from '@x/backup-worker/testing';
import { FakeClock } from '@x/lease';
import { parseManifest, parseSegmentKey } from '@x/manifest';
import { listRestorePoints, restore, verify } from '@x/restore';
import { MemoryStore } from '@x/store';
import { readSegmentObjectHeader } from '@x/wal-segment';
import { describe, expect, it } from 'vitest';
import { sqliteContentHash } from '../src/content-hash.ts';
import { integrityCheck } from '../src/rebuild-database.ts';
import { sqliteMaterializer } from '../src/sqlite-materializer.ts';
import { SqliteSource } from '../src/sqlite-source.ts';
import { hashOf as contentHashOf } from './harness.ts';

const hashOf = (path: string): string => contentHashOf(path, sqliteContentHash);
/** Steps of the first life, 5 s of fake time apart: two 30 s windows close. */
const STEPS = 14;

/** Lets a compaction started in the background by the last step finish. */
const settle = () => new Promise((resolve) => setTimeout(resolve, 20));

/** Compacted objects the newest restore point names. */
async function compactedInLatest(store: MemoryStore): Promise<number> {
  const latest = (await listRestorePoints(store, 'p', { identities })).find(
    (point) => point.latest,
  );
  if (latest === undefined) return 0;
  const manifest = parseManifest((await store.get(latest.manifestKey))!.body, { prefix: 'p' });
  return manifest.segments.filter((s) => parseSegmentKey('p', s.key)?.layout === 'compacted')
    .length;
}

interface Life {
  readonly compactionLevels: readonly number[];
  readonly snapshotIntervalMs: number;
  /** Encrypts to the test key, the writer holding its identity. */
  readonly encrypted?: boolean;
}

const testKey = generateIdentity();
const identities = [parseIdentity(testKey.identity, 'test key')];
const encryption = { recipients: [parseRecipient(testKey.recipient)], identities };

/** One run, the first life killed before its `n`-th write. */
async function crashAt(
  n: number,
  life: Life,
): Promise<{
  outcome: 'completed' | 'crashed';
  compacted: number;
  generations: number;
  continued: boolean;
}> {
  const directory = mkdtempSync(join(tmpdir(), 'backupd-compaction-crash-'));
  const path = join(directory, 'app.db');
  const application = new DatabaseSync(path, { timeout: 5000 });
  const store = new MemoryStore();
  const states = new Set<string>();
  const clock = new FakeClock();
  let counter = 0;
  const commit = (count: number) => {
    const update = application.prepare('UPDATE t SET body = ? WHERE id = ?');
    for (let i = 0; i < count; i += 1) {
      counter += 1;
      update.run(new Uint8Array(1024).fill(counter % 251), 1 + ((counter * 7) % 32));
      states.add(hashOf(path));
    }
  };
  const events: string[] = [];
  const record = (event: string) => {
    events.push(event);
  };
  const open = (hooks?: TestHooks) => {
    const source = SqliteSource.open({ path, captureIntervalMs: 0 });
    const worker = new BackupWorker({
      store,
      prefix: 'p',
      source,
      clock,
      manifestIntervalMs: 0,
      snapshotIntervalMs: life.snapshotIntervalMs,
      snapshotLogFactor: 0,
      compactionLevels: life.compactionLevels,
      ...(life.encrypted ? { encryption } : {}),
      logger: { info: record, warn: record, error: record, debug: () => {} },
      ...(hooks === undefined ? {} : { hooks }),
    });
    return { source, worker };
  };
  try {
    application.exec('PRAGMA journal_mode=WAL; CREATE TABLE t (id INTEGER PRIMARY KEY, body BLOB)');
    const seed = application.prepare('INSERT INTO t (body) VALUES (?)');
    for (let i = 0; i < 32; i += 1) seed.run(new Uint8Array(1024).fill(i));
    states.add(hashOf(path));

    const hooks = new TestHooks();
    hooks.failAfterWrites(n);
    const first = open(hooks);
    let outcome: 'completed' | 'crashed' = 'completed';
    try {
      for (let step = 0; step < STEPS; step += 1) {
        commit(2);
        // Each step writes its restore point (interval 0), so a crash of a
        // background compaction's write is met by the next step's.
        await first.worker.runOnce();
        await settle();
        clock.advance(5_000);
      }
      await first.worker.runOnce();
    } catch (error) {
      if (!SimulatedCrashError.isInstance(error)) throw error;
      outcome = 'crashed';
    }
    await settle();
    const compacted = outcome === 'completed' ? await compactedInLatest(store) : 0;
    const generations = new Set(
      (await listRestorePoints(store, 'p', { identities })).map((point) => point.walGeneration),
    ).size;
    // A kill leaves no record: the tap goes without the source's close.
    first.source.tap.close();

    const check = async (when: string) => {
      const verified = await verify(store, 'p', { deep: true, identities });
      // Every restore point verifies. LATEST may be missing only when the
      // kill came before the first one was written.
      const detail = `verify ${when} (n = ${n}): ${JSON.stringify(verified).slice(0, 1500)}`;
      expect(verified.problems, detail).toEqual([]);
      expect(
        verified.manifests.every((m) => m.status === 'ok'),
        detail,
      ).toBe(true);
      if (!verified.latest.ok)
        expect(
          verified.latest.problems.map((p) => p.kind),
          detail,
        ).toEqual(['latest-missing']);
      for (const point of await listRestorePoints(store, 'p', { identities })) {
        const target = join(directory, `restored-${when}-${point.commitSeq}`);
        await restore(store, 'p', target, {
          target: { kind: 'restore-point', manifestKey: point.manifestKey },
          materializer: sqliteMaterializer({ databaseName: 'app.db' }),
          identities,
        });
        const restored = join(target, 'app.db');
        expect(integrityCheck(restored)).toBe('ok');
        expect(states.has(hashOf(restored)), `${point.manifestKey} ${when} (n = ${n})`).toBe(true);
      }
    };
    if ((await listRestorePoints(store, 'p', { identities })).length > 0)
      await check('after the kill');

    commit(3);
    events.length = 0;
    const second = open();
    await second.worker.runOnce();
    await settle();
    await second.worker.runOnce();
    await second.source.close();
    await check('after the next start');
    const target = join(directory, 'restored-latest');
    await restore(store, 'p', target, {
      materializer: sqliteMaterializer({ databaseName: 'app.db' }),
      identities,
    });
    expect(hashOf(join(target, 'app.db')), `latest (n = ${n})`).toBe(hashOf(path));
    for (const object of (await store.list('p/')).objects.filter((o) =>
      /\.(seg|snap)$/.test(o.key),
    ))
      expect(readSegmentObjectHeader((await store.get(object.key))!.body).encryption).toBe(
        life.encrypted ? 'age-x25519' : 'none',
      );
    return {
      outcome,
      compacted,
      generations,
      continued: events.includes('backup.generation_continued'),
    };
  } finally {
    application.close();
    rmSync(directory, { recursive: true, force: true });
  }
}

describe('crash at every write (SQLite)', () => {
  for (const [name, life, proves] of [
    [
      'a life that compacts',
      { compactionLevels: [30_000], snapshotIntervalMs: 0 },
      (last: Awaited<ReturnType<typeof crashAt>>) => expect(last.compacted).toBeGreaterThan(0),
    ],
    [
      'a life that compacts, encrypted',
      { compactionLevels: [30_000], snapshotIntervalMs: 0, encrypted: true },
      (last: Awaited<ReturnType<typeof crashAt>>) => expect(last.compacted).toBeGreaterThan(0),
    ],
    [
      'a life that takes a scheduled snapshot',
      { compactionLevels: [], snapshotIntervalMs: 30_000 },
      (last: Awaited<ReturnType<typeof crashAt>>) => expect(last.generations).toBeGreaterThan(1),
    ],
  ] as const) {
    it(`${name}: restore points verify and restore to states the application went through, and a next start is exact`, async () => {
      let n = 0;
      let continued = 0;
      let last: Awaited<ReturnType<typeof crashAt>> | undefined;
      for (; n < 400; n += 1) {
        last = await crashAt(n, life);
        if (last.continued) continued += 1;
        if (last.outcome === 'completed') break;
      }
      console.info(
        `crash-at-every-write, ${name}: killed at writes 0..${n - 1}; the completed life's restore points span ${last?.generations} generation(s), its newest names ${last?.compacted} compacted object(s); ${continued} of ${n + 1} next starts continued the generation`,
      );
      expect(last?.outcome).toBe('completed');
      // Killed at every one of its writes before the first life completed.
      expect(n).toBeGreaterThan(STEPS * 3);
      proves(last!);
      expect(continued).toBeGreaterThan(0);
    }, 600_000);
  }
});
