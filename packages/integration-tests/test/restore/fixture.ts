/**
 * Builds bucket contents the way the worker would, with @x/manifest's key
 * and format functions, and knows what a restore of any commit must produce.
 *
 * The history: generation 0 starts from a snapshot with a floor; its WAL is
 * shipped in segments, with a manifest after some of them. Generation 1
 * starts from a new snapshot, with generation 0's WAL archived as
 * `wal.0.archive`, and ships its own WAL. Side files travel with every
 * manifest; `backup.lineage` is among them (and must not be restored).
 */
import { lstat, readdir, readFile, readlink } from 'node:fs/promises';
import { join } from 'node:path';
import {
  archiveKey,
  crc32Hex,
  type FileEntry,
  latestKey,
  type Manifest,
  manifestKey,
  type SegmentEntry,
  segmentKey,
  serializeManifest,
  sideKey,
  snapshotKey,
} from '@x/manifest';
import type { ObjectStore } from '@x/store';
import { encodeFrame } from '@x/wal-segment';

/** A small deterministic PRNG (mulberry32), so failures reproduce. */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function randomBytes(random: () => number, length: number): Uint8Array {
  const bytes = new Uint8Array(length);
  for (let index = 0; index < length; index += 1) bytes[index] = Math.floor(random() * 256);
  return bytes;
}

/** A fresh Uint8Array (not a Buffer: `Buffer#slice` shares memory, `Uint8Array#slice` copies). */
function concat(parts: readonly Uint8Array[]): Uint8Array {
  return new Uint8Array(Buffer.concat(parts));
}

function u64le(value: number): Uint8Array {
  const bytes = new Uint8Array(8);
  new DataView(bytes.buffer).setBigUint64(0, BigInt(value), true);
  return bytes;
}

export interface FixtureGeneration {
  readonly number: number;
  /** The commit count at the start of the generation's WAL. */
  readonly base: number;
  /** Every frame of the generation's WAL, encoded. */
  readonly frames: readonly Uint8Array[];
  /** Files (name → bytes) a restore of this generation writes besides wal.bin. */
  readonly files: ReadonlyMap<string, Uint8Array>;
}

export interface FixtureManifest {
  readonly key: string;
  readonly manifest: Manifest;
  readonly generation: FixtureGeneration;
}

export interface Fixture {
  readonly prefix: string;
  readonly lineage: string;
  readonly generations: readonly FixtureGeneration[];
  readonly manifests: readonly FixtureManifest[];
  readonly latestKey: string;
  /** The files a restore of `commitSeq` produces (without backup.parent). */
  expectedFiles(commitSeq: number): Map<string, Uint8Array>;
  /** Every commit some manifest covers. */
  readonly restorableCommits: readonly number[];
  /** Every object key written, with its bytes. */
  readonly objects: ReadonlyMap<string, Uint8Array>;
}

export interface FixtureOptions {
  readonly seed?: number;
  readonly lineage?: string;
  /** The floor of generation 0 (commits before the store's horizon). */
  readonly floor?: number;
  readonly snapshotBytes?: number;
  readonly maxFrameBytes?: number;
}

/**
 * Writes a two-generation backup under `prefix` and returns what it holds.
 * Generation 0 (floor 5): snapshot, segments of 4, 3 and 2 frames, manifests
 * after the first and the third (commits 9 and 14). Generation 1: snapshot,
 * archive 0, segments of 3 and 4 frames, a manifest after each (17 and 21).
 * LATEST names the last.
 */
