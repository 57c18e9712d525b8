/**
 * Compaction of the commit log with the SQLite source and the worker: runs
 * of fine segments become level-1 objects, those become level-2 objects;
 * the newest restore point names a bounded number of objects; every kept
 * restore point restores exactly; the fine objects a compaction replaced
 * leave the bucket; a time inside a compacted range restores to the
 * compaction's boundary at or before it, never to a newer state.
 */
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { BackupWorker, type BackupWorkerOptions } from '@x/backup-worker';
import { FakeClock } from '@x/lease';
import { crc32Hex, parseManifest, parseSegmentKey } from '@x/manifest';
import { listRestorePoints, type RestoreTarget, restore, verify } from '@x/restore';
import { MemoryStore, type ObjectStore } from '@x/store';
import { ForwardingStore, type StoreOperation } from '@x/store/adapter';
import { decodeSegmentObject, encodeSegmentObject, segmentObjectFieldsOf } from '@x/wal-segment';
import { describe, expect, it } from 'vitest';
import { sqliteContentHash } from '../src/content-hash.ts';
import { sqliteCommitAtTime } from '../src/restore-point-at-time.ts';
import { sqliteMaterializer } from '../src/sqlite-materializer.ts';
import { SqliteSource } from '../src/sqlite-source.ts';
import { hashOf as contentHashOf, testWorkspace } from './harness.ts';

const workspace = testWorkspace();

const START = Date.UTC(2026, 0, 1);

async function setUp(
  options: Partial<BackupWorkerOptions>,
  wrap: (store: MemoryStore) => ObjectStore = (store) => store,
) {
  const directory = workspace.directory('compaction');
  const path = join(directory, 'app.db');
  const application = new DatabaseSync(path, { timeout: 5000 });
  workspace.onCleanup(() => application.close());
  application.exec('PRAGMA journal_mode=WAL; CREATE TABLE t (id INTEGER PRIMARY KEY, body BLOB)');
  const insert = application.prepare('INSERT INTO t (body) VALUES (?)');
  for (let i = 0; i < 32; i += 1) insert.run(randomBytes(1000));
  const clock = new FakeClock();
  clock.advance(START);
  // Commit times as the clock says, so a time search sees the test's time.
  const source = SqliteSource.open({
    path,
    captureIntervalMs: 0,
    wallNow: () => clock.wallNow(),
  });
  workspace.onCleanup(() => source.close());
  const store = new MemoryStore();
  const worker = new BackupWorker({
    store: wrap(store),
    prefix: 'p',
    source,
    clock,
    manifestIntervalMs: 0,
    snapshotIntervalMs: 0,
    snapshotLogFactor: 0,
    ...options,
  });
  const rewrite = application.prepare('UPDATE t SET body = ? WHERE id = ?');
  const update = (row: number) => rewrite.run(randomBytes(1000), row);
  return { directory, path, clock, store, worker, update };
}

