/**
 * Roll-forward: the `.seg` segments shipped after a restore point and named by
 * none yet (a crash before the next restore point leaves them), which a
 * restore of the latest state applies on top. Each header names the stored
 * CRC-32 of the object before it, so the chain from a verified restore point
 * extends one object at a time, read whole, trusting no listing, up to the
 * first that fails. Never raw `.segment` objects, nor past a later generation
 * (the newest state may be there) unless `pastLaterGenerations`. Rules and
 * requests: package README, _The latest state rolls forward_. The answer is
 * what the listing saw; entries carry the checked size and CRC-32.
 */
import type { WalCutter } from '@x/engine';
import {
  crc32Hex,
  type Manifest,
  objectKey,
  parseSegmentGenerationPrefix,
  parseSegmentKey,
  parseSnapshotKey,
  type SegmentEntry,
  segmentGenerationPrefix,
} from '@x/manifest';
import { getCapped, isTooLarge, type ListPage, listPages, type ObjectStore } from '@x/store';
import { readSegmentObjectHeader, SegmentObjectError } from '@x/wal-segment';
import {
  type GenerationEncryption,
  generationEncryption,
  generationLeadKey,
  isRawLayout,
  type ObjectOpenOptions,
} from './generation-encryption.ts';
import { ObjectEncodingError, ObjectKeyError } from './restore-errors.ts';
import { messageOf } from './restore-point-checks.ts';
import { decodeSegmentEntryLinks, expectedPreviousCrc32 } from './segment-object-read.ts';

/** The largest object read while rolling forward: the worker's largest segment (32 MiB) and a header. */
export const MAX_ROLL_FORWARD_OBJECT_BYTES = 32 * 1024 * 1024 + 64 * 1024;

/**
 * The most a candidate's object may hold: the worker's largest segment, or,
 * when its key names a longer range (one commit record larger than a
 * segment: a large transaction), that range stored at worst (zstd's bound
 * and a header), so a segment of a large transaction is rolled over too.
 */
function storedBytesCapOf(candidate: Candidate): number {
  const logBytes = candidate.end - candidate.start;
  return Math.max(MAX_ROLL_FORWARD_OBJECT_BYTES, logBytes + Math.ceil(logBytes / 128) + 64 * 1024);
}

/** What a roll-forward from a restore point found. */
export interface RollForward {
  /** The chained segments past the restore point, in order, as manifest entries of what was checked. */
  readonly segments: readonly SegmentEntry[];
  /** Commits those segments hold. */
  readonly commits: number;
  /** The first object that did not chain, and why; absent when the chain ended with the listing. */
  readonly stoppedAt?: { readonly key: string; readonly reason: string };
  /**
   * The newest later generation found (a snapshot or segments of a
   * generation above the restore point's): when present nothing was rolled
   * over.
   */
  readonly laterGeneration?: number;
  /** Requests the search sent. */
  readonly requests: { readonly list: number; readonly get: number };
}

/**
 * `identities` open encrypted segments; `encryption` is the generation's (read
 * from the restore point's snapshot header when not given), which every
 * chained segment must state too.
 */
export interface RollForwardOptions extends ObjectOpenOptions {
  readonly signal?: AbortSignal;
  /** Counts the commits of each decoded body (a fresh cutter per segment), checked against the header. */
  readonly createWalCutter?: (commits: number) => WalCutter;
  /**
   * Roll over this generation's chain even when a later generation exists: for a
   * commit or time inside this generation, whose chained tail is as verified as ever.
   */
  readonly pastLaterGenerations?: boolean;
}

/** A listed `.seg` (or raw `.segment`) object that may extend a chain. */
export interface Candidate {
  readonly key: string;
  readonly start: number;
  readonly end: number;
  readonly layout: 'raw' | 'object';
}

/**
 * The chained `.seg` segments of `manifest`'s generation past its last named
 * segment (what is checked: package README, _The latest state rolls forward_).
 * Store errors and aborts propagate as they are; nothing about the objects
 * themselves throws: a bad object ends the chain and is named in `stoppedAt`,
 * one of another encryption than its generation's included. A segment none
 * of the identities opens is the caller's lack, not the object's: it throws
 * `ObjectKeyError` (stopping there would pass off an older state as the latest).
 */
