/**
 * findUnnamedNewerData(): shipped objects newer than a restore point, which a
 * restore of that point leaves behind (segments ship about every second,
 * restore points only now and then), so the caller can say so. Newer than a
 * manifest of generation G whose segments end at byte E (0 with none): a
 * segment of G ending past E (straddling E included), and every segment and
 * snapshot of a generation above G. LIST requests only, sizes as listed, and
 * keys the layout does not produce ignored, never thrown on; the counts are
 * what the listings saw of a moving bucket. `newerRestorePoints` tells "in no
 * restore point" from "maybe in a newer one". Details: package README.
 */
import type { AgeIdentity } from '@x/age-envelope';
import {
  type Manifest,
  objectKey,
  parseManifestKey,
  parseSegmentGenerationPrefix,
  parseSegmentKey,
  parseSnapshotKey,
  segmentGenerationPrefix,
} from '@x/manifest';
import { compareKeys, type ListOptions, type ObjectStore } from '@x/store';
import { checkedPrefix } from './restore-point-checks.ts';
import { loadRestorePoint } from './restore-points.ts';
import { findRollForward, rolledForwardManifest } from './roll-forward.ts';

/** What a bucket holds beyond a restore point. All counts are 0 when nothing is newer. */
export interface UnnamedNewerData {
  /** The restore point measured against: its commit and WAL generation. */
  readonly commitSeq: number;
  readonly walGeneration: number;
  /** Where the restore point's WAL ends in its generation (0 when it names no segment). */
  readonly walEnd: number;
  /** Newer segments: past `walEnd` in `walGeneration`, or of a later generation. */
  readonly segments: number;
  readonly segmentBytes: number;
  /** Snapshots of a generation later than `walGeneration`. */
  readonly snapshots: number;
  readonly snapshotBytes: number;
  /** `segmentBytes + snapshotBytes`. */
  readonly bytes: number;
  /**
   * The first and last newer object, in the order a restore would use them
   * (by generation; a generation's snapshot before its segments; segments by
   * offset). Absent when nothing is newer.
   */
  readonly firstKey?: string;
  readonly lastKey?: string;
  /** The newest generation that holds newer data. Absent when nothing is newer. */
  readonly newestGeneration?: number;
  /**
   * Manifest keys of a commit above the restore point's. When 0, the newer
   * data is in no restore point at all; otherwise some of it may be in one of
   * those (for example one written while a restore was running).
   */
  readonly newerRestorePoints: number;
  /** With `afterRollForward`: what a restore of the latest state rolls forward over (not counted above). */
  readonly rolledForward?: { readonly segments: number; readonly commits: number };
}

export interface FindUnnamedNewerDataOptions {
  readonly signal?: AbortSignal;
  /**
   * With `afterRollForward`: the age identities that open the chained
   * segments (as a restore's); without one that opens them the search
   * throws `ObjectKeyError`.
   */
  readonly identities?: readonly AgeIdentity[];
  /**
   * {@link findUnnamedNewerDataAfter} only: measure from where a restore of
   * the latest state ends, after it rolled forward over the chained segments
   * past the restore point (`roll-forward.ts`), so only what such a restore
   * leaves behind is counted (raw `.segment` objects, what follows a break in
   * the chain, a later generation). `rolledForward` then says how many
   * segments and commits the roll-forward covers. Costs the roll-forward's
   * requests (two LISTs, the generation's listing, one GET per chained object).
   */
  readonly afterRollForward?: boolean;
}

/** One newer object, with where it sits in restore order. */
interface NewerObject {
  readonly key: string;
  readonly size: number;
  readonly kind: 'snapshot' | 'segment';
  readonly generation: number;
  /** A segment's start offset; -1 for a snapshot (it comes before the generation's segments). */
  readonly offset: number;
}

function callOptions(
  options: FindUnnamedNewerDataOptions,
  delimiter?: string,
): { signal?: AbortSignal; delimiter?: string } {
  return {
    ...(options.signal === undefined ? {} : { signal: options.signal }),
    ...(delimiter === undefined ? {} : { delimiter }),
  };
}

/** The end offset of the manifest's WAL: the last segment's end, or 0. */
function walEndOf(prefix: string, manifest: Pick<Manifest, 'walGeneration' | 'segments'>): number {
  let end = 0;
  for (const segment of manifest.segments) {
    const parsed = parseSegmentKey(prefix, segment.key);
    // A loaded manifest's segments all parse and chain; a hand-made one that
    // does not is measured by what does parse (never a throw).
    if (parsed !== undefined && parsed.generation === manifest.walGeneration) {
      end = Math.max(end, parsed.end);
    }
  }
  return end;
}

/**
 * The shipped segments and snapshots under `prefix` that are newer than
 * `manifest` (see the module comment for what counts), and how many restore
 * points above it exist.
 *
 * @throws RestoreOptionsError for an empty or invalid prefix. Store errors and
 * aborts propagate as they are. Keys that do not parse are ignored.
 */