/** Steps until a compaction in flight has finished and been applied. */
async function stepSettled(worker: BackupWorker): Promise<void> {
  for (let i = 0; i < 3; i += 1) {
    await worker.runOnce();
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  await worker.runOnce();
}

async function newestManifest(store: MemoryStore) {
  const newest = (await listRestorePoints(store, 'p')).filter((p) => p.status === 'ok').at(-1)!;
  const object = await store.get(newest.manifestKey);
  return { point: newest, manifest: parseManifest(object!.body, { prefix: 'p' }) };
}

/** The last commit at or before `commitSeq` that ends an object of `manifest`'s chain. */
function boundaryBefore(manifest: ReturnType<typeof parseManifest>, commitSeq: number): number {
  let boundary = manifest.oldestCommitSeq + manifest.files.reduce((n, f) => n + f.frames, 0);
  for (const s of manifest.segments) {
    if (boundary + s.frames > commitSeq) break;
    boundary += s.frames;
  }
  return boundary;
}

async function keysUnder(store: MemoryStore, under: string): Promise<string[]> {
  return (await store.list(under)).objects.map((o) => o.key);
}

async function restoredHash(
  store: MemoryStore,
  directory: string,
  name: string,
  options: { target?: RestoreTarget },
): Promise<string> {
  const target = join(directory, name);
  await restore(store, 'p', target, {
    ...options,
    materializer: sqliteMaterializer({ databaseName: 'app.db' }),
  });
  return contentHashOf(join(target, 'app.db'), sqliteContentHash);
}

describe('compaction of the commit log (SQLite)', () => {
  it('merges fine segments in levels; the newest restore point stays small and every kept one restores exactly', async () => {
    const { directory, path, clock, store, worker, update } = await setUp({
      compactionLevels: [30_000, 300_000],
      // Replaced fine segments leave at once (the window: the next case).
      exactWindowMs: 0,
    });
    const hashes = new Map<number, string>();
    const times = new Map<number, number>();
    // 12 minutes, one step every 5 s, a few commits each.
    for (let step = 0; step < 144; step += 1) {
      for (let i = 0; i < 3; i += 1) update(1 + ((step * 3 + i) % 32));
      await stepSettled(worker);
      const { point } = await newestManifest(store);
      hashes.set(point.commitSeq, contentHashOf(path, sqliteContentHash));
      times.set(point.commitSeq, clock.wallNow());
      clock.advance(5_000);
    }
    const { point, manifest } = await newestManifest(store);
    const levels = manifest.segments.map((s) => {
      const parsed = parseSegmentKey('p', s.key)!;
      return parsed.layout === 'compacted' ? parsed.level : 0;
    });
    // Two closed 5 min windows as level 2, the open one's 30 s windows as
    // level 1, the newest 30 s as fine segments: bounded by the levels, not
    // by the 144 steps.
    expect(levels.filter((l) => l === 2).length).toBeGreaterThanOrEqual(2);
    expect(levels.filter((l) => l === 1).length).toBeGreaterThanOrEqual(1);
    expect(manifest.segments.length).toBeLessThanOrEqual(2 + 10 + 8);
    // Levels never go back up along the chain.
    for (let i = 1; i < levels.length; i += 1)
      if (levels[i]! > 0) expect(levels[i]!).toBeLessThanOrEqual(levels[i - 1]!);

    // What ls shows of it: runs of one level, levels falling, contiguous up
    // to the restore point's commit, the fine tail last; each compacted
    // object's end is a boundary that restores (checked below).
    const runs = point.granularity!;
    // Without an exact window no compacted object is exact.
    expect(runs.every((run) => run.exactAfter === undefined)).toBe(true);
    expect(runs.map((run) => run.level)).toEqual([...new Set(levels)].sort((a, b) => b - a));
    for (let i = 1; i < runs.length; i += 1) expect(runs[i]!.after).toBe(runs[i - 1]!.to);
    expect(runs.at(-1)!.to).toBe(point.commitSeq);
    expect(runs.reduce((n, run) => n + run.objects, 0)).toBe(manifest.segments.length);

    // The latest state, exactly.
    expect(await restoredHash(store, directory, 'latest', {})).toBe(hashes.get(point.commitSeq));

    // Every kept restore point, exactly.
    const points = (await listRestorePoints(store, 'p')).filter((p) => p.status === 'ok');
    expect(points.length).toBeGreaterThan(0);
    for (const kept of points) {
      expect(
        await restoredHash(store, directory, `kept-${kept.commitSeq}`, {
          target: { kind: 'restore-point', manifestKey: kept.manifestKey },
        }),
      ).toBe(hashes.get(kept.commitSeq));
    }

    // The fine segments compacted away are gone: every segment left is
    // named by a kept restore point.
    const named = new Set<string>();
    for (const kept of points) {
      const object = await store.get(kept.manifestKey);
      for (const s of parseManifest(object!.body, { prefix: 'p' }).segments) named.add(s.key);
    }
    const left = await keysUnder(store, 'p/wal/');
    expect(left.filter((key) => !named.has(key))).toEqual([]);

    // A compaction boundary restores exactly; a commit inside a compacted
    // range is refused, never answered with another state.
    let boundary = manifest.oldestCommitSeq + manifest.files.reduce((n, f) => n + f.frames, 0);
    let inside: number | undefined;
    let checkedBoundaries = 0;
    for (const s of manifest.segments) {
      const parsed = parseSegmentKey('p', s.key)!;
      if (parsed.layout === 'compacted') inside ??= boundary + 1;
      boundary += s.frames;
      const hash = hashes.get(boundary);
      if (parsed.layout === 'compacted' && hash !== undefined && checkedBoundaries < 3) {
        checkedBoundaries += 1;
        expect(
          await restoredHash(store, directory, `boundary-${boundary}`, {
            target: { kind: 'commit', commitSeq: boundary },
          }),
        ).toBe(hash);
      }
    }
    expect(checkedBoundaries).toBeGreaterThan(0);
    await expect(
      restoredHash(store, directory, 'inside', {
        target: { kind: 'commit', commitSeq: inside! },
      }),
    ).rejects.toThrow(/restorable only with the whole batch|inside a batch/);

    // A time: the newest boundary at or before it, never a newer state.
    const [someCommit, someTime] = [...times][40]!;
    const found = await sqliteCommitAtTime(store, 'p', someTime + 1);
    expect(found).not.toBeNull();
    expect(found!.commitSeq).toBeLessThanOrEqual(someCommit);
    expect(found!.commitTime).toBeLessThanOrEqual(someTime + 1);
  });

  it('restores every commit of the exact window exactly, by commit and by time, and only the window keeps fine segments', async () => {
    const { directory, path, clock, store, worker, update } = await setUp({
      compactionLevels: [30_000, 300_000],
    });
    const hashAt = new Map<number, string>();
    const steps: { time: number; last: number }[] = [];
    // 12 minutes, one step every 5 s, three commits each.
    for (let step = 0; step < 144; step += 1) {
      const hashes: string[] = [];
      for (let i = 0; i < 3; i += 1) {
        update(1 + ((step * 3 + i) % 32));
        hashes.push(contentHashOf(path, sqliteContentHash));
      }
      await stepSettled(worker);
      const { point } = await newestManifest(store);
      for (const [i, hash] of hashes.entries()) hashAt.set(point.commitSeq - 2 + i, hash);
      steps.push({ time: clock.wallNow(), last: point.commitSeq });
      clock.advance(5_000);
    }
    const now = clock.wallNow();
    const { manifest } = await newestManifest(store);
    expect(manifest.segments.some((s) => parseSegmentKey('p', s.key)?.layout === 'compacted')).toBe(
      true,
    );
    // Steps of the last 5 minutes whose commits the newest restore point
    // names only inside compacted objects: each commit, and each step's time
    // and the moment before it, restore exactly.
    const inWindow = steps.filter((s) => s.time > now - 300_000 + 5_000);
    const sampled = inWindow.filter((_, i) => i % 6 === 1);
    expect(sampled.length).toBeGreaterThanOrEqual(8);
    let insideCompacted = 0;
    for (const { time, last } of sampled) {
      for (const commitSeq of [last - 2, last - 1, last]) {
        expect(
          await restoredHash(store, directory, `commit-${commitSeq}`, {
            target: { kind: 'commit', commitSeq },
          }),
          `commit ${commitSeq}`,
        ).toBe(hashAt.get(commitSeq));
      }
      for (const [asked, expected] of [
        [time, last],
        [time - 1, last - 3],
      ] as const) {
        const found = await sqliteCommitAtTime(store, 'p', asked);
        expect(found?.commitSeq, `time ${asked - START}`).toBe(expected);
        expect(
          await restoredHash(store, directory, `time-${asked}`, { target: found!.target }),
        ).toBe(hashAt.get(expected));
      }
      if (boundaryBefore(manifest, last) < last) insideCompacted += 1;
    }
    // The window is exercised where compaction merged, not only in the fine tail.
    expect(insideCompacted).toBeGreaterThanOrEqual(5);
    // ls says so: the newest compacted objects are exact from a commit before the window's first sampled one.
    const latest = (await listRestorePoints(store, 'p')).find((p) => p.latest)!;
    const exactFrom = latest.granularity!.flatMap((run) =>
      run.level > 0 && run.exactAfter !== undefined ? [run.exactAfter] : [],
    );
    expect(exactFrom.length).toBeGreaterThan(0);
    expect(Math.min(...exactFrom)).toBeLessThan(sampled[0]!.last - 2);
    // Older than the window: the newest boundary at or before, never newer.
    const old = steps[20]!;
    const found = await sqliteCommitAtTime(store, 'p', old.time - 1);
    expect(found!.commitSeq).toBeLessThanOrEqual(old.last - 3);

    // Fine segments no restore point names are only those of the window.
    const named = new Set<string>();
    for (const kept of (await listRestorePoints(store, 'p')).filter((p) => p.status === 'ok'))
      for (const s of parseManifest((await store.get(kept.manifestKey))!.body, { prefix: 'p' })
        .segments)
        named.add(s.key);
    const unnamed = (await keysUnder(store, 'p/wal/')).filter((key) => !named.has(key));
    expect(unnamed.length).toBeGreaterThan(0);
    for (const key of unnamed) expect(parseSegmentKey('p', key)?.layout).toBe('object');
    // About one per step of the last 5 minutes and a level-1 window.
    expect(unnamed.length).toBeLessThanOrEqual((300_000 + 30_000) / 5_000 + 2);
    expect((await verify(store, 'p', { deep: true })).ok).toBe(true);

    // Altered fine segments are never restored from: the commit is refused as before.
    const inside = sampled.find(({ last }) => boundaryBefore(manifest, last) < last - 2)!;
    for (const key of unnamed) {
      const bytes = (await store.get(key))!.body.slice();
      bytes[bytes.length - 1]! ^= 0xff;
      await store.put(key, bytes);
    }
    await expect(
      restoredHash(store, directory, 'altered', {
        target: { kind: 'commit', commitSeq: inside.last - 1 },
      }),
    ).rejects.toThrow(/inside a batch/);
  });

  it('merges what this worker stored without downloading it again', async () => {
    const reads: string[] = [];
    const counting = (inner: MemoryStore) =>
      new (class extends ForwardingStore {
        protected override intercept<T>(
          operation: StoreOperation,
          key: string,
          _signal: AbortSignal | undefined,
          proceed: () => Promise<T>,
        ): Promise<T> {
          if ((operation === 'get' || operation === 'getStream') && key.startsWith('p/wal/'))
            reads.push(key);
          return proceed();
        }
      })(inner);
    const { clock, store, worker, update } = await setUp({ compactionLevels: [30_000] }, counting);
    for (let step = 0; step < 16; step += 1) {
      update(1 + step);
      await stepSettled(worker);
      clock.advance(5_000);
    }
    const { manifest } = await newestManifest(store);
    expect(manifest.segments.some((s) => parseSegmentKey('p', s.key)!.layout === 'compacted')).toBe(
      true,
    );
    expect(reads).toEqual([]);
  });

  it('refuses a compacted object whose chain end is not where the next entry begins', async () => {
    const { directory, clock, store, worker, update } = await setUp({
      compactionLevels: [30_000],
    });
    for (let step = 0; step < 10; step += 1) {
      update(1 + step);
      await stepSettled(worker);
      clock.advance(5_000);
    }
    const { point, manifest } = await newestManifest(store);
    const at = manifest.segments.findIndex(
      (s, i) =>
        parseSegmentKey('p', s.key)!.layout === 'compacted' && i + 1 < manifest.segments.length,
    );
    expect(at).toBeGreaterThanOrEqual(0);
    // The object re-encoded with another chain end, and the manifest
    // rewritten to its size and CRC-32: every other check passes.
    const entry = manifest.segments[at]!;
    const { header, body } = decodeSegmentObject((await store.get(entry.key))!.body);
    const forged = encodeSegmentObject(body, {
      ...segmentObjectFieldsOf(header),
      chainEndCrc32: (header.chainEndCrc32! ^ 1) >>> 0,
    });
    await store.put(entry.key, forged);
    const json = JSON.parse(new TextDecoder().decode((await store.get(point.manifestKey))!.body));
    json.segments[at].size = forged.byteLength;
    json.segments[at].crc32 = crc32Hex(forged);
    await store.put(point.manifestKey, new TextEncoder().encode(JSON.stringify(json)));
    const next = manifest.segments[at + 1]!.key;
    const refused = await restoredHash(store, directory, 'forged', {}).then(
      () => 'restored',
      (error: Error) => error.message,
    );
    expect(refused).toContain(next);
    expect(refused).toContain('previousCrc32');
    expect(refused).toContain('compacted object before it');
    // verify --deep finds it too, and blames the restore point.
    const verified = await verify(store, 'p', { deep: true });
    expect(verified.ok).toBe(false);
    const blamed = verified.manifests.find((m) => m.key === point.manifestKey)!;
    expect(blamed.problems.map((p) => [p.kind, p.key])).toContainEqual(['object-encoding', next]);
  });

  it('writes a restore point after a merge the bytes rule made, without waiting for the interval', async () => {
    const { store, worker, update } = await setUp({
      manifestIntervalMs: 3_600_000,
      // One window that stays open: only the bytes rule merges.
      compactionLevels: [3_600_000],
    });
    await worker.runOnce();
    const first = await newestManifest(store);
    // Every row rewritten each step: the fine segments pass the database's
    // size within a few steps.
    for (let step = 0; step < 4; step += 1) {
      for (let row = 1; row <= 32; row += 1) update(row);
      await stepSettled(worker);
    }
    const { point, manifest } = await newestManifest(store);
    expect(point.manifestKey).not.toBe(first.point.manifestKey);
    expect(manifest.segments.some((s) => parseSegmentKey('p', s.key)?.layout === 'compacted')).toBe(
      true,
    );
    // The restore points that named the merged segments are gone with them.
    const kept = await listRestorePoints(store, 'p');
    expect(kept.length).toBeLessThanOrEqual(3);
  });

  it('by default merges each 30 s of fine segments; off keeps every one', async () => {
    // Steps 5 s apart for 100 s: three closed 30 s windows of six segments.
    const run = async (options: Partial<BackupWorkerOptions>) => {
      const { clock, store, worker, update } = await setUp(options);
      for (let step = 0; step < 20; step += 1) {
        update(1 + step);
        await stepSettled(worker);
        clock.advance(5_000);
      }
      const { manifest } = await newestManifest(store);
      return manifest.segments.map((s) => {
        const parsed = parseSegmentKey('p', s.key)!;
        return parsed.layout === 'compacted' ? parsed.level : 0;
      });
    };
    const byDefault = await run({});
    expect(byDefault.filter((level) => level === 1).length).toBeGreaterThanOrEqual(2);
    expect(byDefault.length).toBeLessThan(12);
    const off = await run({ compactionLevels: [] });
    expect(off).toEqual(new Array(20).fill(0));
  });
});
