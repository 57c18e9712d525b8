/**
 * A database that shrinks and grows again (auto_vacuum, VACUUM, deletes of
 * large rows) restores exactly at every restore point: the log patches a
 * page only against a version the restore holds at that point, never one
 * from before a shrink (the WAL cycle at a snapshot, or an earlier record).
 *
 * - The reproduction of issue 35's item 2: `auto_vacuum=FULL`, the database
 *   grows from 19 to 34 pages and back within one WAL cycle, backupd
 *   starts, the application writes the same rows again; the latest restore
 *   point restored "database disk image is malformed".
 * - A property test (seeded, so a failure replays): random shrinks and
 *   regrowths across snapshots, restarts that continue a generation (after
 *   a graceful stop and after a crash), and compaction of the shipped log;
 *   every restore point restores to the application's content at it.
 */
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { BackupWorker } from '@x/backup-worker';
import { FakeClock } from '@x/lease';
import { parseManifest, parseSegmentKey } from '@x/manifest';
import { listRestorePoints, restore } from '@x/restore';
import { MemoryStore } from '@x/store';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decodeCommitRecord, encodeCommitFrame, splitLogFrames } from '../src/commit-record.ts';
import { sqliteContentHash } from '../src/content-hash.ts';
import { HeldLog } from '../src/held-log.ts';
import { restoreSqliteDatabase } from '../src/rebuild-database.ts';
import { sqliteSidecarFiles } from '../src/sidecar-files.ts';
import { SqliteRestoreCorruptError } from '../src/sqlite-errors.ts';
import { sqliteMaterializer } from '../src/sqlite-materializer.ts';
import { SqliteSource } from '../src/sqlite-source.ts';
import type { WalHeader, WalTransaction } from '../src/wal-file.ts';
import { hashOf as contentHashOf, testWorkspace } from './harness.ts';

const workspace = testWorkspace();
const hashOf = (path: string): string => contentHashOf(path, sqliteContentHash);
const pageCount = (database: DatabaseSync): number =>
  (database.prepare('PRAGMA page_count').get() as { page_count: number }).page_count;

/** Bytes of row `id` of generation `round`: the same for the same arguments. */
function rowBody(id: number, size: number, round = 0): Uint8Array {
  const body = new Uint8Array(size);
  for (let i = 0; i < size; i += 1) body[i] = (id * 31 + i * 7 + round * 13) & 0xff;
  return body;
}

async function restoreHash(
  store: MemoryStore,
  directory: string,
  name: string,
  commitSeq?: number,
): Promise<string> {
  const target = join(directory, name);
  await restore(store, 'p', target, {
    ...(commitSeq === undefined ? {} : { target: { kind: 'commit', commitSeq } }),
    materializer: sqliteMaterializer({ databaseName: 'app.db' }),
  });
  return hashOf(join(target, 'app.db'));
}

describe('issue 35, item 2: grown and shrunk within one WAL cycle before backupd starts', () => {
  it('the rows written again after the start restore exactly, at every restore point', async () => {
    const directory = workspace.directory('shrink-regrow');
    const path = join(directory, 'app.db');
    const application = new DatabaseSync(path, { timeout: 5000 });
    workspace.onCleanup(() => application.close());
    application.exec('PRAGMA auto_vacuum=FULL; PRAGMA journal_mode=WAL');
    application.exec('PRAGMA wal_autocheckpoint=0');
    application.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, body BLOB)');
    const insert = application.prepare('INSERT INTO t (id, body) VALUES (?, ?)');
    for (let id = 1; id <= 16; id += 1) insert.run(id, rowBody(id, 3000));
    // The database file holds the 19 pages; the WAL starts empty.
    application.exec('PRAGMA wal_checkpoint(TRUNCATE)');
    expect(pageCount(application)).toBe(19);
    // One WAL cycle: up to 34 pages and back to 19.
    const grow = () => {
      for (let id = 101; id <= 115; id += 1) insert.run(id, rowBody(id, 3000));
    };
    grow();
    expect(pageCount(application)).toBe(34);
    application.exec('DELETE FROM t WHERE id > 100');
    expect(pageCount(application)).toBe(19);

    const store = new MemoryStore();
    const source = SqliteSource.open({ path, captureIntervalMs: 0 });
    workspace.onCleanup(() => source.close());
    const worker = new BackupWorker({
      store,
      prefix: 'p',
      source,
      clock: new FakeClock(),
      manifestIntervalMs: 0,
    });
    await worker.runOnce();
    const expected = new Map<number, string>();
    const first = (await listRestorePoints(store, 'p')).at(-1)!;
    expected.set(first.commitSeq, hashOf(path));
    // The same rows again, one commit each: pages 20 to 34 come back.
    for (let id = 101; id <= 115; id += 1) {
      insert.run(id, rowBody(id, 3000));
      if (id % 5 === 0) {
        await worker.runOnce();
        const point = (await listRestorePoints(store, 'p')).at(-1)!;
        expected.set(point.commitSeq, hashOf(path));
      }
    }
    await worker.flush();
    expect(pageCount(application)).toBe(34);
    expect(expected.size).toBe(4);
    for (const [commitSeq, hash] of expected)
      expect(await restoreHash(store, directory, `restored-${commitSeq}`, commitSeq)).toBe(hash);
  });
});

