import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { crc32 } from 'node:zlib';
import type { RestoreMaterializer } from '@x/engine';
import {
  crc32Hex,
  type FileEntry,
  latestKey,
  type Manifest,
  manifestKey,
  serializeManifest,
  snapshotKey,
  snapshotObjectKey,
} from '@x/manifest';
import { type GetStreamResult, MemoryStore, type ObjectStore } from '@x/store';
import { encodeSegmentObject, readSegmentObjectHeader } from '@x/wal-segment';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { downloadSnapshotObject, isSnapshotObject } from './file-object-read.ts';
import { restore } from './restore.ts';
import { ObjectCorruptError, ObjectEncodingError } from './restore-errors.ts';
import { verify } from './verify.ts';

const PREFIX = 'p';
const LINEAGE = 'l'.repeat(32);
const GENERATION = 7;
const FRAMES = 5;

/** Restores the snapshot file by its entry's name; no segments, so the WAL stays empty. */
const materializer: RestoreMaterializer = {
  name: 'test',
  targetName: (entry) => entry.name,
  walFileName: 'wal.bin',
  createWalCutter: () => ({ push: () => 0, commitsSeen: 0, commitsKept: 0 }),
  ownsName: () => true,
  parentRecordName: 'backup.parent',
};

/** Compressible but not trivial: 1 MiB of text-like rows. */
function snapshotBody(size = 1 << 20): Uint8Array {
  const row = new TextEncoder().encode('row 0123456789 some text that repeats a bit\n');
  const body = new Uint8Array(size);
  for (let offset = 0; offset < size; offset += row.byteLength)
    body.set(row.subarray(0, size - offset), offset);
  body.set(randomBytes(4096), 1000);
  return body;
}

interface SnapFields {
  kind?: 'snapshot' | 'segment';
  generation?: number;
  commits?: number;
  lineage?: string;
  codec?: 'zstd' | 'identity';
}

function encodeSnap(body: Uint8Array, fields: SnapFields = {}): Uint8Array {
  return encodeSegmentObject(body, {
    codec: fields.codec ?? 'zstd',
    kind: fields.kind ?? 'snapshot',
    generation: fields.generation ?? GENERATION,
    start: 0,
    end: body.byteLength,
    commits: fields.commits ?? FRAMES,
    previousCrc32: 0,
    lineage: fields.lineage ?? LINEAGE,
  });
}

/** `stored` with the header's `end` replaced and the header CRC recomputed (the header stays valid). */
function withHeaderEnd(stored: Uint8Array, end: number): Uint8Array {
  const patched = Uint8Array.from(stored);
  const { headerBytes } = readSegmentObjectHeader(patched);
  const view = new DataView(patched.buffer);
  view.setBigUint64(28, BigInt(end), true);
  view.setUint32(headerBytes - 4, crc32(patched.subarray(0, headerBytes - 4)), true);
  return patched;
}

function entryOf(key: string, stored: Uint8Array, overrides: Partial<FileEntry> = {}): FileEntry {
  return {
    name: 'snapshot.bin',
    key,
    size: stored.byteLength,
    crc32: crc32Hex(stored),
    frames: FRAMES,
    lineage: LINEAGE,
    ...overrides,
  };
}

/** Stores `stored` at `entry.key` and a restore point naming it (LATEST too). */
async function putRestorePoint(
  store: MemoryStore,
  entry: FileEntry,
  stored: Uint8Array,
): Promise<string> {
  await store.put(entry.key, stored);
  const manifest: Manifest = {
    formatVersion: 1,
    lineage: LINEAGE,
    createdAt: '2026-12-01T00:00:00Z',
    commitSeq: entry.frames,
    oldestCommitSeq: 0,
    walGeneration: GENERATION,
    files: [entry],
    segments: [],
  };
  const key = manifestKey(PREFIX, manifest.commitSeq);
  await store.put(key, new TextEncoder().encode(serializeManifest(manifest, { prefix: PREFIX })));
  await store.put(latestKey(PREFIX), new TextEncoder().encode(key));
  return key;
}

