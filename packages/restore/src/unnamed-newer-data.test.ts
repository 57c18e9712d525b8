import {
  crc32Hex,
  latestKey,
  type Manifest,
  manifestKey,
  segmentKey,
  serializeLatest,
  serializeManifest,
  snapshotKey,
} from '@x/manifest';
import { type ListOptions, type ListResult, MemoryStore, type ObjectStore } from '@x/store';
import { describe, expect, it } from 'vitest';
import { RestoreOptionsError, RestorePointRejectedError } from './restore-errors.ts';
import {
  findUnnamedNewerData,
  findUnnamedNewerDataAfter,
  holdsUnnamedNewerData,
} from './unnamed-newer-data.ts';

const PREFIX = 'db';
const LINEAGE = 'lineage-a';

async function put(store: ObjectStore, key: string, size: number): Promise<void> {
  await store.put(key, new Uint8Array(size).fill(7));
}

function segmentEntry(generation: number, start: number, end: number) {
  const bytes = new Uint8Array(end - start).fill(7);
  return {
    key: segmentKey(PREFIX, generation, start, end),
    size: end - start,
    crc32: crc32Hex(bytes),
    frames: 1,
    lineage: LINEAGE,
  };
}

/** A sound manifest of `generation` with a snapshot and segments chaining over `ends`. */
function manifestOf(generation: number, ends: readonly number[]): Manifest {
  const snapshot = new Uint8Array(10).fill(7);
  const segments = ends.map((end, index) => segmentEntry(generation, ends[index - 1] ?? 0, end));
  return {
    formatVersion: 1,
    lineage: LINEAGE,
    createdAt: '2026-01-01T00:00:00Z',
    commitSeq: 5 + segments.length,
    oldestCommitSeq: 5,
    walGeneration: generation,
    files: [
      {
        name: 'snapshot.bin',
        key: snapshotKey(PREFIX, generation, 0),
        size: snapshot.byteLength,
        crc32: crc32Hex(snapshot),
        frames: 0,
        lineage: LINEAGE,
      },
    ],
    segments,
  };
}

/** Puts the manifest's own objects: nothing the manifest names is newer. */
async function putNamed(store: ObjectStore, manifest: Manifest): Promise<void> {
  for (const entry of [...manifest.files, ...manifest.segments]) {
    await put(store, entry.key, entry.size);
  }
  await store.put(
    manifestKey(PREFIX, manifest.commitSeq),
    new TextEncoder().encode(serializeManifest(manifest, { prefix: PREFIX })),
  );
}

/** Keys that look almost like layout keys: every one must be ignored. */
const HOSTILE_KEYS = [
  `${PREFIX}/wal/stray-object`,
  `${PREFIX}/wal/not-a-generation/00000000000000000000-00000000000000000010.segment`,
  `${PREFIX}/wal/2/0-10.segment`,
  `${PREFIX}/wal/99999999999999999999/00000000000000000000-00000000000000000010.segment`,
  `${PREFIX}/wal/00000000000000000002/junk`,
  `${PREFIX}/wal/00000000000000000002/00000000000000000500-00000000000000000400.segment`,
  `${PREFIX}/wal/00000000000000000002/00000000000000000400-00000000000000000500.segment.tmp`,
  `${PREFIX}/wal/00000000000000000002/nested/00000000000000000400-00000000000000000500.segment`,
  `${PREFIX}/wal/00000000000000000003/0000000000000000000x-00000000000000000010.segment`,
  `${PREFIX}/snapshots/garbage.snapshot`,
  `${PREFIX}/snapshots/00000000000000000009-00000000000000000000.snapshot.partial`,
  `${PREFIX}/snapshots/nested/00000000000000000009-00000000000000000000.snapshot`,
  `${PREFIX}/manifest/00000000000000000099.json.tmp`,
  `${PREFIX}/manifest/junk.json`,
  // Other prefixes, one of which starts with the same letters.
  `dbx/wal/00000000000000000009/00000000000000000000-00000000000000000010.segment`,
  `other/db/wal/00000000000000000009/00000000000000000000-00000000000000000010.segment`,
];

/** A store that records every LIST it answers. */
class ListRecordingStore extends MemoryStore {
  readonly lists: { prefix: string; delimiter?: string }[] = [];
  override async list(prefix: string, options?: ListOptions): Promise<ListResult> {
    this.lists.push({
      prefix,
      ...(options?.delimiter === undefined ? {} : { delimiter: options.delimiter }),
    });
    return super.list(prefix, options);
  }
}