export async function findUnnamedNewerData(
  store: ObjectStore,
  prefix: string,
  manifest: Pick<Manifest, 'commitSeq' | 'walGeneration' | 'segments'>,
  options: FindUnnamedNewerDataOptions = {},
): Promise<UnnamedNewerData> {
  const base = checkedPrefix(prefix);
  const generation = manifest.walGeneration;
  const walEnd = walEndOf(base, manifest);
  const newer: NewerObject[] = [];

  const [generations, snapshots, manifests] = await Promise.all([
    store.list(objectKey(base, 'wal/'), callOptions(options, '/')),
    store.list(objectKey(base, 'snapshots/'), callOptions(options, '/')),
    store.list(objectKey(base, 'manifest/'), callOptions(options, '/')),
  ]);
  const laterGenerations: number[] = [];
  for (const listed of generations.commonPrefixes) {
    const number = parseSegmentGenerationPrefix(base, listed);
    if (number !== undefined && number >= generation) laterGenerations.push(number);
  }
  const listings = await Promise.all(
    laterGenerations.map((number) =>
      store.list(segmentGenerationPrefix(base, number), callOptions(options, '/')),
    ),
  );
  for (const [index, listing] of listings.entries()) {
    const number = laterGenerations[index] as number;
    for (const object of listing.objects) {
      const parsed = parseSegmentKey(base, object.key);
      if (parsed === undefined || parsed.generation !== number) continue;
      if (number === generation && parsed.end <= walEnd) continue;
      newer.push({
        key: object.key,
        size: object.size,
        kind: 'segment',
        generation: number,
        offset: parsed.start,
      });
    }
  }

  for (const object of snapshots.objects) {
    const parsed = parseSnapshotKey(base, object.key);
    if (parsed === undefined || parsed.generation <= generation) continue;
    newer.push({
      key: object.key,
      size: object.size,
      kind: 'snapshot',
      generation: parsed.generation,
      offset: -1,
    });
  }

  let newerRestorePoints = 0;
  for (const object of manifests.objects) {
    const commitSeq = parseManifestKey(base, object.key);
    if (commitSeq !== undefined && commitSeq > manifest.commitSeq) newerRestorePoints += 1;
  }

  newer.sort(
    (a, b) => a.generation - b.generation || a.offset - b.offset || compareKeys(a.key, b.key),
  );
  let segments = 0;
  let segmentBytes = 0;
  let snapshotCount = 0;
  let snapshotBytes = 0;
  for (const object of newer) {
    if (object.kind === 'segment') {
      segments += 1;
      segmentBytes += object.size;
    } else {
      snapshotCount += 1;
      snapshotBytes += object.size;
    }
  }
  const first = newer[0];
  const last = newer.at(-1);
  return {
    commitSeq: manifest.commitSeq,
    walGeneration: generation,
    walEnd,
    segments,
    segmentBytes,
    snapshots: snapshotCount,
    snapshotBytes,
    bytes: segmentBytes + snapshotBytes,
    ...(first === undefined ? {} : { firstKey: first.key }),
    ...(last === undefined
      ? {}
      : {
          lastKey: last.key,
          // Sorted by generation first: the last object is of the newest one.
          newestGeneration: last.generation,
        }),
    newerRestorePoints,
  };
}

/**
 * {@link findUnnamedNewerData} for the manifest at `manifestKey`, read and
 * checked as restore reads it.
 *
 * @returns `null` when the manifest does not exist (any more: retention may
 * have deleted it since it was chosen).
 * @throws RestoreOptionsError for an invalid prefix.
 * @throws RestorePointRejectedError when the manifest is unreadable or unsafe.
 * @throws ObjectKeyError with `afterRollForward`, when a chained segment is
 *   encrypted and none of `options.identities` opens it.
 * Store errors and aborts propagate as they are.
 */
export async function findUnnamedNewerDataAfter(
  store: ObjectStore,
  prefix: string,
  manifestKey: string,
  options: FindUnnamedNewerDataOptions = {},
): Promise<UnnamedNewerData | null> {
  const base = checkedPrefix(prefix);
  const point = await loadRestorePoint(store, base, manifestKey, options.signal);
  if (point === null) return null;
  if (options.afterRollForward !== true)
    return findUnnamedNewerData(store, base, point.manifest, options);
  // The roll-forward's listings of `wal/` and `snapshots/` serve the search too.
  const listed = withListingsKept(store);
  const rolled = await findRollForward(listed, base, point.manifest, options);
  const found = await findUnnamedNewerData(
    listed,
    base,
    rolledForwardManifest(point.manifest, rolled),
    options,
  );
  // Measured from the rolled-forward end, but against the restore point's own commit.
  return {
    ...found,
    commitSeq: point.manifest.commitSeq,
    rolledForward: { segments: rolled.segments.length, commits: rolled.commits },
  };
}

/**
 * `store`, with each listing (by prefix and delimiter) sent once and its
 * answer reused: one view of the bucket for one search.
 */
function withListingsKept(store: ObjectStore): ObjectStore {
  const kept = new Map<string, ReturnType<ObjectStore['list']>>();
  return new Proxy(store, {
    get(target, property) {
      if (property !== 'list') {
        const value = Reflect.get(target, property, target);
        return typeof value === 'function' ? value.bind(target) : value;
      }
      return (prefix: string, options?: ListOptions) => {
        const key = `${options?.delimiter ?? ''}\u0000${prefix}`;
        let answer = kept.get(key);
        if (answer === undefined) {
          answer = target.list(prefix, options);
          kept.set(key, answer);
        }
        return answer;
      };
    },
  });
}

/** True when the bucket holds anything newer than the restore point. */
export function holdsUnnamedNewerData(found: UnnamedNewerData): boolean {
  return found.segments + found.snapshots > 0;
}
