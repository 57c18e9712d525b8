/**
 * Encrypted restore points written by hand on a real file-system store: a
 * `.snap` snapshot and a chain of `.seg` segments of framed commits, each
 * encrypted to the recipients asked for (per object, so one can differ),
 * and a manifest naming them (LATEST too). Segments past the manifest are
 * stored but not named, for roll-forward.
 */
import { randomBytes } from 'node:crypto';
import type { Dirent } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import {
  type AgeIdentity,
  type AgeRecipient,
  generateIdentity,
  parseIdentity,
  parseRecipient,
} from '@x/age-envelope';
import type { RestoreMaterializer } from '@x/engine';
import {
  compactedSegmentKey,
  crc32Hex,
  type FileEntry,
  latestKey,
  type Manifest,
  manifestKey,
  type SegmentEntry,
  segmentObjectKey,
  serializeManifest,
  snapshotObjectKey,
} from '@x/manifest';
import type { ObjectStore } from '@x/store';
import { encodeFrame, encodeSegmentObject, readSegmentObjectHeader } from '@x/wal-segment';
import { FramedWalCutter } from '../src/wal-frame-cutter.ts';

export const PREFIX = 'enc';
export const LINEAGE = 'lineage-enc';
export const GENERATION = 3;
/** Commits the snapshot holds. */
export const SNAPSHOT_COMMITS = 4;
/** age's plaintext chunk, and what each adds to the file. */
export const AGE_CHUNK_BYTES = 64 * 1024;
const AGE_CHUNK_TAG_BYTES = 16;

export interface KeyPair {
  readonly identity: AgeIdentity;
  readonly recipient: AgeRecipient;
}

export function keyPair(source: string): KeyPair {
  const { identity, recipient } = generateIdentity();
  return { identity: parseIdentity(identity, source), recipient: parseRecipient(recipient) };
}

/** Each frame's payload starts with the commits it stands for (u32 LE): 1, or a merge's count. */
const WEIGHT = {
  headerBytes: 4,
  commitsOf: (header: Uint8Array) => Buffer.from(header).readUInt32LE(0),
};

function weightedFrame(commits: number, bytes: number): Uint8Array {
  const payload = Buffer.concat([Buffer.alloc(4), randomBytes(bytes)]);
  payload.writeUInt32LE(commits, 0);
  return encodeFrame(payload);
}

/** Restores the snapshot file by its entry's name and the log as `wal.bin`. */
export const materializer: RestoreMaterializer = {
  name: 'test',
  targetName: (entry) => entry.name,
  walFileName: 'wal.bin',
  createWalCutter: (commits) => new FramedWalCutter(commits, WEIGHT),
  ownsName: () => true,
  parentRecordName: 'backup.parent',
};

/** Where an object sits in the restore point: the snapshot, or segment `n` (0-based, named ones first). */
export type ObjectPlace = 'snapshot' | number;

export interface RestorePointShape {
  /** Encrypts every object to these; empty: plaintext. */
  readonly recipients: readonly AgeRecipient[];
  /** Another encryption for one object (`[]`: plaintext). */
  readonly differing?: { readonly at: ObjectPlace; readonly recipients: readonly AgeRecipient[] };
  /** Segments the manifest names, and chained ones stored after it. */
  readonly named: number;
  readonly unnamed?: number;
  /** Frames (commits) per segment, each `frameBytes` of random payload. */
  readonly framesPerSegment?: number;
  readonly frameBytes?: number;
  /** Decoded snapshot size (random bytes: one age chunk per 64 KiB). */
  readonly snapshotBytes?: number;
}

export interface WrittenRestorePoint {
  readonly manifestKey: string;
  readonly manifest: Manifest;
  readonly snapshotKey: string;
  readonly snapshot: Uint8Array;
  /** Every segment written, named ones first, with its decoded log. */
  readonly segments: readonly { readonly entry: SegmentEntry; readonly log: Uint8Array }[];
  readonly framesPerSegment: number;
}

function framedLog(frames: number, frameBytes: number): Uint8Array {
  const parts: Uint8Array[] = [];
  for (let frame = 0; frame < frames; frame += 1) parts.push(weightedFrame(1, frameBytes));
  return new Uint8Array(Buffer.concat(parts));
}