export async function writeFixture(
  store: ObjectStore,
  prefix: string,
  options: FixtureOptions = {},
): Promise<Fixture> {
  const random = seededRandom(options.seed ?? 1);
  const lineage = options.lineage ?? 'a'.repeat(32);
  const floor = options.floor ?? 5;
  const snapshotSize = options.snapshotBytes ?? 3000;
  const maxFrame = options.maxFrameBytes ?? 300;
  const objects = new Map<string, Uint8Array>();
  const put = async (key: string, bytes: Uint8Array): Promise<void> => {
    // Side files are content-addressed: a second generation names the same object.
    if (objects.has(key)) return;
    objects.set(key, bytes);
    await store.put(key, bytes, { mode: 'create' });
  };
  const makeFrames = (count: number): Uint8Array[] =>
    Array.from({ length: count }, () =>
      encodeFrame(randomBytes(random, 1 + Math.floor(random() * maxFrame))),
    );
  const fileEntry = async (
    name: string,
    key: string,
    bytes: Uint8Array,
    frames: number,
  ): Promise<FileEntry> => {
    await put(key, bytes);
    return { name, key, size: bytes.byteLength, crc32: crc32Hex(bytes), frames, lineage };
  };
  const side = async (name: string, bytes: Uint8Array): Promise<FileEntry> =>
    fileEntry(name, sideKey(prefix, name, crc32Hex(bytes), bytes.byteLength), bytes, 0);

  const sideFiles = new Map<string, Uint8Array>([
    ['backup.lineage', new TextEncoder().encode(`${lineage}\n`)],
    ['roles.json', new TextEncoder().encode('{"roles":["primary"]}')],
    ['commit_times.bin', randomBytes(random, 64)],
  ]);
  const sideEntries: FileEntry[] = [];
  for (const [name, bytes] of sideFiles) sideEntries.push(await side(name, bytes));

  const generations: FixtureGeneration[] = [];
  const manifests: FixtureManifest[] = [];
  const writeManifest = async (
    generation: FixtureGeneration,
    files: FileEntry[],
    segments: SegmentEntry[],
  ): Promise<void> => {
    let commitSeq = floor;
    for (const entry of files) commitSeq += entry.frames;
    for (const entry of segments) commitSeq += entry.frames;
    const manifest: Manifest = {
      formatVersion: 1,
      lineage,
      createdAt: new Date(Date.UTC(2026, 10, 29, 9, 0, manifests.length)).toISOString(),
      commitSeq,
      oldestCommitSeq: floor,
      walGeneration: generation.number,
      files,
      segments: [...segments],
    };
    const key = manifestKey(prefix, commitSeq);
    await put(key, new TextEncoder().encode(serializeManifest(manifest)));
    manifests.push({ key, manifest, generation });
  };
  const shipSegments = async (
    generation: FixtureGeneration,
    files: FileEntry[],
    frameCounts: readonly number[],
    manifestAfter: ReadonlySet<number>,
  ): Promise<void> => {
    const segments: SegmentEntry[] = [];
    let offset = 0;
    let frameIndex = 0;
    for (const [index, count] of frameCounts.entries()) {
      const bytes = concat(generation.frames.slice(frameIndex, frameIndex + count));
      frameIndex += count;
      const key = segmentKey(prefix, generation.number, offset, offset + bytes.byteLength);
      await put(key, bytes);
      segments.push({
        key,
        size: bytes.byteLength,
        crc32: crc32Hex(bytes),
        frames: count,
        lineage,
      });
      offset += bytes.byteLength;
      if (manifestAfter.has(index)) await writeManifest(generation, files, segments);
    }
  };

  // Generation 0.
  const floorBytes = u64le(floor);
  const snapshot0 = randomBytes(random, snapshotSize);
  const frames0 = makeFrames(9);
  const generation0: FixtureGeneration = {
    number: 0,
    base: floor,
    frames: frames0,
    files: new Map([
      ['snapshot.bin', snapshot0],
      ['wal.floor', floorBytes],
      ...[...sideFiles].filter(([name]) => name !== 'backup.lineage'),
    ]),
  };
  generations.push(generation0);
  const files0 = [
    await fileEntry('snapshot.bin', snapshotKey(prefix, 0, floor), snapshot0, 0),
    await side('wal.floor', floorBytes),
    ...sideEntries,
  ];
  await shipSegments(generation0, files0, [4, 3, 2], new Set([0, 2]));

  // Generation 1: generation 0's WAL archived.
  const archive0 = concat(frames0);
  const snapshot1 = randomBytes(random, snapshotSize);
  const frames1 = makeFrames(7);
  const base1 = floor + frames0.length;
  const generation1: FixtureGeneration = {
    number: 1,
    base: base1,
    frames: frames1,
    files: new Map([
      ['snapshot.bin', snapshot1],
      ['wal.0.archive', archive0],
      ['wal.floor', floorBytes],
      ...[...sideFiles].filter(([name]) => name !== 'backup.lineage'),
    ]),
  };
  generations.push(generation1);
  const files1 = [
    await fileEntry('snapshot.bin', snapshotKey(prefix, 1, base1), snapshot1, 0),
    await fileEntry('wal.0.archive', archiveKey(prefix, 1, 0), archive0, frames0.length),
    await side('wal.floor', floorBytes),
    ...sideEntries,
  ];
  // Commit 14 is covered twice: by generation 0's last manifest and as
  // generation 1's base; restore picks the manifest with the fewest commits.
  await shipSegments(generation1, files1, [3, 4], new Set([0, 1]));

  const last = manifests[manifests.length - 1]!;
  await put(latestKey(prefix), new TextEncoder().encode(last.key));

  const coverage = (commitSeq: number): FixtureManifest | undefined =>
    manifests.find(
      (entry) => entry.generation.base <= commitSeq && commitSeq <= entry.manifest.commitSeq,
    );
  const restorableCommits: number[] = [];
  for (let commit = 0; commit <= last.manifest.commitSeq; commit += 1) {
    if (coverage(commit) !== undefined) restorableCommits.push(commit);
  }
  return {
    prefix,
    lineage,
    generations,
    manifests,
    latestKey: last.key,
    restorableCommits,
    objects,
    expectedFiles(commitSeq) {
      const entry = coverage(commitSeq);
      if (entry === undefined) throw new Error(`no fixture manifest covers ${commitSeq}`);
      const generation = entry.generation;
      const files = new Map(generation.files);
      files.set('wal.bin', concat(generation.frames.slice(0, commitSeq - generation.base)));
      return files;
    },
  };
}

/** Every entry under `directory` (recursively), as path → file bytes / `dir` / `link → target`. */
export async function snapshotTree(directory: string): Promise<Map<string, string>> {
  const tree = new Map<string, string>();
  const walk = async (relative: string): Promise<void> => {
    const absolute = join(directory, relative);
    let stats: Awaited<ReturnType<typeof lstat>>;
    try {
      stats = await lstat(absolute);
    } catch {
      tree.set(relative || '.', 'absent');
      return;
    }
    if (stats.isSymbolicLink()) tree.set(relative, `link → ${await readlink(absolute)}`);
    else if (stats.isDirectory()) {
      tree.set(relative || '.', 'dir');
      for (const name of (await readdir(absolute)).sort()) await walk(join(relative, name));
    } else tree.set(relative, Buffer.from(await readFile(absolute)).toString('base64'));
  };
  await walk('');
  return tree;
}

/** The regular files directly in `directory`, name → bytes. */
export async function readFiles(directory: string): Promise<Map<string, Uint8Array>> {
  const files = new Map<string, Uint8Array>();
  for (const entry of await readdir(directory, { withFileTypes: true })) {
    if (entry.isFile())
      files.set(entry.name, new Uint8Array(await readFile(join(directory, entry.name))));
  }
  return files;
}
