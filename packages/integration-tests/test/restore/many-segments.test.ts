/**
 * Many small segments and one large one: restore fetches small segments
 * ahead (bounded in count and bytes) and streams large ones in their turn,
 * and still writes the WAL in order, checks every segment, and cleans up
 * when one of the fetched-ahead segments is corrupt.
 */
import { join } from 'node:path';
import {
  crc32Hex,
  latestKey,
  type Manifest,
  manifestKey,
  type SegmentEntry,
  segmentKey,
  serializeLatest,
  serializeManifest,
} from '@x/manifest';
import { ObjectCorruptError } from '@x/restore';
import { restoreFramedStore } from '@x/source-framed';
import { type CallOptions, type GetStreamResult, MemoryStore, type ObjectStore } from '@x/store';
import { encodeFrame } from '@x/wal-segment';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { randomBytes, readFiles, seededRandom, snapshotTree } from './fixture.ts';
import { scratchDirectory } from './stores.ts';

const PREFIX = 'backups/many';
const LINEAGE = 'manysegments';

/** Counts concurrent `getStream` bodies being read. */
class ConcurrentBodiesStore extends MemoryStore {
  inFlight = 0;
  maxInFlight = 0;

  override async getStream(
    key: string,
    options: CallOptions = {},
  ): Promise<GetStreamResult | null> {
    const result = await super.getStream(key, options);
    if (result === null) return null;
    this.inFlight += 1;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    const release = (): void => {
      this.inFlight -= 1;
    };
    const body = result.body;
    return {
      ...result,
      body: (async function* () {
        try {
          // Let other requests start before this one finishes, as a network would.
          await new Promise((resolve) => setImmediate(resolve));
          yield* body;
        } finally {
          release();
        }
      })(),
    };
  }
}

async function writeManySegments(store: ObjectStore) {
  const random = seededRandom(11);
  const frames: Uint8Array[] = [];
  const segments: SegmentEntry[] = [];
  let offset = 0;
  const counts = Array.from({ length: 40 }, (_, index) => (index === 17 ? 1 : 1 + (index % 3)));
  for (const [index, count] of counts.entries()) {
    const segmentFrames = Array.from({ length: count }, () =>
      // Segment 17 is one 9 MiB frame: larger than anything fetched ahead.
      encodeFrame(
        randomBytes(random, index === 17 ? 9 * 1024 * 1024 : 1 + Math.floor(random() * 200)),
      ),
    );
    frames.push(...segmentFrames);
    const bytes = new Uint8Array(Buffer.concat(segmentFrames));
    const key = segmentKey(PREFIX, 0, offset, offset + bytes.byteLength);
    await store.put(key, bytes, { mode: 'create' });
    segments.push({
      key,
      size: bytes.byteLength,
      crc32: crc32Hex(bytes),
      frames: count,
      lineage: LINEAGE,
    });
    offset += bytes.byteLength;
  }
  const manifest: Manifest = {
    formatVersion: 1,
    lineage: LINEAGE,
    createdAt: '2026-11-29T09:00:00Z',
    commitSeq: frames.length,
    oldestCommitSeq: 0,
    walGeneration: 0,
    files: [],
    segments,
  };
  const key = manifestKey(PREFIX, frames.length);
  await store.put(key, new TextEncoder().encode(serializeManifest(manifest)), { mode: 'create' });
  await store.put(latestKey(PREFIX), new TextEncoder().encode(serializeLatest(key)), {
    mode: 'create',
  });
  return { frames, segments };
}

describe('restore of many segments', () => {
  let scratch: { path: string; cleanup(): Promise<void> };
  beforeEach(async () => {
    scratch = await scratchDirectory();
  });
  afterEach(async () => {
    await scratch.cleanup();
  });

  it('writes the WAL in order for every cut, with a bounded number of requests in flight', async () => {
    const store = new ConcurrentBodiesStore();
    const { frames } = await writeManySegments(store);
    for (const commitSeq of [0, 1, 17, 33, 34, 35, 36, frames.length]) {
      const target = join(scratch.path, `c${commitSeq}`);
      await restoreFramedStore(store, PREFIX, target, { target: { kind: 'commit', commitSeq } });
      const wal = (await readFiles(target)).get('wal.bin')!;
      expect(
        Buffer.from(wal).equals(Buffer.concat(frames.slice(0, commitSeq))),
        `commit ${commitSeq}`,
      ).toBe(true);
    }
    expect(store.maxInFlight).toBeGreaterThan(1);
    expect(store.maxInFlight).toBeLessThanOrEqual(9);
    expect(store.inFlight).toBe(0);
  });

  it('a corrupt segment fetched ahead is refused; nothing is left behind', async () => {
    const store = new ConcurrentBodiesStore();
    const { segments } = await writeManySegments(store);
    const victim = segments[30]!;
    const damaged = new Uint8Array((await store.get(victim.key))!.body);
    damaged[damaged.byteLength - 1]! ^= 0x10;
    await store.put(victim.key, damaged, { mode: 'overwrite' });
    const target = join(scratch.path, 'target');
    const error = await restoreFramedStore(store, PREFIX, target).catch((e: unknown) => e);
    expect(ObjectCorruptError.isInstance(error)).toBe(true);
    expect((error as ObjectCorruptError).key).toBe(victim.key);
    expect(await snapshotTree(target)).toEqual(new Map([['.', 'absent']]));
  });
});
