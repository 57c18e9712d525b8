/**
 * Restarts without a full re-upload: a graceful stop leaves a record beside
 * the database (`.<db>-backupd/resume`: the restore point that holds its
 * state and a SHA-256 of its page image); the next start whose database
 * still hashes to it continues that restore point's generation, uploading
 * no snapshot. Without a usable record (a stop without one: a crash; a
 * record that is damaged or names another restore point) the start reads
 * the restore point back from the bucket and proves its state against that
 * instead. What breaks the proof (most pages rewritten while backupd was
 * stopped, a record whose digest is not the database's) gets a new
 * snapshot, as before. Every restore point, before and after the restart,
 * restores exactly.
 */
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { BackupWorker } from '@x/backup-worker';
import { FakeClock } from '@x/lease';
import { listRestorePoints, restore } from '@x/restore';
import { MemoryStore } from '@x/store';
import { describe, expect, it } from 'vitest';
import { sqliteContentHash } from '../src/content-hash.ts';
import { sqliteSidecarFiles } from '../src/sidecar-files.ts';
import { sqliteMaterializer } from '../src/sqlite-materializer.ts';
import { SqliteSource } from '../src/sqlite-source.ts';
import { hashOf as contentHashOf, testWorkspace } from './harness.ts';

const workspace = testWorkspace();

const hashOf = (path: string): string => contentHashOf(path, sqliteContentHash);

function setUp() {
  const directory = workspace.directory('restart-continuation');
  const path = join(directory, 'app.db');
  let application = new DatabaseSync(path, { timeout: 5000 });
  application.exec('PRAGMA journal_mode=WAL; CREATE TABLE t (id INTEGER PRIMARY KEY, body BLOB)');
  // Rows of 2 KiB: a database of a few hundred KiB, so a snapshot is plainly
  // visible in the bucket's bytes.
  const seed = application.prepare('INSERT INTO t (body) VALUES (?)');
  for (let i = 0; i < 200; i += 1) seed.run(new Uint8Array(2048).fill(i % 251));
  workspace.onCleanup(() => application.close());
  const store = new MemoryStore();
  const clock = new FakeClock();
  const open = () => {
    const source = SqliteSource.open({ path, captureIntervalMs: 0 });
    workspace.onCleanup(() => source.close());
    const worker = new BackupWorker({
      store,
      prefix: 'p',
      source,
      clock,
      manifestIntervalMs: 0,
    });
    return { source, worker };
  };
  // Each commit writes bytes the row never held: SQLite skips writing a
  // row whose new content equals the old, and that would be no commit.
  let commits = 0;
  const commit = (count: number) => {
    const update = application.prepare('UPDATE t SET body = ? WHERE id = ?');
    for (let i = 0; i < count; i += 1) {
      commits += 1;
      const body = new Uint8Array(2048).fill(commits % 251);
      body[0] = commits >> 8;
      update.run(body, 1 + ((commits * 13) % 200));
    }
  };
  /** Closes the application's connection (SQLite checkpoints and removes the WAL) and opens a new one. */
  const reopenApplication = () => {
    application.close();
    application = new DatabaseSync(path, { timeout: 5000 });
  };
  return { directory, path, store, open, commit, reopenApplication };
}

/** Everything in the bucket but the lease: key → size. */
async function objects(store: MemoryStore): Promise<Map<string, number>> {
  const listed = await store.list('p/');
  return new Map(
    listed.objects.filter((o) => !o.key.endsWith('/LEASE')).map((o) => [o.key, o.size]),
  );
}

function addedBytes(before: Map<string, number>, after: Map<string, number>): number {
  let added = 0;
  for (const [key, size] of after) if (!before.has(key)) added += size;
  return added;
}

const snapshotKeys = (keys: Map<string, number>) =>
  [...keys.keys()].filter((key) => key.startsWith('p/snapshots/'));

/** Every restore point restores to the state recorded for it. */
async function restoresExactly(
  store: MemoryStore,
  directory: string,
  expected: Map<number, string>,
): Promise<void> {
  const points = await listRestorePoints(store, 'p');
  for (const [commitSeq, hash] of expected) {
    expect(points.map((point) => point.commitSeq)).toContain(commitSeq);
    const target = join(directory, `restored-${commitSeq}`);
    await restore(store, 'p', target, {
      target: { kind: 'commit', commitSeq },
      materializer: sqliteMaterializer({ databaseName: 'app.db' }),
    });
    expect(hashOf(join(target, 'app.db')), `commit ${commitSeq}`).toBe(hash);
  }
}

