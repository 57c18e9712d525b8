/**
 * Restore of the latest state rolls forward: a worker abandoned without a
 * final restore point (a SIGKILL: nothing after its last request) after
 * several ships past its last manifest; a restore of the latest state holds
 * every shipped commit, file for file. And a chain that cannot be proven —
 * a segment with a wrong `previous`, a gap, a segment of another lineage, a
 * `.seg` that does not decode, a later generation in the bucket — stops the
 * roll-forward before it, says so, and nothing after the break is applied.
 * On the local stores and on every real server.
 */
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BackupWorker } from '@x/backup-worker';
import { FakeClock } from '@x/lease';
import {
  compactedSegmentKey,
  latestKey,
  type Manifest,
  parseLatest,
  parseManifest,
  parseSegmentKey,
  segmentKey,
  snapshotKey,
} from '@x/manifest';
import { findUnnamedNewerDataAfter, NoRestorePointError } from '@x/restore';
import { FramedDirSource, type FramedRestoreOptions, restoreFramedStore } from '@x/source-framed';
import type { ObjectStore } from '@x/store';
import { decodeSegmentObject, encodeSegmentObject, segmentObjectFieldsOf } from '@x/wal-segment';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FramedTestEngine } from './helpers/framed-engine.ts';
import { realStoreCases } from './helpers/real-stores.ts';
import { CountingStore, localStoreCases, type StoreCase } from './helpers/stores.ts';

/** Ships after the last restore point, each one segment of `COMMITS_PER_SHIP` commits. */
const SHIPS = 3;
const COMMITS_PER_SHIP = 2;

interface Shipped {
  readonly manifestKey: string;
  readonly manifest: Manifest;
  /** The `.seg` keys shipped after the manifest, in order. */
  readonly unnamed: string[];
  /** Commits of the engine when the worker was abandoned (all shipped). */
  readonly commits: number;
}

/**
 * A restore point (the first step), then SHIPS steps that each ship one
 * segment and write no restore point (a restore-point interval the fake
 * clock never reaches); then the worker is abandoned as a SIGKILL leaves it.
 */
async function shipPastRestorePoint(
  store: ObjectStore,
  prefix: string,
  engine: FramedTestEngine,
): Promise<Shipped> {
  const worker = new BackupWorker({
    store,
    prefix,
    source: new FramedDirSource({ directory: engine.directory, engine }),
    clock: new FakeClock(),
    manifestIntervalMs: 3_600_000,
    retain: 100,
  });
  await engine.commit(2);
  await worker.runOnce();
  const manifestKey = parseLatest((await store.get(latestKey(prefix)))!.body, { prefix });
  const manifest = parseManifest((await store.get(manifestKey))!.body, { prefix });
  const unnamed: string[] = [];
  for (let ship = 0; ship < SHIPS; ship += 1) {
    await engine.commit(COMMITS_PER_SHIP);
    await worker.runOnce();
  }
  const listed = await store.list(`${prefix}/wal/`);
  const named = new Set(manifest.segments.map((segment) => segment.key));
  for (const object of listed.objects) {
    if (!named.has(object.key) && object.key.endsWith('.seg')) unnamed.push(object.key);
  }
  unnamed.sort((a, b) => parseSegmentKey(prefix, a)!.start - parseSegmentKey(prefix, b)!.start);
  // Still the first restore point: only a roll-forward restores more.
  expect(parseLatest((await store.get(latestKey(prefix)))!.body, { prefix })).toBe(manifestKey);
  expect(unnamed.length).toBe(SHIPS);
  return { manifestKey, manifest, unnamed, commits: engine.durableCommits };
}

/** Rewrites the `.seg` object at `key` with some header fields changed (body the same, re-encoded). */
async function reencode(
  store: ObjectStore,
  key: string,
  change: { previousCrc32?: number; lineage?: string },
): Promise<void> {
  const { header, body } = decodeSegmentObject((await store.get(key))!.body);
  const bytes = encodeSegmentObject(body, { ...segmentObjectFieldsOf(header), ...change });
  await store.delete(key);
  await store.put(key, bytes);
}