/** A store whose one object streams in `chunkSize` pieces, counting pulls; `failAt` throws there. */
function chunkedStore(
  bytes: Uint8Array,
  chunkSize: number,
  failAt?: { chunk: number; error: Error; afterMs?: number },
) {
  let pulled = 0;
  let aborted = false;
  const total = Math.ceil(bytes.byteLength / chunkSize);
  const store = {
    async getStream(key: string, options: { signal?: AbortSignal } = {}): Promise<GetStreamResult> {
      options.signal?.addEventListener('abort', () => {
        aborted = true;
      });
      return {
        key,
        size: bytes.byteLength,
        version: { etag: '"1"' },
        body: (async function* () {
          for (let index = 0; index < total; index += 1) {
            await new Promise((resolve) => setImmediate(resolve));
            options.signal?.throwIfAborted();
            if (failAt !== undefined && index === failAt.chunk) {
              // Later than the decoder takes to drain what it was given.
              if (failAt.afterMs !== undefined)
                await new Promise((resolve) => setTimeout(resolve, failAt.afterMs));
              throw failAt.error;
            }
            pulled += 1;
            yield bytes.subarray(index * chunkSize, (index + 1) * chunkSize);
          }
        })(),
      };
    },
  } as unknown as ObjectStore;
  return { store, total, pulled: () => pulled, aborted: () => aborted };
}

/** What a download of `stored`, as the test's `.snap`, from `store` rejects with. */
function rejectionOf(store: ObjectStore, stored: Uint8Array): Promise<unknown> {
  const key = snapshotObjectKey(PREFIX, GENERATION, FRAMES);
  return downloadSnapshotObject(store, PREFIX, entryOf(key, stored), () => {}, {
    manifestKey: 'm',
  }).catch((caught: unknown) => caught);
}

describe('downloadSnapshotObject', () => {
  const key = snapshotObjectKey(PREFIX, GENERATION, FRAMES);

  it('only a .snap key is a snapshot object', () => {
    expect(isSnapshotObject(PREFIX, key)).toBe(true);
    expect(isSnapshotObject(PREFIX, snapshotKey(PREFIX, GENERATION, FRAMES))).toBe(false);
    expect(isSnapshotObject(PREFIX, `${PREFIX}/wal/x.seg`)).toBe(false);
  });

  it('streams: decoded bytes reach the sink in order while the stored bytes are still being read, stored bytes counted', async () => {
    const body = new Uint8Array(randomBytes(4 << 20));
    const stored = encodeSnap(body);
    const served = chunkedStore(stored, 64 * 1024);
    const decoded: Uint8Array[] = [];
    let pulledAtFirstChunk: number | undefined;
    let counted = 0;
    await downloadSnapshotObject(
      served.store,
      PREFIX,
      entryOf(key, stored),
      async (chunk) => {
        pulledAtFirstChunk ??= served.pulled();
        await new Promise((resolve) => setImmediate(resolve));
        decoded.push(Uint8Array.from(chunk));
      },
      { manifestKey: 'm', onBytes: (read) => (counted = read) },
    );
    expect(Buffer.compare(Buffer.concat(decoded), body)).toBe(0);
    expect(pulledAtFirstChunk).toBeLessThan(served.total / 2);
    expect(counted).toBe(stored.byteLength);
  });

  it('a download failing mid-stream rejects with that failure (no hang, no stray stream error)', async () => {
    const body = new Uint8Array(randomBytes(1 << 20));
    const stored = encodeSnap(body);
    const failure = new Error('connection reset');
    const served = chunkedStore(stored, 16 * 1024, { chunk: 10, error: failure });
    const error = await rejectionOf(served.store, stored);
    expect(error).toBe(failure);
  });

  it('a download failing once the decoder has consumed all it was given rejects with that failure (its input ends)', async () => {
    const body = new Uint8Array(randomBytes(1 << 20));
    const stored = encodeSnap(body);
    const failure = new Error('connection reset');
    // One chunk of all but the last 64 stored bytes, then (once the decoder
    // drained it) the failure: no decoded byte follows it, so only the end of
    // the decoder's input stops it.
    const served = chunkedStore(stored, stored.byteLength - 64, {
      chunk: 1,
      error: failure,
      afterMs: 200,
    });
    const error = await rejectionOf(served.store, stored);
    expect(error).toBe(failure);
  });

  it('a download failing inside the header rejects with that failure', async () => {
    const stored = encodeSnap(snapshotBody());
    const failure = new Error('connection reset');
    const served = chunkedStore(stored, 8, { chunk: 2, error: failure });
    const error = await rejectionOf(served.store, stored);
    expect(error).toBe(failure);
  });

  it('a decode failure aborts the download before the object is read to its end', async () => {
    const stored = encodeSnap(new Uint8Array(randomBytes(4 << 20)));
    const { headerBytes } = readSegmentObjectHeader(stored);
    stored.fill(0x55, headerBytes);
    const served = chunkedStore(stored, 16 * 1024);
    const error = await rejectionOf(served.store, stored);
    expect(ObjectEncodingError.isInstance(error), String(error)).toBe(true);
    expect(error).toMatchObject({ key, field: 'body' });
    expect(served.aborted()).toBe(true);
    expect(served.pulled()).toBeLessThan(served.total);
  });

  it('a sink failure (a full disk) rejects with it and stops the download', async () => {
    const stored = encodeSnap(new Uint8Array(randomBytes(4 << 20)));
    const served = chunkedStore(stored, 16 * 1024);
    const full = new Error('ENOSPC: no space left on device');
    const error = await downloadSnapshotObject(
      served.store,
      PREFIX,
      entryOf(key, stored),
      () => {
        throw full;
      },
      { manifestKey: 'm' },
    ).catch((caught: unknown) => caught);
    expect(error).toBe(full);
    expect(served.aborted()).toBe(true);
    expect(served.pulled()).toBeLessThan(served.total);
  });
});