/** Runs a first backupd life: commits, ships, stops gracefully (final restore point, then close). */
async function firstLife(context: ReturnType<typeof setUp>, expected: Map<number, string>) {
  const { source, worker } = context.open();
  context.commit(5);
  await worker.runOnce();
  context.commit(3);
  await worker.runOnce();
  await worker.flush();
  const newest = (await listRestorePoints(context.store, 'p')).at(-1)!;
  expected.set(newest.commitSeq, hashOf(context.path));
  await source.close();
  return newest;
}

describe('a restart continues the generation when the database is provably unchanged', () => {
  for (const closeApplication of [false, true]) {
    it(`an idle restart uploads no snapshot and adds at most 1 % of the database (application ${closeApplication ? 'closed and reopened' : 'kept open'} meanwhile)`, async () => {
      const context = setUp();
      const expected = new Map<number, string>();
      const before = await firstLife(context, expected);
      expect(readFileSync(sqliteSidecarFiles(context.path).resume, 'utf8')).toContain('"sha256"');
      if (closeApplication) context.reopenApplication();
      const objectsBefore = await objects(context.store);
      const databaseBytes = readFileSync(context.path).byteLength;

      const { worker } = context.open();
      await worker.runOnce();
      const idle = await objects(context.store);
      expect(snapshotKeys(idle)).toEqual(snapshotKeys(objectsBefore));
      expect(addedBytes(objectsBefore, idle)).toBeLessThanOrEqual(databaseBytes / 100);
      const points = await listRestorePoints(context.store, 'p');
      expect(points.at(-1)!.walGeneration).toBe(before.walGeneration);

      // Commits after the restart extend the same generation and restore exactly.
      context.commit(4);
      await worker.runOnce();
      await worker.flush();
      const after = (await listRestorePoints(context.store, 'p')).at(-1)!;
      expect(after.walGeneration).toBe(before.walGeneration);
      expect(after.commitSeq).toBe(before.commitSeq + 4);
      expected.set(after.commitSeq, hashOf(context.path));
      expect(snapshotKeys(await objects(context.store))).toEqual(snapshotKeys(objectsBefore));
      await restoresExactly(context.store, context.directory, expected);
    });
  }

  it('a second idle restart in a row continues too (the record is written again at each graceful stop)', async () => {
    const context = setUp();
    const expected = new Map<number, string>();
    const before = await firstLife(context, expected);
    for (let life = 0; life < 2; life += 1) {
      const { source, worker } = context.open();
      await worker.runOnce();
      context.commit(2);
      await worker.runOnce();
      await worker.flush();
      await source.close();
    }
    const points = await listRestorePoints(context.store, 'p');
    expect(points.at(-1)!.walGeneration).toBe(before.walGeneration);
    expect(points.at(-1)!.commitSeq).toBe(before.commitSeq + 4);
    expected.set(points.at(-1)!.commitSeq, hashOf(context.path));
    expect(snapshotKeys(await objects(context.store))).toHaveLength(1);
    await restoresExactly(context.store, context.directory, expected);
  });
});

describe('a record without page hashes (as the first release of the record wrote it)', () => {
  const withoutPageHashes = (context: ReturnType<typeof setUp>) => {
    const path = sqliteSidecarFiles(context.path).resume;
    const record = JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
    delete record.pageSize;
    delete record.pageHashes;
    writeFileSync(path, JSON.stringify(record));
  };

  it('still continues an idle restart', async () => {
    const context = setUp();
    const before = await firstLife(context, new Map());
    withoutPageHashes(context);
    const { worker } = context.open();
    await worker.runOnce();
    const points = await listRestorePoints(context.store, 'p');
    expect(points.at(-1)!.walGeneration).toBe(before.walGeneration);
    expect(snapshotKeys(await objects(context.store))).toHaveLength(1);
  });

  it('takes a new snapshot after commits made while backupd was stopped', async () => {
    const context = setUp();
    const expected = new Map<number, string>();
    const before = await firstLife(context, expected);
    withoutPageHashes(context);
    context.commit(2);
    const { worker } = context.open();
    await worker.runOnce();
    const points = await listRestorePoints(context.store, 'p');
    expect(points.at(-1)!.walGeneration).toBe(before.walGeneration! + 1);
    expected.set(points.at(-1)!.commitSeq, hashOf(context.path));
    await restoresExactly(context.store, context.directory, expected);
  });
});

