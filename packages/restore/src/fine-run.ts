/**
 * Exact restores inside a compacted object: the fine `.seg` segments it
 * replaced, while the bucket still holds them (the worker keeps them for its
 * exact window). They are found by listing and trusted only as a chain: the
 * first names the stored CRC-32 of the entry before the compacted object,
 * each next one the one before it, and the run ends where the compacted
 * object ends, with as many commits.
 */
import type { WalCutter } from '@x/engine';
import {
  crc32Hex,
  type Manifest,
  parseSegmentKey,
  type SegmentEntry,
  segmentGenerationPrefix,
} from '@x/manifest';
import { getCapped, isTooLarge, listPages, type ObjectStore } from '@x/store';
import { readSegmentObjectHeader, SegmentObjectError } from '@x/wal-segment';
import { generationEncryption, type ObjectOpenOptions } from './generation-encryption.ts';
import { type Candidate, firstChaining } from './roll-forward.ts';
import { expectedPreviousCrc32 } from './segment-object-read.ts';

/**
 * `identities` open encrypted segments; `encryption` is the generation's (read
 * from the restore point's snapshot header when not given), which every fine
 * segment must state too.
 */
export interface FineRunOptions extends ObjectOpenOptions {
  readonly signal?: AbortSignal;
  /** Counts the commits of each decoded body, checked against its header. */
  readonly createWalCutter?: (commits: number) => WalCutter;
}

/**
 * The fine segments that `manifest.segments[index]` (a compacted object)
 * replaced, as checked entries in chain order, or `undefined` when it is
 * not compacted or the bucket no longer holds a whole chain of them (a fine
 * segment of another encryption than its generation's does not chain).
 * Store errors, aborts and `ObjectKeyError` (none of the identities opens a
 * fine segment) propagate.
 */
export async function fineRunOf(
  store: ObjectStore,
  prefix: string,
  manifest: Manifest,
  index: number,
  options: FineRunOptions = {},
): Promise<SegmentEntry[] | undefined> {
  const compacted = manifest.segments[index];
  const range = compacted === undefined ? undefined : parseSegmentKey(prefix, compacted.key);
  if (compacted === undefined || range?.layout !== 'compacted') return undefined;
  const links = await chainLinks(store, prefix, manifest, index, options);
  if (links === undefined) return undefined;
  const candidates = (
    await listFineSegments(store, prefix, range.generation, options.signal)
  ).filter((fine) => fine.start >= range.start && fine.end <= range.end);
  const encryption =
    options.encryption ??
    (candidates.length === 0
      ? undefined
      : await generationEncryption(store, prefix, manifest, options.signal));
  const opening = { ...options, ...(encryption === undefined ? {} : { encryption }) };
  const run: SegmentEntry[] = [];
  let cursor = range.start;
  let previous = links.previous;
  while (cursor < range.end) {
    const atCursor = candidates.filter((candidate) => candidate.start === cursor);
    const chained = await firstChaining(store, prefix, manifest, atCursor, previous, opening);
    if (!('entry' in chained)) return undefined;
    run.push(chained.entry);
    cursor = chained.end;
    previous = chained.crc;
  }
  const commits = run.reduce((sum, entry) => sum + entry.frames, 0);
  if (commits !== compacted.frames) return undefined;
  if (links.chainEnd !== undefined && previous !== links.chainEnd) return undefined;
  return run;
}

/**
 * Where the fine run must start from (the stored CRC-32 before the compacted
 * object) and, when its header was read for that, where it must end. The
 * manifest gives the first unless the entry before is compacted too; then
 * the compacted object's own header, read whole and checked against its
 * entry, gives both.
 */
async function chainLinks(
  store: ObjectStore,
  prefix: string,
  manifest: Manifest,
  index: number,
  options: FineRunOptions,
): Promise<{ previous: number; chainEnd?: number } | undefined> {
  const previous = expectedPreviousCrc32(prefix, manifest, index);
  if (previous !== undefined) return { previous };
  const compacted = manifest.segments[index]!;
  const found = await getCapped(
    store,
    compacted.key,
    compacted.size,
    options.signal === undefined ? {} : { signal: options.signal },
  );
  if (found === null || isTooLarge(found) || crc32Hex(found.body) !== compacted.crc32)
    return undefined;
  try {
    const header = readSegmentObjectHeader(found.body);
    if (header.chainEndCrc32 === null) return undefined;
    return { previous: header.previousCrc32, chainEnd: header.chainEndCrc32 };
  } catch (error) {
    if (SegmentObjectError.isInstance(error)) return undefined;
    throw error;
  }
}

/** The fine `.seg` objects listed in `generation`, by start, then end, then key. */
async function listFineSegments(
  store: ObjectStore,
  prefix: string,
  generation: number,
  signal?: AbortSignal,
): Promise<Candidate[]> {
  const found: Candidate[] = [];
  const call = signal === undefined ? {} : { signal };
  for await (const page of listPages(store, segmentGenerationPrefix(prefix, generation), call))
    for (const object of page.objects) {
      const parsed = parseSegmentKey(prefix, object.key);
      if (parsed?.layout === 'object' && parsed.generation === generation)
        found.push({ key: object.key, ...parsed });
    }
  return found.sort(
    (a, b) => a.start - b.start || a.end - b.end || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0),
  );
}

/**
 * The keys of `manifest`'s compacted objects whose range listed fine
 * segments tile, from one listing and the keys alone (what `ls` reports as
 * exact; a restore still checks the chain).
 */
export async function compactedWithFineSegments(
  store: ObjectStore,
  prefix: string,
  manifest: Manifest,
  signal?: AbortSignal,
): Promise<Set<string>> {
  const compacted = manifest.segments.filter(
    (segment) => parseSegmentKey(prefix, segment.key)?.layout === 'compacted',
  );
  const tiled = new Set<string>();
  if (compacted.length === 0) return tiled;
  const endsByStart = new Map<number, number[]>();
  for (const fine of await listFineSegments(store, prefix, manifest.walGeneration, signal))
    endsByStart.set(fine.start, [...(endsByStart.get(fine.start) ?? []), fine.end]);
  for (const segment of compacted) {
    const range = parseSegmentKey(prefix, segment.key)!;
    if (reaches(endsByStart, range.start, range.end)) tiled.add(segment.key);
  }
  return tiled;
}

/** Whether ranges from `endsByStart` chain from `start` exactly to `end`. */
function reaches(endsByStart: ReadonlyMap<number, number[]>, start: number, end: number): boolean {
  const seen = new Set<number>();
  const open = [start];
  while (open.length > 0) {
    const at = open.pop()!;
    if (at === end) return true;
    if (seen.has(at)) continue;
    seen.add(at);
    for (const next of endsByStart.get(at) ?? []) if (next <= end) open.push(next);
  }
  return false;
}