describe('no patch without its base: the held log and the restore', () => {
  const PAGE = 4096;
  const header = { pageSize: PAGE, salt1: 1, salt2: 2 } as unknown as WalHeader;
  const commit = (pages: [number, Uint8Array][], databasePages: number) =>
    ({ pages: new Map(pages), databasePages, commitFrame: 1 }) as unknown as WalTransaction;
  const recordsOf = (log: HeldLog) =>
    splitLogFrames(log.read(0, log.logEnd)!.bytes).payloads.map((p) => decodeCommitRecord(p));
  const filled = (value: number, changed = -1) => {
    const page = new Uint8Array(PAGE).fill(value);
    if (changed >= 0) page[changed] = 0xff;
    return page;
  };
  const options = { maxHeldLogBytes: 1 << 30, maxPageBaseBytes: 1 << 20 };

  it('an overlay page above the snapshot’s size is no base: the page is logged whole', () => {
    const overlay = new Map([
      [2, filled(2)],
      [25, filled(25)],
    ]);
    const log = new HeldLog(PAGE, {
      ...options,
      snapshotPages: overlay,
      snapshotDatabasePages: 19,
    });
    log.add(
      header,
      commit(
        [
          [2, filled(2, 7)],
          [25, filled(25, 7)],
        ],
        34,
      ),
      1,
    );
    const [record] = recordsOf(log);
    expect([...record!.patches!.keys()]).toEqual([2]);
    expect([...record!.pages.keys()]).toEqual([25]);
  });

  it('a page the database dropped (a shrink inside the log) is logged whole once it grows back', () => {
    const log = new HeldLog(PAGE, options);
    log.add(header, commit([[30, filled(30)]], 34), 1);
    log.add(header, commit([[1, filled(1)]], 19), 2);
    log.add(header, commit([[30, filled(30, 9)]], 34), 3);
    log.add(header, commit([[30, filled(30, 10)]], 34), 4);
    const records = recordsOf(log);
    expect(records.map((r) => [...r.pages.keys()])).toEqual([[30], [1], [30], []]);
    expect([...records[3]!.patches!.keys()]).toEqual([30]);
  });

  it('a restore refuses a patch whose base it does not hold, by name, instead of putting it over zeros', async () => {
    const directory = workspace.directory('shrink-regrow-refuse');
    const image = join(directory, 'image.db');
    const database = new DatabaseSync(image);
    database.exec('PRAGMA page_size=4096; CREATE TABLE t (x)');
    database.close();
    const snapshot = new Uint8Array(readFileSync(image));
    const snapshotPages = snapshot.byteLength / PAGE;
    const patch = (pageNumber: number, databasePages: number) =>
      encodeCommitFrame({
        pageSize: PAGE,
        databasePages,
        commitTime: 1,
        walSalt1: 0,
        walSalt2: 0,
        commitFrame: 0,
        pages: new Map(),
        patches: new Map([[pageNumber, [{ offset: 0, bytes: new Uint8Array([1]) }]]]),
      });
    const whole = (pageNumber: number, databasePages: number) =>
      encodeCommitFrame({
        pageSize: PAGE,
        databasePages,
        commitTime: 1,
        walSalt1: 0,
        walSalt2: 0,
        commitFrame: 0,
        pages: new Map([[pageNumber, new Uint8Array(PAGE)]]),
      });
    const above = snapshotPages + 3;
    const cases: [string, Uint8Array[], RegExp][] = [
      [
        'above the snapshot',
        [patch(above, above)],
        new RegExp(`commit 1 of the log patches page ${above}, whose version before it`),
      ],
      [
        'dropped by a shrink',
        [whole(above, above), whole(1, snapshotPages), patch(above, above)],
        new RegExp(`commit 3 of the log patches page ${above}.*had ${snapshotPages} pages`),
      ],
    ];
    for (const [name, log, message] of cases) {
      const target = join(directory, `restored-${name.replaceAll(' ', '-')}`);
      const refused = restoreSqliteDatabase({ targetPath: target, snapshot, log, verify: false });
      await expect(refused, name).rejects.toThrow(SqliteRestoreCorruptError);
      await expect(
        restoreSqliteDatabase({ targetPath: target, snapshot, log, verify: false }),
      ).rejects.toThrow(message);
      expect(existsSync(target)).toBe(false);
    }
    // Written again after the shrink, the page has its base.
    await restoreSqliteDatabase({
      targetPath: join(directory, 'restored-rewritten'),
      snapshot,
      log: [whole(above, above), whole(1, snapshotPages), whole(above, above), patch(above, above)],
      verify: false,
    });
  });
});