describe('findUnnamedNewerData', () => {
  it('counts segments past the restore point in its generation, and segments and snapshots of later generations, ignoring everything else', async () => {
    const store = new MemoryStore();
    const manifest = manifestOf(2, [100, 250]);
    await putNamed(store, manifest);
    // Older generations: whatever they hold is older than the restore point.
    await put(store, snapshotKey(PREFIX, 1, 0), 40);
    await put(store, segmentKey(PREFIX, 1, 0, 300), 300);
    await put(store, segmentKey(PREFIX, 1, 300, 900), 600);
    // A leftover inside the range the manifest names: not newer.
    await put(store, segmentKey(PREFIX, 2, 100, 200), 100);
    // Newer, in the manifest's generation: two after its end, one straddling it.
    await put(store, segmentKey(PREFIX, 2, 250, 400), 150);
    await put(store, segmentKey(PREFIX, 2, 400, 460), 60);
    await put(store, segmentKey(PREFIX, 2, 200, 300), 100);
    // Newer generations: a snapshot and segments, and a segment with no snapshot yet.
    await put(store, snapshotKey(PREFIX, 3, 17), 80);
    await put(store, segmentKey(PREFIX, 3, 0, 50), 50);
    await put(store, segmentKey(PREFIX, 3, 50, 70), 20);
    await put(store, segmentKey(PREFIX, 5, 0, 30), 30);
    for (const key of HOSTILE_KEYS) await put(store, key, 1000);

    const found = await findUnnamedNewerData(store, PREFIX, manifest);

    expect(found).toEqual({
      commitSeq: manifest.commitSeq,
      walGeneration: 2,
      walEnd: 250,
      segments: 6,
      segmentBytes: 150 + 60 + 100 + 50 + 20 + 30,
      snapshots: 1,
      snapshotBytes: 80,
      bytes: 150 + 60 + 100 + 50 + 20 + 30 + 80,
      firstKey: segmentKey(PREFIX, 2, 200, 300),
      lastKey: segmentKey(PREFIX, 5, 0, 30),
      newestGeneration: 5,
      newerRestorePoints: 0,
    });
    expect(holdsUnnamedNewerData(found)).toBe(true);
  });

  it('counts every segment of the generation when the restore point names only its snapshot', async () => {
    const store = new MemoryStore();
    const manifest = manifestOf(4, []);
    await putNamed(store, manifest);
    await put(store, segmentKey(PREFIX, 4, 0, 64), 64);
    await put(store, segmentKey(PREFIX, 4, 64, 96), 32);

    const found = await findUnnamedNewerData(store, PREFIX, manifest);

    expect(found).toMatchObject({
      walEnd: 0,
      segments: 2,
      segmentBytes: 96,
      snapshots: 0,
      bytes: 96,
      firstKey: segmentKey(PREFIX, 4, 0, 64),
      lastKey: segmentKey(PREFIX, 4, 64, 96),
      newestGeneration: 4,
    });
  });

  it('reports nothing when the bucket holds only what the restore point names, older data and hostile keys', async () => {
    const store = new MemoryStore();
    const manifest = manifestOf(2, [100]);
    await putNamed(store, manifest);
    await put(store, segmentKey(PREFIX, 1, 0, 500), 500);
    await put(store, snapshotKey(PREFIX, 1, 0), 40);
    for (const key of HOSTILE_KEYS) await put(store, key, 1000);

    const found = await findUnnamedNewerData(store, PREFIX, manifest);

    expect(found).toEqual({
      commitSeq: manifest.commitSeq,
      walGeneration: 2,
      walEnd: 100,
      segments: 0,
      segmentBytes: 0,
      snapshots: 0,
      snapshotBytes: 0,
      bytes: 0,
      newerRestorePoints: 0,
    });
    expect(holdsUnnamedNewerData(found)).toBe(false);
  });

  it('counts the restore points above the one measured against', async () => {
    const store = new MemoryStore();
    const older = manifestOf(2, [100]);
    const newer = manifestOf(2, [100, 200, 300]);
    await putNamed(store, older);
    await putNamed(store, newer);
    await put(store, segmentKey(PREFIX, 2, 300, 350), 50);

    const found = await findUnnamedNewerData(store, PREFIX, older);

    expect(found).toMatchObject({ segments: 3, segmentBytes: 250, newerRestorePoints: 1 });
    expect((await findUnnamedNewerData(store, PREFIX, newer)).newerRestorePoints).toBe(0);
  });

  it('lists generations with a delimiter and then only those at or above the restore point', async () => {
    const store = new ListRecordingStore();
    const manifest = manifestOf(3, [10]);
    await putNamed(store, manifest);
    for (const generation of [0, 1, 2, 4])
      await put(store, segmentKey(PREFIX, generation, 0, 5), 5);
    await put(store, `${PREFIX}/wal/not-a-generation/x`, 1);

    const found = await findUnnamedNewerData(store, PREFIX, manifest);

    expect(found.segments).toBe(1);
    // Sent together, so in no fixed order; each once.
    const byPrefix = (a: { prefix: string }, b: { prefix: string }) =>
      a.prefix < b.prefix ? -1 : a.prefix > b.prefix ? 1 : 0;
    expect([...store.lists].sort(byPrefix)).toEqual([
      { prefix: `${PREFIX}/manifest/`, delimiter: '/' },
      { prefix: `${PREFIX}/snapshots/`, delimiter: '/' },
      { prefix: `${PREFIX}/wal/`, delimiter: '/' },
      { prefix: `${PREFIX}/wal/00000000000000000003/`, delimiter: '/' },
      { prefix: `${PREFIX}/wal/00000000000000000004/`, delimiter: '/' },
    ]);
  });

  it('refuses an empty prefix with RestoreOptionsError', async () => {
    await expect(findUnnamedNewerData(new MemoryStore(), '', manifestOf(0, []))).rejects.toSatisfy(
      RestoreOptionsError.isInstance,
    );
  });

  it('passes the abort signal to the store', async () => {
    const store = new MemoryStore();
    await putNamed(store, manifestOf(0, [10]));
    const controller = new AbortController();
    controller.abort(new Error('stopped by the test'));
    await expect(
      findUnnamedNewerData(store, PREFIX, manifestOf(0, [10]), { signal: controller.signal }),
    ).rejects.toThrow('stopped by the test');
  });
});

