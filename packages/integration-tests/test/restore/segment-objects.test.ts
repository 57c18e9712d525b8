/**
 * Compressed commit-log segments end to end, on the framed engine with the
 * real worker: what the worker stores (`.seg` keys, the envelope's header
 * fields, the chain of stored CRCs from the snapshot on, manifest entries of
 * the stored bytes), that restore reads them exactly, that a chain mixing
 * `.seg` and old `.segment` objects restores (and a broken chain does not), and that a `.seg`
 * object damaged behind a matching manifest entry is refused with nothing
 * in the target.
 */
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BackupWorker } from '@x/backup-worker';
import { FakeClock } from '@x/lease';
import {
  crc32Hex,
  latestKey,
  type Manifest,
  parseLatest,
  parseManifest,
  parseSegmentKey,
  parseSnapshotKey,
  segmentKey,
  serializeManifest,
} from '@x/manifest';
import { ObjectCorruptError, ObjectEncodingError, verify } from '@x/restore';
import { FramedDirSource, restoreFramedStore } from '@x/source-framed';
import { MemoryStore } from '@x/store';
import { decodeSegmentObject, readSegmentObjectHeader } from '@x/wal-segment';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { checkRestorePointContent } from '../helpers/check-bucket.ts';
import { FramedTestEngine } from '../helpers/framed-engine.ts';

const PREFIX = 'backups/seg';

async function latest(store: MemoryStore): Promise<{ key: string; manifest: Manifest }> {
  const key = parseLatest((await store.get(latestKey(PREFIX)))!.body, { prefix: PREFIX });
  return { key, manifest: parseManifest((await store.get(key))!.body, { prefix: PREFIX }) };
}