export async function findRollForward(
  store: ObjectStore,
  prefix: string,
  manifest: Manifest,
  options: RollForwardOptions = {},
): Promise<RollForward> {
  const { signal } = options;
  const call = (delimiter?: string): { signal?: AbortSignal; delimiter?: string } => ({
    ...(signal === undefined ? {} : { signal }),
    ...(delimiter === undefined ? {} : { delimiter }),
  });
  const requests = { list: 0, get: 0 };
  const generation = manifest.walGeneration;

  let laterGeneration: number | undefined;
  const later = (g: number): void => {
    if (g > generation) laterGeneration = Math.max(laterGeneration ?? g, g);
  };
  // The three listings do not depend on each other: sent together. The
  // generation's is wasted only when a later generation stops the search.
  const [wal, snapshots, generationPages] = await Promise.all([
    store.list(objectKey(prefix, 'wal/'), call('/')),
    store.list(objectKey(prefix, 'snapshots/'), call('/')),
    allPages(store, segmentGenerationPrefix(prefix, generation), call()),
  ]);
  requests.list += 2 + generationPages.length;
  for (const listed of wal.commonPrefixes) {
    const g = parseSegmentGenerationPrefix(prefix, listed);
    if (g !== undefined) later(g);
  }
  for (const object of snapshots.objects) {
    const parsed = parseSnapshotKey(prefix, object.key);
    if (parsed !== undefined) later(parsed.generation);
  }
  if (laterGeneration !== undefined && options.pastLaterGenerations !== true) {
    return { segments: [], commits: 0, laterGeneration, requests };
  }

  const last = manifest.segments.at(-1);
  let cursor = 0;
  if (last !== undefined) cursor = parseSegmentKey(prefix, last.key)?.end ?? 0;
  const chainEnd = expectedPreviousCrc32(prefix, manifest, manifest.segments.length);
  if (chainEnd === undefined) {
    // The worker never compacts a chain's last entry: a restore point that
    // ends with one was not written by it, and nothing past it is trusted.
    return {
      segments: [],
      commits: 0,
      stoppedAt: { key: last!.key, reason: 'the restore point ends with a compacted object' },
      requests,
    };
  }
  let previous = chainEnd;

  const candidates: Candidate[] = [];
  for (const page of generationPages) {
    for (const object of page.objects) {
      const parsed = parseSegmentKey(prefix, object.key);
      if (parsed === undefined || parsed.generation !== generation) continue;
      // Compacted objects stand for fine segments a restore point already
      // named; the chain past the restore point is made of fine ones only.
      if (parsed.layout === 'compacted' || parsed.end <= cursor) continue;
      candidates.push({ key: object.key, ...parsed });
    }
  }
  // By start; at one start a `.seg` before a raw one (only `.seg` chains).
  candidates.sort(
    (a, b) =>
      a.start - b.start ||
      (a.layout === b.layout ? 0 : a.layout === 'object' ? -1 : 1) ||
      a.end - b.end ||
      (a.key < b.key ? -1 : a.key > b.key ? 1 : 0),
  );

  let encryption = options.encryption;
  if (encryption === undefined && candidates.length > 0) {
    encryption = await generationEncryption(store, prefix, manifest, signal);
    const lead = generationLeadKey(prefix, manifest);
    if (lead !== undefined && !isRawLayout(prefix, lead)) requests.get += 1;
  }
  const segments: SegmentEntry[] = [];
  let commits = 0;
  let index = 0;
  for (;;) {
    while (index < candidates.length && candidates[index]!.start < cursor) index += 1;
    const next = candidates[index];
    if (next === undefined) return { segments, commits, requests };
    const stop = (key: string, reason: string): RollForward => ({
      segments,
      commits,
      stoppedAt: { key, reason },
      requests,
    });
    if (next.start !== cursor) {
      return stop(next.key, `it starts at ${next.start}, not where the chain ends (${cursor})`);
    }
    if (next.layout !== 'object') {
      return stop(next.key, 'a raw .segment object carries no chain CRC');
    }
    const atCursor: Candidate[] = [];
    for (; index < candidates.length && candidates[index]!.start === cursor; index += 1)
      if (candidates[index]!.layout === 'object') atCursor.push(candidates[index]!);
    const chained = await firstChaining(store, prefix, manifest, atCursor, previous, {
      ...options,
      ...(encryption === undefined ? {} : { encryption }),
    });
    requests.get += chained.read;
    if (!('entry' in chained)) return stop(chained.key, chained.reason);
    // Without a snapshot or segment to hold to, the chain holds to its first object.
    encryption ??= chained.encryption;
    segments.push(chained.entry);
    commits += chained.entry.frames;
    cursor = chained.end;
    previous = chained.crc;
  }
}