describe('findUnnamedNewerDataAfter', () => {
  it('after a roll-forward, sends each listing once', async () => {
    const store = new ListRecordingStore();
    const manifest = manifestOf(1, [64]);
    await putNamed(store, manifest);
    await findUnnamedNewerDataAfter(store, PREFIX, manifestKey(PREFIX, manifest.commitSeq), {
      afterRollForward: true,
    });
    const sent = store.lists.map(({ prefix, delimiter }) => `${delimiter ?? ''} ${prefix}`);
    expect(sent.length).toBeGreaterThan(0);
    expect(new Set(sent).size).toBe(sent.length);
  });

  it('reads the manifest at the key and measures against it', async () => {
    const store = new MemoryStore();
    const manifest = manifestOf(1, [64]);
    await putNamed(store, manifest);
    await store.put(
      latestKey(PREFIX),
      new TextEncoder().encode(serializeLatest(manifestKey(PREFIX, manifest.commitSeq))),
    );
    await put(store, segmentKey(PREFIX, 1, 64, 128), 64);

    const found = await findUnnamedNewerDataAfter(
      store,
      PREFIX,
      manifestKey(PREFIX, manifest.commitSeq),
    );

    expect(found).toMatchObject({
      commitSeq: manifest.commitSeq,
      walEnd: 64,
      segments: 1,
      bytes: 64,
      firstKey: segmentKey(PREFIX, 1, 64, 128),
      lastKey: segmentKey(PREFIX, 1, 64, 128),
    });
  });

  it('returns null for a manifest that does not exist', async () => {
    expect(
      await findUnnamedNewerDataAfter(new MemoryStore(), PREFIX, manifestKey(PREFIX, 3)),
    ).toBeNull();
  });

  it('refuses a manifest that does not parse with RestorePointRejectedError', async () => {
    const store = new MemoryStore();
    await store.put(manifestKey(PREFIX, 3), new TextEncoder().encode('{"not": "a manifest"}'));
    await expect(
      findUnnamedNewerDataAfter(store, PREFIX, manifestKey(PREFIX, 3)),
    ).rejects.toSatisfy(RestorePointRejectedError.isInstance);
  });
});