export async function putManifest(store: ObjectStore, manifest: Manifest): Promise<string> {
  const key = manifestKey(PREFIX, manifest.commitSeq);
  const text = serializeManifest(manifest, { prefix: PREFIX });
  await store.put(key, new TextEncoder().encode(text), { mode: 'overwrite' });
  await store.put(latestKey(PREFIX), new TextEncoder().encode(key), { mode: 'overwrite' });
  return key;
}

/** Writes the objects and manifest of `shape` under {@link PREFIX}. */
export async function writeRestorePoint(
  store: ObjectStore,
  shape: RestorePointShape,
): Promise<WrittenRestorePoint> {
  const framesPerSegment = shape.framesPerSegment ?? 3;
  const frameBytes = shape.frameBytes ?? 1000;
  const recipientsAt = (at: ObjectPlace) =>
    shape.differing?.at === at ? shape.differing.recipients : shape.recipients;

  const snapshot = new Uint8Array(randomBytes(shape.snapshotBytes ?? 200_000));
  const snapshotKey = snapshotObjectKey(PREFIX, GENERATION, SNAPSHOT_COMMITS);
  const storedSnapshot = encodeSegmentObject(
    snapshot,
    {
      codec: 'zstd',
      kind: 'snapshot',
      generation: GENERATION,
      start: 0,
      end: snapshot.byteLength,
      commits: SNAPSHOT_COMMITS,
      previousCrc32: 0,
      lineage: LINEAGE,
    },
    { recipients: recipientsAt('snapshot') },
  );
  await store.put(snapshotKey, storedSnapshot, { mode: 'overwrite' });
  const file: FileEntry = {
    name: 'snapshot.bin',
    key: snapshotKey,
    size: storedSnapshot.byteLength,
    crc32: crc32Hex(storedSnapshot),
    frames: SNAPSHOT_COMMITS,
    lineage: LINEAGE,
  };

  const segments: { entry: SegmentEntry; log: Uint8Array }[] = [];
  let previous = Number.parseInt(file.crc32, 16);
  let start = 0;
  for (let index = 0; index < shape.named + (shape.unnamed ?? 0); index += 1) {
    const log = framedLog(framesPerSegment, frameBytes);
    const key = segmentObjectKey(PREFIX, GENERATION, start, start + log.byteLength);
    const stored = encodeSegmentObject(
      log,
      {
        codec: 'zstd',
        kind: 'segment',
        generation: GENERATION,
        start,
        end: start + log.byteLength,
        commits: framesPerSegment,
        previousCrc32: previous,
        lineage: LINEAGE,
      },
      { recipients: recipientsAt(index) },
    );
    await store.put(key, stored, { mode: 'overwrite' });
    const entry: SegmentEntry = {
      key,
      size: stored.byteLength,
      crc32: crc32Hex(stored),
      frames: framesPerSegment,
      lineage: LINEAGE,
    };
    segments.push({ entry, log });
    previous = Number.parseInt(entry.crc32, 16);
    start += log.byteLength;
  }

  const named = segments.slice(0, shape.named).map((segment) => segment.entry);
  const manifest: Manifest = {
    formatVersion: 1,
    lineage: LINEAGE,
    createdAt: '2026-12-06T00:00:00Z',
    commitSeq: SNAPSHOT_COMMITS + named.length * framesPerSegment,
    oldestCommitSeq: 0,
    walGeneration: GENERATION,
    files: [file],
    segments: named,
  };
  return {
    manifestKey: await putManifest(store, manifest),
    manifest,
    snapshotKey,
    snapshot,
    segments,
    framesPerSegment,
  };
}

/**
 * Stores `stored` at `key` in place of the object there, and a manifest
 * whose entry for it records the new size and CRC-32 (so only the envelope
 * can tell).
 */