describe('restore and verify of a .snap snapshot', () => {
  let work: string;
  let store: MemoryStore;
  const key = snapshotObjectKey(PREFIX, GENERATION, FRAMES);
  const body = snapshotBody();
  beforeEach(async () => {
    work = await mkdtemp(join(tmpdir(), 'snapshot-object-'));
    store = new MemoryStore();
  });
  afterEach(async () => {
    await rm(work, { recursive: true, force: true });
  });

  it('restores to exactly the original bytes, counting stored bytes; verify --deep passes', async () => {
    const stored = encodeSnap(body);
    expect(stored.byteLength).toBeLessThan(body.byteLength);
    const manifest = await putRestorePoint(store, entryOf(key, stored), stored);
    const target = join(work, 'target');
    const result = await restore(store, PREFIX, target, { materializer });
    expect(result.manifestKey).toBe(manifest);
    expect(result.commitSeq).toBe(FRAMES);
    expect(result.bytes).toBe(stored.byteLength);
    expect(Buffer.compare(await readFile(join(target, 'snapshot.bin')), body)).toBe(0);
    const report = await verify(store, PREFIX, { deep: true });
    expect(report.ok, JSON.stringify(report.manifests)).toBe(true);
    expect(report.bytesRead).toBe(stored.byteLength);
  });

  it('an identity-coded .snap restores too', async () => {
    const stored = encodeSnap(body, { codec: 'identity' });
    await putRestorePoint(store, entryOf(key, stored), stored);
    const target = join(work, 'target');
    await restore(store, PREFIX, target, { materializer });
    expect(Buffer.compare(await readFile(join(target, 'snapshot.bin')), body)).toBe(0);
  });

  it('a raw .snapshot keeps restoring, byte for byte', async () => {
    const rawKey = snapshotKey(PREFIX, GENERATION, FRAMES);
    await putRestorePoint(store, entryOf(rawKey, body), body);
    const target = join(work, 'target');
    const result = await restore(store, PREFIX, target, { materializer });
    expect(result.bytes).toBe(body.byteLength);
    expect(Buffer.compare(await readFile(join(target, 'snapshot.bin')), body)).toBe(0);
    expect((await verify(store, PREFIX, { deep: true })).ok).toBe(true);
  });

  /** Each hostile object: its stored bytes and entry (the entry's CRC matches the bytes unless said). */
  const garbageBody = (): Uint8Array => {
    const stored = encodeSnap(body);
    stored.fill(0x55, readSegmentObjectHeader(stored).headerBytes);
    return stored;
  };
  const flippedIdentityBody = (): Uint8Array => {
    const stored = encodeSnap(body, { codec: 'identity' });
    const at = readSegmentObjectHeader(stored).headerBytes + 100;
    stored[at] = stored[at]! ^ 0xff;
    return stored;
  };
  const hostile: {
    name: string;
    stored: () => Uint8Array;
    entry?: (stored: Uint8Array) => FileEntry;
    field: string;
    verifyKind?: string;
  }[] = [
    {
      name: 'a body that does not decompress',
      stored: garbageBody,
      field: 'body',
      verifyKind: 'object-encoding',
    },
    {
      name: 'a header end bigger than the body decodes to',
      stored: () => withHeaderEnd(encodeSnap(body), body.byteLength + 1),
      field: 'end',
      verifyKind: 'object-encoding',
    },
    {
      name: 'a header end smaller than the body decodes to',
      stored: () => withHeaderEnd(encodeSnap(body), body.byteLength - 1),
      field: 'end',
    },
    {
      name: 'a decoded CRC-32 other than the header says',
      stored: flippedIdentityBody,
      field: 'bodyCrc32',
    },
    {
      name: 'header kind segment',
      stored: () => encodeSnap(body, { kind: 'segment' }),
      field: 'kind',
    },
    {
      name: 'another generation than the key',
      stored: () => encodeSnap(body, { generation: GENERATION + 1 }),
      field: 'generation',
      verifyKind: 'object-encoding',
    },
    {
      name: 'commits differing from the entry frames',
      stored: () => encodeSnap(body, { commits: FRAMES + 1 }),
      field: 'commits',
      verifyKind: 'object-encoding',
    },
    {
      name: 'a lineage differing from the entry',
      stored: () => encodeSnap(body, { lineage: 'm'.repeat(32) }),
      field: 'lineage',
    },
    {
      name: 'a stored CRC-32 other than the entry records',
      stored: () => encodeSnap(body),
      entry: (stored) => entryOf(key, stored, { crc32: crc32Hex(new Uint8Array([1])) }),
      field: 'crc32',
      verifyKind: 'object-crc',
    },
  ];

  for (const row of hostile) {
    it(`refuses ${row.name}: typed error naming the key and ${row.field}, nothing in the target`, async () => {
      const stored = row.stored();
      const entry = row.entry?.(stored) ?? entryOf(key, stored);
      await putRestorePoint(store, entry, stored);
      const target = join(work, 'target');
      const error = await restore(store, PREFIX, target, { materializer }).catch(
        (caught: unknown) => caught,
      );
      expect(ObjectCorruptError.isInstance(error), String(error)).toBe(true);
      expect((error as ObjectCorruptError).key).toBe(key);
      expect((error as Error).message).toContain(key);
      if (row.field === 'crc32') {
        expect(ObjectEncodingError.isInstance(error)).toBe(false);
        expect((error as ObjectCorruptError).property).toBe('crc32');
      } else {
        expect(ObjectEncodingError.isInstance(error), String(error)).toBe(true);
        expect((error as ObjectEncodingError).field).toBe(row.field);
      }
      expect(await readdir(target).catch(() => [])).toEqual([]);
    });
  }

  for (const row of hostile.filter((candidate) => candidate.verifyKind !== undefined)) {
    it(`verify --deep blames ${row.name} on the restore point (${row.verifyKind})`, async () => {
      const stored = row.stored();
      const entry = row.entry?.(stored) ?? entryOf(key, stored);
      const manifest = await putRestorePoint(store, entry, stored);
      const report = await verify(store, PREFIX, { deep: true });
      expect(report.ok).toBe(false);
      const problems = report.manifests.find((candidate) => candidate.key === manifest)!.problems;
      expect(problems).toEqual([expect.objectContaining({ kind: row.verifyKind, key })]);
      if (row.verifyKind === 'object-encoding')
        expect(problems[0]!.message).toContain(`${row.field}:`);
      expect(report.latest.ok).toBe(false);
      // Without deep, only existence and size are checked: the envelope is not read.
      expect((await verify(store, PREFIX)).ok).toBe(true);
    });
  }
});