for (const storeCase of [...localStoreCases(), ...realStoreCases()] as StoreCase[]) {
  describe(`restore of the latest state rolls forward (${storeCase.name})`, () => {
    let work: string;
    let store: ObjectStore;
    let prefix: string;
    let close: () => Promise<void>;
    let engine: FramedTestEngine;
    let shipped: Shipped;
    beforeEach(async () => {
      work = await mkdtemp(join(tmpdir(), 'roll-forward-'));
      ({ store, prefix, close } = await storeCase.open());
      engine = await FramedTestEngine.create(join(work, 'source'));
      shipped = await shipPastRestorePoint(store, prefix, engine);
    });
    afterEach(async () => {
      await close();
      await rm(work, { recursive: true, force: true });
    });

    const restoreLatest = (name = 'restored') =>
      restoreFramedStore(store, prefix, join(work, name), {});

    it('after a kill past the last restore point, holds every shipped commit, file for file', async () => {
      const result = await restoreLatest();
      expect(result.manifestKey).toBe(shipped.manifestKey);
      expect(result.commitSeq).toBe(shipped.commits);
      expect(result.rolledForward).toEqual({
        fromCommitSeq: shipped.manifest.commitSeq,
        segments: SHIPS,
        commits: SHIPS * COMMITS_PER_SHIP,
      });
      for (const name of ['snapshot.bin', 'wal.bin']) {
        const names = await readdir(engine.directory);
        if (!names.includes(name)) continue;
        const [a, b] = await Promise.all([
          readFile(join(engine.directory, name)),
          readFile(join(work, 'restored', name)),
        ]);
        expect(Buffer.compare(a, b), name).toBe(0);
      }
      // What a restore rolled over is not "unnamed newer data" any more.
      const before = await findUnnamedNewerDataAfter(store, prefix, shipped.manifestKey);
      expect(before?.segments).toBe(SHIPS);
      const after = await findUnnamedNewerDataAfter(store, prefix, shipped.manifestKey, {
        afterRollForward: true,
      });
      expect(after).toMatchObject({
        segments: 0,
        rolledForward: { segments: SHIPS, commits: SHIPS * COMMITS_PER_SHIP },
      });
    });

    it('stops before a segment whose previous is not the CRC of the one before it', async () => {
      await reencode(store, shipped.unnamed[1]!, { previousCrc32: 0x12345678 });
      const result = await restoreLatest();
      expect(result.commitSeq).toBe(shipped.manifest.commitSeq + COMMITS_PER_SHIP);
      expect(result.rolledForward?.segments).toBe(1);
      expect(result.rolledForward?.stoppedAt?.key).toBe(shipped.unnamed[1]);
      expect(result.rolledForward?.stoppedAt?.reason).toMatch(/previousCrc32/);
    });

    it('stops at a gap: nothing after a missing segment is applied', async () => {
      await store.delete(shipped.unnamed[1]!);
      const result = await restoreLatest();
      expect(result.commitSeq).toBe(shipped.manifest.commitSeq + COMMITS_PER_SHIP);
      expect(result.rolledForward?.stoppedAt?.key).toBe(shipped.unnamed[2]);
      expect(result.rolledForward?.stoppedAt?.reason).toMatch(/not where the chain ends/);
      const left = await findUnnamedNewerDataAfter(store, prefix, shipped.manifestKey, {
        afterRollForward: true,
      });
      expect(left).toMatchObject({ segments: 1, firstKey: shipped.unnamed[2] });
    });

    it('stops before a segment of another lineage', async () => {
      await reencode(store, shipped.unnamed[0]!, { lineage: 'another-lineage' });
      const result = await restoreLatest();
      expect(result.commitSeq).toBe(shipped.manifest.commitSeq);
      expect(result.rolledForward?.segments).toBe(0);
      expect(result.rolledForward?.stoppedAt?.key).toBe(shipped.unnamed[0]);
      expect(result.rolledForward?.stoppedAt?.reason).toMatch(/lineage/);
    });

    it('never rolls over a raw .segment (no chain), and counts it as left behind', async () => {
      const key = shipped.unnamed[0]!;
      const range = parseSegmentKey(prefix, key)!;
      const raw = decodeSegmentObject((await store.get(key))!.body).body;
      await store.delete(key);
      const rawKey = segmentKey(prefix, range.generation, range.start, range.end);
      await store.put(rawKey, raw);
      const result = await restoreLatest();
      expect(result.commitSeq).toBe(shipped.manifest.commitSeq);
      expect(result.rolledForward?.stoppedAt).toEqual({
        key: rawKey,
        reason: 'a raw .segment object carries no chain CRC',
      });
      const left = await findUnnamedNewerDataAfter(store, prefix, shipped.manifestKey, {
        afterRollForward: true,
      });
      expect(left).toMatchObject({ segments: SHIPS, firstKey: rawKey });
    });

    it('never rolls over a compacted object, even one where the chain continues', async () => {
      // A compaction stored past the restore point, its fine inputs gone.
      const [first, second] = [shipped.unnamed[0]!, shipped.unnamed[1]!];
      const a = parseSegmentKey(prefix, first)!;
      const b = parseSegmentKey(prefix, second)!;
      const bodies = [first, second].map(async (key) =>
        decodeSegmentObject((await store.get(key))!.body),
      );
      const [one, two] = await Promise.all(bodies);
      const merged = Buffer.concat([one!.body, two!.body]);
      const from = shipped.manifest.commitSeq;
      const compacted = compactedSegmentKey(
        prefix,
        a.generation,
        a.start,
        b.end,
        1,
        from,
        from + 2 * COMMITS_PER_SHIP,
      );
      await store.put(
        compacted,
        encodeSegmentObject(merged, {
          codec: 'zstd',
          kind: 'compacted',
          generation: a.generation,
          start: a.start,
          end: b.end,
          commits: 2 * COMMITS_PER_SHIP,
          previousCrc32: one!.header.previousCrc32,
          chainEndCrc32: 0,
          decodedLength: merged.length,
          lineage: one!.header.lineage,
        }),
      );
      await store.delete(first);
      await store.delete(second);
      const result = await restoreLatest();
      expect(result.commitSeq).toBe(shipped.manifest.commitSeq);
      expect(result.rolledForward?.stoppedAt?.key).toBe(shipped.unnamed[2]);
    });

    it('stops before a .seg that does not decode', async () => {
      const key = shipped.unnamed[2]!;
      const bytes = new Uint8Array((await store.get(key))!.body);
      const headerBytes = bytes[4]! | (bytes[5]! << 8);
      for (let i = headerBytes; i < bytes.length; i += 1) bytes[i] = 0xff;
      await store.delete(key);
      await store.put(key, bytes);
      const result = await restoreLatest();
      expect(result.commitSeq).toBe(shipped.manifest.commitSeq + 2 * COMMITS_PER_SHIP);
      expect(result.rolledForward?.stoppedAt?.key).toBe(key);
    });

    it('does not roll forward when a later generation is in the bucket, and says so', async () => {
      const later = shipped.manifest.walGeneration + 1;
      await store.put(snapshotKey(prefix, later, 99), new Uint8Array([1, 2, 3]));
      const result = await restoreLatest();
      expect(result.commitSeq).toBe(shipped.manifest.commitSeq);
      expect(result.rolledForward).toEqual({
        fromCommitSeq: shipped.manifest.commitSeq,
        segments: 0,
        commits: 0,
        laterGeneration: later,
      });
    });

    it('costs three LISTs and two GETs per rolled segment more than a restore of the restore point', async () => {
      const counted = async (options: FramedRestoreOptions, name: string) => {
        const counting = new CountingStore(store);
        await restoreFramedStore(counting, prefix, join(work, name), options);
        return { ...counting.counts };
      };
      const named = await counted(
        { target: { kind: 'restore-point', manifestKey: shipped.manifestKey } },
        'named',
      );
      const latest = await counted({}, 'latest');
      // LATEST is read for the latest state only (one GET); the roll-forward lists
      // wal/ and snapshots/ (delimiter) and the generation's wal/{g}/ (one page),
      // reads each chained object once to prove it, then downloads it.
      expect(latest.LIST - named.LIST).toBe(3);
      expect(latest.GET - named.GET).toBe(1 + 2 * SHIPS);
      expect(latest.PUT + latest.DELETE + latest.UPLOAD).toBe(0);
    });

    it('a restore of a named restore point does not roll forward', async () => {
      const result = await restoreFramedStore(store, prefix, join(work, 'named'), {
        target: { kind: 'restore-point', manifestKey: shipped.manifestKey },
      });
      expect(result.commitSeq).toBe(shipped.manifest.commitSeq);
      expect(result.rolledForward).toBeUndefined();
    });

    it('a named restore point with rollForward reaches the commits chained after it, and no further', async () => {
      const { manifestKey } = shipped;
      const own = shipped.manifest.commitSeq;
      const named = (name: string, commitSeq?: number, rollForward?: boolean) =>
        restoreFramedStore(store, prefix, join(work, name), {
          target: { kind: 'restore-point', manifestKey, commitSeq, rollForward },
        });
      const whole = await named('whole', undefined, true);
      expect(whole.commitSeq).toBe(shipped.commits);
      expect(whole.rolledForward).toEqual({
        fromCommitSeq: own,
        segments: SHIPS,
        commits: SHIPS * COMMITS_PER_SHIP,
      });
      // A commit inside the second chained segment: the result counts what of the roll it used.
      const cut = await named('cut', own + COMMITS_PER_SHIP + 1, true);
      expect(cut.commitSeq).toBe(own + COMMITS_PER_SHIP + 1);
      expect(cut.rolledForward).toEqual({
        fromCommitSeq: own,
        segments: 2,
        commits: COMMITS_PER_SHIP + 1,
      });
      // Its own commit: nothing of the roll used.
      expect((await named('own', own, true)).rolledForward).toBeUndefined();
      const beyond = await named('beyond', shipped.commits + 1, true).catch((e: unknown) => e);
      expect(NoRestorePointError.isInstance(beyond), String(beyond)).toBe(true);
      expect((beyond as Error).message).toContain(`${manifestKey} rolled forward restores commits`);
      // Without rollForward the chained commits are past the restore point.
      const unrolled = await named('unrolled', own + 1).catch((e: unknown) => e);
      expect(NoRestorePointError.isInstance(unrolled), String(unrolled)).toBe(true);
      expect((unrolled as Error).message).toMatch(
        new RegExp(`${manifestKey} restores commits \\d+ to ${own}, not ${own + 1}`),
      );
    });
  });
}