/**
 * Of `candidates` (`.seg` objects at one start, in order), the first that
 * chains to `previous`, with its end; else the first one's failure. `read`:
 * the objects read.
 */
export async function firstChaining(
  store: ObjectStore,
  prefix: string,
  manifest: Manifest,
  candidates: readonly Candidate[],
  previous: number,
  options: RollForwardOptions,
): Promise<
  | {
      entry: SegmentEntry;
      crc: number;
      end: number;
      encryption: GenerationEncryption;
      read: number;
    }
  | { key: string; reason: string; read: number }
> {
  let failure: { key: string; reason: string } | undefined;
  let read = 0;
  for (const candidate of candidates) {
    read += 1;
    const checked = await checkCandidate(store, prefix, manifest, candidate, previous, options);
    if (typeof checked !== 'string') return { ...checked, end: candidate.end, read };
    failure ??= { key: candidate.key, reason: checked };
  }
  return { ...(failure ?? { key: '', reason: 'no object starts there' }), read };
}

/** The entry of a candidate that chains to `previous`, or why it does not. */
async function checkCandidate(
  store: ObjectStore,
  prefix: string,
  manifest: Manifest,
  candidate: Candidate,
  previous: number,
  options: RollForwardOptions,
): Promise<{ entry: SegmentEntry; crc: number; encryption: GenerationEncryption } | string> {
  const cap = storedBytesCapOf(candidate);
  const found = await getCapped(
    store,
    candidate.key,
    cap,
    options.signal === undefined ? {} : { signal: options.signal },
  );
  if (found === null) return 'it disappeared after the listing';
  if (isTooLarge(found)) return `it is larger than ${cap} bytes`;
  const stored = found.body;
  let commits: number;
  try {
    commits = readSegmentObjectHeader(stored).commits;
  } catch (error) {
    if (SegmentObjectError.isInstance(error)) return `header ${error.field}: ${error.problem}`;
    throw error;
  }
  const crc32 = crc32Hex(stored);
  const entry: SegmentEntry = {
    key: candidate.key,
    size: stored.byteLength,
    crc32,
    frames: commits,
    lineage: manifest.lineage,
  };
  let decoded: ReturnType<typeof decodeSegmentEntryLinks>;
  try {
    // Checks generation, range, lineage (the restore point's), the chain CRC and encryption.
    decoded = decodeSegmentEntryLinks(prefix, entry, stored, previous, options);
  } catch (error) {
    if (ObjectKeyError.isInstance(error)) throw error;
    if (ObjectEncodingError.isInstance(error)) return `${error.field}: ${error.problem}`;
    return messageOf(error);
  }
  const { body, encryption } = decoded;
  if (options.createWalCutter !== undefined) {
    const cutter = options.createWalCutter(Number.MAX_SAFE_INTEGER);
    cutter.push(body);
    if (cutter.commitsSeen !== commits) {
      return `its body holds ${cutter.commitsSeen} complete commits, its header says ${commits}`;
    }
  }
  return { entry, crc: Number.parseInt(crc32, 16), encryption };
}

/** `manifest` with the rolled-forward segments appended and its commit count raised by theirs. */
export function rolledForwardManifest(manifest: Manifest, rolled: RollForward): Manifest {
  if (rolled.segments.length === 0) return manifest;
  return {
    ...manifest,
    commitSeq: manifest.commitSeq + rolled.commits,
    segments: [...manifest.segments, ...rolled.segments],
  };
}

/** Every page of a listing, in order. */
async function allPages(
  store: ObjectStore,
  prefix: string,
  options: { signal?: AbortSignal },
): Promise<ListPage[]> {
  const pages: ListPage[] = [];
  for await (const page of listPages(store, prefix, options)) pages.push(page);
  return pages;
}