export async function replaceObject(
  store: ObjectStore,
  written: WrittenRestorePoint,
  key: string,
  stored: Uint8Array,
): Promise<Manifest> {
  await store.put(key, stored, { mode: 'overwrite' });
  const recorded = { size: stored.byteLength, crc32: crc32Hex(stored) };
  const manifest: Manifest = {
    ...written.manifest,
    files: written.manifest.files.map((file) =>
      file.key === key ? { ...file, ...recorded } : file,
    ),
    segments: written.manifest.segments.map((segment) =>
      segment.key === key ? { ...segment, ...recorded } : segment,
    ),
  };
  await putManifest(store, manifest);
  return manifest;
}

/**
 * What a compacted object holds: the fine segments' log as it is, one frame
 * standing for all their commits (restorable at its end only), or another
 * log of the same frames and length (a forgery only its bytes tell).
 */
export type CompactedBody = 'fine' | 'merged' | 'other';

/**
 * A restore point of the same commits whose first two segments are one
 * compacted object encrypted to `recipients`, holding `body`. The fine
 * segments stay in the bucket. LATEST names it.
 */
export async function compactFirstTwo(
  store: ObjectStore,
  written: WrittenRestorePoint,
  recipients: readonly AgeRecipient[],
  body: CompactedBody,
): Promise<{ manifestKey: string; manifest: Manifest; compactedKey: string }> {
  const [first, second, ...rest] = written.manifest.segments;
  const fine = Buffer.concat([written.segments[0]!.log, written.segments[1]!.log]);
  const commits = first!.frames + second!.frames;
  const frameBytes = written.segments[0]!.log.byteLength / first!.frames - 12;
  const log =
    body === 'merged'
      ? weightedFrame(commits, 100)
      : body === 'other'
        ? framedLog(commits, frameBytes)
        : new Uint8Array(fine);
  const key = compactedSegmentKey(
    PREFIX,
    GENERATION,
    0,
    fine.byteLength,
    1,
    SNAPSHOT_COMMITS,
    SNAPSHOT_COMMITS + commits,
  );
  const stored = encodeSegmentObject(
    log,
    {
      codec: 'zstd',
      kind: 'compacted',
      generation: GENERATION,
      start: 0,
      end: fine.byteLength,
      commits,
      previousCrc32: Number.parseInt(written.manifest.files[0]!.crc32, 16),
      lineage: LINEAGE,
      decodedLength: log.byteLength,
      chainEndCrc32: Number.parseInt(second!.crc32, 16),
    },
    { recipients },
  );
  await store.put(key, stored, { mode: 'overwrite' });
  const entry: SegmentEntry = {
    key,
    size: stored.byteLength,
    crc32: crc32Hex(stored),
    frames: commits,
    lineage: LINEAGE,
  };
  const manifest: Manifest = { ...written.manifest, segments: [entry, ...rest] };
  return { manifestKey: await putManifest(store, manifest), manifest, compactedKey: key };
}

/** Offsets in an encrypted object where age's payload starts and where each of its chunks ends. */
export function ageChunkBoundaries(stored: Uint8Array): { payload: number; chunkEnds: number[] } {
  const bytes = Buffer.from(stored);
  const { headerBytes } = readSegmentObjectHeader(stored);
  // The age header ends with its MAC line; a 16-byte nonce follows.
  const payload = bytes.indexOf('\n', bytes.indexOf('--- ', headerBytes)) + 1 + 16;
  const chunkEnds: number[] = [];
  for (
    let end = payload + AGE_CHUNK_BYTES + AGE_CHUNK_TAG_BYTES;
    end < stored.byteLength;
    end += AGE_CHUNK_BYTES + AGE_CHUNK_TAG_BYTES
  )
    chunkEnds.push(end);
  return { payload, chunkEnds };
}

/** Every file under `directory` (hidden ones too) by relative path, with its bytes; `null` when it does not exist. */
export async function treeOf(directory: string): Promise<Map<string, string> | null> {
  let entries: Dirent[];
  try {
    entries = await readdir(directory, { recursive: true, withFileTypes: true });
  } catch {
    return null;
  }
  const tree = new Map<string, string>();
  for (const entry of entries) {
    const path = join(entry.parentPath, entry.name);
    const name = relative(directory, path);
    tree.set(name, entry.isFile() ? (await readFile(path)).toString('hex') : 'directory');
  }
  return new Map([...tree].sort(([a], [b]) => (a < b ? -1 : 1)));
}