/** One step of the application or of backupd (see the property test). */
type Action =
  | { kind: 'insert'; rows: number; size: number }
  | { kind: 'update'; rows: number }
  | { kind: 'delete'; fraction: number }
  | { kind: 'incrementalVacuum'; pages: number }
  | { kind: 'vacuum' }
  | { kind: 'checkpoint' }
  | { kind: 'ship' }
  | { kind: 'restart'; crash: boolean; commitsWhileStopped: number }
  | { kind: 'snapshot' };

const actionArbitrary: fc.Arbitrary<Action> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant('insert' as const),
      rows: fc.integer({ min: 1, max: 12 }),
      size: fc.constantFrom(200, 1500, 5000, 12_000),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('update' as const),
      rows: fc.integer({ min: 1, max: 5 }),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant('delete' as const),
      fraction: fc.constantFrom(0.3, 0.7, 1),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('incrementalVacuum' as const),
      pages: fc.integer({ min: 0, max: 20 }),
    }),
  },
  { weight: 1, arbitrary: fc.constant({ kind: 'vacuum' as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'checkpoint' as const }) },
  { weight: 4, arbitrary: fc.constant({ kind: 'ship' as const }) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('restart' as const),
      crash: fc.boolean(),
      commitsWhileStopped: fc.constantFrom(0, 0, 1, 3),
    }),
  },
  { weight: 1, arbitrary: fc.constant({ kind: 'snapshot' as const }) },
);

/** fast-check's seed: a failure prints its path, replayable with this seed. */
const SCENARIO_SEED = 352;
const SNAPSHOT_INTERVAL_MS = 1_000_000;

describe('shrink and regrow (property)', () => {
  it('every restore point restores to the application content at it, across snapshots, continuations and compaction', async () => {
    let scenario = 0;
    let restorePoints = 0;
    let compactedObjects = 0;
    let generations = 0;
    let continued = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('FULL', 'INCREMENTAL'),
        fc.array(actionArbitrary, { minLength: 8, maxLength: 28 }),
        async (autoVacuum, actions) => {
          scenario += 1;
          const seen = await runScenario(`s${scenario}`, autoVacuum, actions);
          restorePoints += seen.restorePoints;
          compactedObjects += seen.compactedObjects;
          generations += seen.generations;
          continued += seen.continued;
        },
      ),
      { numRuns: 30, seed: SCENARIO_SEED, endOnFailure: true },
    );
    // The runs went where the property is about: many restore points, more
    // than one generation, restarts that continued one, compacted objects.
    expect(restorePoints).toBeGreaterThan(100);
    expect(generations).toBeGreaterThan(24);
    expect(continued).toBeGreaterThan(5);
    expect(compactedObjects).toBeGreaterThan(0);
  });
});