describe('a restart after commits made while backupd was stopped ships the pages they changed', () => {
  it('one commit record of the changed pages continues the generation; every restore point exact', async () => {
    const context = setUp();
    const expected = new Map<number, string>();
    const before = await firstLife(context, expected);
    // Commits backupd never saw: the application ran on while it was stopped.
    context.commit(6);
    const objectsBefore = await objects(context.store);
    const databaseBytes = readFileSync(context.path).byteLength;
    const { worker } = context.open();
    await worker.runOnce();
    const points = await listRestorePoints(context.store, 'p');
    const newest = points.at(-1)!;
    expect(newest.walGeneration).toBe(before.walGeneration);
    // The six commits are one record: restorable together, as one commit.
    expect(newest.commitSeq).toBe(before.commitSeq + 1);
    const objectsAfter = await objects(context.store);
    expect(snapshotKeys(objectsAfter)).toEqual(snapshotKeys(objectsBefore));
    // Six rows of 2 KiB (random-free, so compressible) and a manifest: far
    // below a snapshot of the database.
    expect(addedBytes(objectsBefore, objectsAfter)).toBeLessThan(databaseBytes / 20);
    expected.set(newest.commitSeq, hashOf(context.path));
    context.commit(2);
    await worker.runOnce();
    const later = (await listRestorePoints(context.store, 'p')).at(-1)!;
    expect(later.commitSeq).toBe(newest.commitSeq + 2);
    expected.set(later.commitSeq, hashOf(context.path));
    await restoresExactly(context.store, context.directory, expected);
  });
});

/**
 * A first life, `breakProof`, a restart's first step and then `commitsAfter`
 * commits and one more step; every restore point restores exactly. The
 * generations before and after, and the snapshots in the bucket.
 */
async function restartAfter(
  breakProof: (context: ReturnType<typeof setUp>) => void,
  commitsAfter: number,
): Promise<{ before: number; after: number; snapshots: number }> {
  const context = setUp();
  const expected = new Map<number, string>();
  const before = await firstLife(context, expected);
  breakProof(context);
  const { worker } = context.open();
  await worker.runOnce();
  if (commitsAfter > 0) {
    context.commit(commitsAfter);
    await worker.runOnce();
  }
  const points = await listRestorePoints(context.store, 'p');
  expected.set(points.at(-1)!.commitSeq, hashOf(context.path));
  await restoresExactly(context.store, context.directory, expected);
  return {
    before: before.walGeneration!,
    after: points.at(-1)!.walGeneration!,
    snapshots: snapshotKeys(await objects(context.store)).length,
  };
}

describe('a restart takes a new snapshot when the proof fails', () => {
  const cases: [string, (context: ReturnType<typeof setUp>) => void][] = [
    ['most pages rewritten while backupd was stopped', (context) => context.commit(150)],
    [
      'a record whose digest is not the database’s',
      (context) => {
        const path = sqliteSidecarFiles(context.path).resume;
        const record = JSON.parse(readFileSync(path, 'utf8')) as { sha256: string };
        record.sha256 = record.sha256.replace(/^./, (c) => (c === '0' ? '1' : '0'));
        writeFileSync(path, JSON.stringify(record));
      },
    ],
  ];
  for (const [name, breakProof] of cases) {
    it(`${name}: a new generation on a new snapshot, every restore point exact`, async () => {
      const { before, after, snapshots } = await restartAfter(breakProof, 0);
      expect(after).toBe(before + 1);
      expect(snapshots).toBe(2);
    });
  }

  it('commits after the last restore point leave no record at the stop', async () => {
    const context = setUp();
    const { source, worker } = context.open();
    context.commit(5);
    await worker.runOnce();
    context.commit(2);
    // Captured and maybe shipped, but the worker never said it is in a
    // restore point LATEST names: no record.
    await source.close();
    expect(() => readFileSync(sqliteSidecarFiles(context.path).resume)).toThrow(/ENOENT/);
  });
});

describe('a restart without a usable record proves its state against the bucket', () => {
  const cases: [string, (context: ReturnType<typeof setUp>) => void][] = [
    [
      'a record that names another log end',
      (context) => {
        const path = sqliteSidecarFiles(context.path).resume;
        const record = JSON.parse(readFileSync(path, 'utf8')) as { logEnd: number };
        record.logEnd -= 1;
        writeFileSync(path, JSON.stringify(record));
      },
    ],
    ['a damaged record', (context) => writeFileSync(sqliteSidecarFiles(context.path).resume, '{')],
    ['no record', (context) => rmSync(sqliteSidecarFiles(context.path).resume)],
  ];
  for (const [name, breakProof] of cases) {
    it(`${name}: reads the restore point back and continues its generation, no snapshot, every restore point exact`, async () => {
      const { before, after, snapshots } = await restartAfter(breakProof, 2);
      expect(after).toBe(before);
      expect(snapshots).toBe(1);
    });
  }
});