describe('.seg segments written by the worker', () => {
  let work: string;
  let store: MemoryStore;
  let engine: FramedTestEngine;
  beforeEach(async () => {
    work = await mkdtemp(join(tmpdir(), 'segment-objects-'));
    store = new MemoryStore();
    engine = await FramedTestEngine.create(join(work, 'source'));
    const worker = new BackupWorker({
      store,
      prefix: PREFIX,
      source: new FramedDirSource({ directory: engine.directory, engine }),
      clock: new FakeClock(),
      manifestIntervalMs: 0,
      retain: 100,
    });
    await engine.commit(2);
    await worker.runOnce();
    await engine.snapshot();
    for (let step = 0; step < 3; step += 1) {
      await engine.commit(3);
      await worker.runOnce();
    }
  });
  afterEach(async () => {
    await rm(work, { recursive: true, force: true });
  });

  it('stores envelopes chained from the snapshot, with manifest entries of the stored bytes', async () => {
    const { manifest } = await latest(store);
    expect(manifest.segments.length).toBe(3);
    const snapshot = manifest.files.find(
      (file) => parseSnapshotKey(PREFIX, file.key)?.generation === manifest.walGeneration,
    );
    expect(snapshot).toBeDefined();
    let previous = Number.parseInt(snapshot!.crc32, 16);
    for (const entry of manifest.segments) {
      const range = parseSegmentKey(PREFIX, entry.key)!;
      expect(range.layout).toBe('object');
      expect(entry.key.endsWith('.seg')).toBe(true);
      const stored = (await store.get(entry.key))!.body;
      expect(entry.size).toBe(stored.byteLength);
      expect(entry.crc32).toBe(crc32Hex(stored));
      const header = readSegmentObjectHeader(stored);
      expect(header).toMatchObject({
        codec: 'zstd',
        kind: 'segment',
        generation: range.generation,
        start: range.start,
        end: range.end,
        commits: entry.frames,
        previousCrc32: previous,
        lineage: entry.lineage,
      });
      expect(decodeSegmentObject(stored).body.byteLength).toBe(range.end - range.start);
      previous = Number.parseInt(entry.crc32, 16);
    }
    await checkRestorePointContent(store, PREFIX, manifest);
    expect((await verify(store, PREFIX, { deep: true })).ok).toBe(true);
  });

  it('a chain mixing .seg and .segment objects restores exactly; a broken chain is refused', async () => {
    const { key, manifest } = await latest(store);
    /** The segment at `index` as an earlier release stored it: the bytes themselves. */
    const asRaw = async (index: number) => {
      const entry = manifest.segments[index]!;
      const range = parseSegmentKey(PREFIX, entry.key)!;
      const raw = decodeSegmentObject((await store.get(entry.key))!.body).body;
      const rawKey = segmentKey(PREFIX, range.generation, range.start, range.end);
      await store.put(rawKey, raw);
      return { ...entry, key: rawKey, size: raw.byteLength, crc32: crc32Hex(raw) };
    };
    const put = async (at: Manifest) =>
      store.put(key, new TextEncoder().encode(serializeManifest(at, { prefix: PREFIX })));

    // Two .seg, then a raw .segment (a raw object carries no chain field).
    const mixed: Manifest = {
      ...manifest,
      segments: [manifest.segments[0]!, manifest.segments[1]!, await asRaw(2)],
    };
    await put(mixed);
    await checkRestorePointContent(store, PREFIX, mixed);
    const restored = await restoreFramedStore(store, PREFIX, join(work, 'mixed'), {
      target: { kind: 'restore-point', manifestKey: key },
    });
    expect(restored.commitSeq).toBe(manifest.commitSeq);
    const wal = await readFile(join(work, 'mixed', 'wal.bin'));
    expect(wal.byteLength).toBe(parseSegmentKey(PREFIX, manifest.segments[2]!.key)!.end);

    // A raw first segment: the .seg after it names the stored CRC of the
    // object the worker chained it to, not this one's — refused.
    await put({ ...manifest, segments: [await asRaw(0), ...manifest.segments.slice(1)] });
    const target = join(work, 'broken-chain');
    const error = await restoreFramedStore(store, PREFIX, target, {
      target: { kind: 'restore-point', manifestKey: key },
    }).catch((caught: unknown) => caught);
    expect(ObjectEncodingError.isInstance(error), String(error)).toBe(true);
    expect((error as ObjectEncodingError).field).toBe('previousCrc32');
    expect((error as ObjectEncodingError).key).toBe(manifest.segments[1]!.key);
    expect(await readdir(target).catch(() => [])).toEqual([]);
  });

  it('a .seg damaged behind a matching manifest entry is refused, naming key and field, and the target stays empty', async () => {
    const { key, manifest } = await latest(store);
    const last = manifest.segments.at(-1)!;
    const stored = Uint8Array.from((await store.get(last.key))!.body);
    const headerBytes = readSegmentObjectHeader(stored).headerBytes;
    stored.fill(0x55, headerBytes);
    await store.put(last.key, stored);
    const damaged: Manifest = {
      ...manifest,
      segments: manifest.segments.map((segment) =>
        segment === last ? { ...segment, crc32: crc32Hex(stored) } : segment,
      ),
    };
    await store.put(key, new TextEncoder().encode(serializeManifest(damaged, { prefix: PREFIX })));
    const target = join(work, 'refused');
    const error = await restoreFramedStore(store, PREFIX, target, {
      target: { kind: 'restore-point', manifestKey: key },
    }).catch((caught: unknown) => caught);
    expect(ObjectEncodingError.isInstance(error)).toBe(true);
    expect(ObjectCorruptError.isInstance(error)).toBe(true);
    expect((error as ObjectEncodingError).key).toBe(last.key);
    expect((error as ObjectEncodingError).field).toBe('body');
    expect((error as Error).message).toContain(last.key);
    expect(await readdir(target).catch(() => [])).toEqual([]);
    const report = await verify(store, PREFIX, { deep: true });
    const problems = report.manifests.find((m) => m.key === key)!.problems;
    expect(problems).toEqual([expect.objectContaining({ kind: 'object-encoding', key: last.key })]);
  });
});