async function runScenario(
  name: string,
  autoVacuum: string,
  actions: readonly Action[],
): Promise<{
  restorePoints: number;
  compactedObjects: number;
  generations: number;
  continued: number;
}> {
  const directory = workspace.directory(`shrink-regrow-${name}`);
  const path = join(directory, 'app.db');
  const application = new DatabaseSync(path, { timeout: 5000 });
  const closers: (() => Promise<void> | void)[] = [() => application.close()];
  try {
    application.exec(`PRAGMA auto_vacuum=${autoVacuum}; PRAGMA journal_mode=WAL`);
    application.exec('PRAGMA wal_autocheckpoint=0');
    application.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, body BLOB)');
    let nextId = 1;
    let round = 0;
    const insert = application.prepare('INSERT INTO t (id, body) VALUES (?, ?)');
    const apply = (action: Action): void => {
      round += 1;
      switch (action.kind) {
        case 'insert':
          application.exec('BEGIN');
          for (let i = 0; i < action.rows; i += 1) {
            insert.run(nextId, rowBody(nextId, action.size, round));
            nextId += 1;
          }
          application.exec('COMMIT');
          return;
        case 'update': {
          const ids = application
            .prepare('SELECT id, length(body) AS size FROM t ORDER BY id DESC LIMIT ?')
            .all(action.rows) as { id: number; size: number }[];
          const update = application.prepare('UPDATE t SET body = ? WHERE id = ?');
          for (const { id, size } of ids) update.run(rowBody(id, size, round), id);
          return;
        }
        case 'delete': {
          const rows = (application.prepare('SELECT count(*) AS n FROM t').get() as { n: number })
            .n;
          application
            .prepare(
              'DELETE FROM t WHERE id IN (SELECT id FROM t ORDER BY length(body) DESC, id LIMIT ?)',
            )
            .run(Math.ceil(rows * action.fraction));
          return;
        }
        case 'incrementalVacuum':
          application.exec(`PRAGMA incremental_vacuum(${action.pages})`);
          return;
        case 'vacuum':
          application.exec('VACUUM');
          return;
        case 'checkpoint':
          // Busy while backupd holds its reader: copies what it may, and
          // restarts the WAL when backupd's reader lets it. No busy wait.
          application.exec('PRAGMA busy_timeout=0');
          application.exec('PRAGMA wal_checkpoint(TRUNCATE)');
          application.exec('PRAGMA busy_timeout=5000');
          return;
        default:
          return;
      }
    };

    const store = new MemoryStore();
    const clock = new FakeClock();
    clock.advance(Date.UTC(2026, 0, 1));
    const open = () => {
      const source = SqliteSource.open({
        path,
        captureIntervalMs: 0,
        wallNow: () => clock.wallNow(),
      });
      const worker = new BackupWorker({
        store,
        prefix: 'p',
        source,
        clock,
        manifestIntervalMs: 0,
        snapshotIntervalMs: SNAPSHOT_INTERVAL_MS,
        snapshotLogFactor: 0,
        compactionLevels: [20_000, 80_000],
      });
      return { source, worker };
    };
    // The same application before backupd starts: a shrink inside the WAL
    // cycle its first snapshot reads.
    apply({ kind: 'insert', rows: 10, size: 3000 });
    apply({ kind: 'delete', fraction: 0.7 });
    let life = open();
    closers.push(() => life.source.close());
    const expected = new Map<string, string>();
    let continued = 0;
    // One step of the worker, and then until a compaction it started is in.
    const ship = async () => {
      clock.advance(7_000);
      await life.worker.runOnce();
      await new Promise((resolve) => setTimeout(resolve, 5));
      await life.worker.runOnce();
      await life.worker.flush();
      // The application is idle meanwhile: every restore point this step
      // wrote holds its state now.
      const hash = hashOf(path);
      for (const point of await listRestorePoints(store, 'p'))
        if (!expected.has(point.manifestKey)) expected.set(point.manifestKey, hash);
    };
    await ship();
    for (const action of actions) {
      if (action.kind === 'ship') await ship();
      else if (action.kind === 'snapshot') {
        // A scheduled snapshot is due at the next step.
        clock.advance(SNAPSHOT_INTERVAL_MS);
        await ship();
      } else if (action.kind === 'restart') {
        await ship();
        await life.source.close();
        // A crash leaves no record: the next start reads the restore point back.
        if (action.crash) rmSync(sqliteSidecarFiles(path).resume, { force: true });
        for (let i = 0; i < action.commitsWhileStopped; i += 1)
          apply({ kind: 'insert', rows: 2, size: 5000 });
        const before = (await listRestorePoints(store, 'p')).at(-1)?.walGeneration;
        life = open();
        await ship();
        if ((await listRestorePoints(store, 'p')).at(-1)?.walGeneration === before) continued += 1;
      } else apply(action);
    }
    await ship();
    await life.source.close();

    // Every restore point kept (compacted ones too), as a restore rebuilds it.
    const points = (await listRestorePoints(store, 'p')).filter((p) => p.status === 'ok');
    const generationsSeen = new Set<number>();
    let compacted = 0;
    for (const point of points) {
      const manifest = parseManifest((await store.get(point.manifestKey))!.body, { prefix: 'p' });
      generationsSeen.add(manifest.walGeneration);
      for (const segment of manifest.segments)
        if (parseSegmentKey('p', segment.key)?.layout === 'compacted') compacted += 1;
      const hash = expected.get(point.manifestKey);
      expect(hash, `${name}: restore point ${point.manifestKey} was recorded`).toBeDefined();
      const target = join(directory, `restored-${point.manifestKey.replaceAll('/', '_')}`);
      await restore(store, 'p', target, {
        target: { kind: 'restore-point', manifestKey: point.manifestKey },
        materializer: sqliteMaterializer({ databaseName: 'app.db' }),
      });
      expect(hashOf(join(target, 'app.db')), `${name}: restore point ${point.commitSeq}`).toBe(
        hash,
      );
    }
    return {
      restorePoints: points.length,
      compactedObjects: compacted,
      generations: generationsSeen.size,
      continued,
    };
  } finally {
    for (const close of closers.reverse()) await close();
  }
}
