/**
 * Reading restore points from a prefix: LATEST, one manifest, all of them,
 * and the one that covers a chosen commit.
 *
 * A manifest is read in bounded memory (at most `MAX_MANIFEST_BYTES`), and
 * accepted only when it parses, its lineage is consistent, and every name
 * and key in it is safe (`restore-point-checks.ts`). When LATEST is unusable,
 * the newest manifest that is accepted stands in for it, found by listing
 * `manifest/` page by page with at most `FALLBACK_WINDOW` keys in memory.
 */
import {
  latestKey,
  MAX_LATEST_BYTES,
  MAX_MANIFEST_BYTES,
  type Manifest,
  parseLatest,
  parseManifest,
  parseManifestKey,
} from '@x/manifest';
import { getCapped, isTooLarge, listPages, type ObjectStore } from '@x/store';
import {
  NoRestorePointError,
  type RestorableRange,
  RestorePointRejectedError,
} from './restore-errors.ts';
import { messageOf, restorableFrom, restorePointProblems } from './restore-point-checks.ts';

/** A manifest read and checked. */
export interface LoadedRestorePoint {
  readonly key: string;
  readonly manifest: Manifest;
  /** The lowest commit this restore point restores to (its WAL cut to nothing). */
  readonly restorableFrom: number;
  /** Bytes of the manifest object. */
  readonly manifestSize: number;
}

function callOptions(signal: AbortSignal | undefined): { signal?: AbortSignal } {
  return signal === undefined ? {} : { signal };
}

/** Reads an object up to `limit` bytes; `null` when missing, `'too-large'` past the limit. */
export async function readCapped(
  store: ObjectStore,
  key: string,
  limit: number,
  signal: AbortSignal | undefined,
): Promise<Uint8Array | null | 'too-large'> {
  const found = await getCapped(store, key, limit, callOptions(signal));
  if (found === null) return null;
  return isTooLarge(found) ? 'too-large' : found.body;
}

/**
 * Reads and checks the manifest at `key`.
 * @returns `null` when the object does not exist.
 * @throws RestorePointRejectedError when it is too large, does not parse or is unsafe.
 */
export async function loadRestorePoint(
  store: ObjectStore,
  prefix: string,
  key: string,
  signal?: AbortSignal,
): Promise<LoadedRestorePoint | null> {
  const bytes = await readCapped(store, key, MAX_MANIFEST_BYTES, signal);
  if (bytes === null) return null;
  if (bytes === 'too-large') {
    throw new RestorePointRejectedError(key, [`larger than ${MAX_MANIFEST_BYTES} bytes`]);
  }
  let manifest: Manifest;
  try {
    manifest = parseManifest(bytes, { prefix });
  } catch (error) {
    throw new RestorePointRejectedError(key, [`does not parse: ${messageOf(error)}`], {
      cause: error,
    });
  }
  const problems = restorePointProblems(prefix, key, manifest);
  if (problems.length > 0) throw new RestorePointRejectedError(key, problems);
  return {
    key,
    manifest,
    restorableFrom: restorableFrom(manifest),
    manifestSize: bytes.byteLength,
  };
}

/** What LATEST says, read strictly. */
export type LatestReading =
  | { readonly state: 'missing' }
  | { readonly state: 'invalid'; readonly problem: string }
  | { readonly state: 'ok'; readonly manifestKey: string };

/** Reads LATEST: one manifest key of this prefix, as `parseLatest` accepts it. */
export async function readLatest(
  store: ObjectStore,
  prefix: string,
  signal?: AbortSignal,
): Promise<LatestReading> {
  const bytes = await readCapped(store, latestKey(prefix), MAX_LATEST_BYTES, signal);
  if (bytes === null) return { state: 'missing' };
  if (bytes === 'too-large') {
    return { state: 'invalid', problem: `LATEST is larger than ${MAX_LATEST_BYTES} bytes` };
  }
  let key: string;
  try {
    key = parseLatest(bytes, { prefix });
  } catch (error) {
    return { state: 'invalid', problem: `LATEST ${messageOf(error)}` };
  }
  return { state: 'ok', manifestKey: key };
}

/**
 * How many times verify and `ls` read LATEST again when the restore point it
 * named is gone by the time they look for it.
 */
export const MAX_LATEST_FOLLOWS = 5;

/**
 * LATEST as a reader beside a live writer should report it. The writer moves
 * LATEST on and may retire the restore point it named a moment before, so a
 * target gone by the time the reader looks for it is not yet a broken LATEST:
 * while `found(key)` says LATEST's target does not exist, LATEST is read
 * again, and when it moved, its new target is looked for, up to
 * `MAX_LATEST_FOLLOWS` times. `found` looks the key up (and may check the
 * restore point as the caller needs).
 * @returns the first reading whose target was found, else the last one read
 *   (LATEST missing, invalid, unmoved on a missing target, or still moving).
 */
export async function followMovedLatest(
  store: ObjectStore,
  prefix: string,
  first: LatestReading,
  found: (manifestKey: string) => Promise<boolean>,
  signal?: AbortSignal,
): Promise<LatestReading> {
  let reading = first;
  for (let follows = 0; ; follows += 1) {
    if (reading.state !== 'ok' || (await found(reading.manifestKey))) return reading;
    if (follows === MAX_LATEST_FOLLOWS) return reading;
    const again = await readLatest(store, prefix, signal);
    if (again.state === 'ok' && again.manifestKey === reading.manifestKey) return reading;
    reading = again;
  }
}

/** The manifest keys under the prefix, by commit, oldest first; other keys under `manifest/` are returned apart. */
export async function listManifestKeys(
  store: ObjectStore,
  prefix: string,
  signal?: AbortSignal,
): Promise<{ manifests: { key: string; commitSeq: number; size: number }[]; strays: string[] }> {
  const listing = await store.list(`${prefix}/manifest/`, callOptions(signal));
  const manifests: { key: string; commitSeq: number; size: number }[] = [];
  const strays: string[] = [];
  for (const object of listing.objects) {
    const commitSeq = parseManifestKey(prefix, object.key);
    if (commitSeq === undefined) strays.push(object.key);
    else manifests.push({ key: object.key, commitSeq, size: object.size });
  }
  manifests.sort((a, b) => a.commitSeq - b.commitSeq);
  return { manifests, strays };
}

/** Why a restore of the latest state did not use the manifest LATEST names. */
export interface LatestFallback {
  /** The manifest key LATEST names, or `null` when it names none (missing, too large, garbage). */
  readonly latest: string | null;
  /** What is wrong with LATEST or with the manifest it names, as a sentence. */
  readonly reason: string;
}

/** The restore point a restore of the latest state uses, and why it is not LATEST's when it is not. */
export interface PickedLatest {
  readonly point: LoadedRestorePoint;
  /** Present when LATEST was unusable and the newest restore point that passes the checks was used instead. */
  readonly fellBackFrom?: LatestFallback;
}

/**
 * Manifest keys held in memory at once while looking for the newest usable
 * one: a window of the newest keys below a bound. When every key of a
 * window is unusable, the prefix is listed again below it, so memory stays
 * bounded however many manifests the prefix holds.
 */
export const FALLBACK_WINDOW = 1000;

/** Rejections named in the error when nothing is usable (the rest are counted). */
const REJECTIONS_NAMED = 5;

/**
 * The newest `limit` manifest keys under the prefix that sort below `below`
 * (all when `undefined`), oldest first, and whether older ones were left
 * out. One paged listing of `manifest/`; keys sort in commit order (every
 * number in a key is zero-padded to 20 digits).
 */
async function newestManifestKeys(
  store: ObjectStore,
  prefix: string,
  below: string | undefined,
  limit: number,
  signal: AbortSignal | undefined,
): Promise<{ keys: string[]; older: boolean }> {
  const keys: string[] = [];
  let older = false;
  for await (const page of listPages(store, `${prefix}/manifest/`, callOptions(signal))) {
    for (const object of page.objects) {
      if (below !== undefined && object.key >= below) continue;
      if (parseManifestKey(prefix, object.key) === undefined) continue;
      keys.push(object.key);
    }
    if (keys.length > limit) {
      keys.splice(0, keys.length - limit);
      older = true;
    }
  }
  return { keys, older };
}

/**
 * The newest manifest of the prefix that loads and passes restore's checks
 * (`loadRestorePoint`), skipping `skip`; newest first, in bounded memory.
 * Returns the rejections met on the way (for the error when none is usable).
 * Store errors and aborts throw.
 */
export async function newestUsableRestorePoint(
  store: ObjectStore,
  prefix: string,
  skip: string | null,
  signal?: AbortSignal,
  window: number = FALLBACK_WINDOW,
): Promise<{
  point: LoadedRestorePoint | null;
  tried: number;
  rejected: { key: string; problems: readonly string[] }[];
}> {
  const rejected: { key: string; problems: readonly string[] }[] = [];
  let tried = 0;
  let below: string | undefined;
  for (;;) {
    const { keys, older } = await newestManifestKeys(store, prefix, below, window, signal);
    for (let index = keys.length - 1; index >= 0; index -= 1) {
      const key = keys[index]!;
      if (key === skip) continue;
      tried += 1;
      try {
        const point = await loadRestorePoint(store, prefix, key, signal);
        // Deleted between the listing and the read (retention): try the next.
        if (point !== null) return { point, tried, rejected };
      } catch (error) {
        if (!RestorePointRejectedError.isInstance(error)) throw error;
        rejected.push({ key, problems: error.problems });
      }
    }
    if (!older || keys.length === 0) return { point: null, tried, rejected };
    below = keys[0];
  }
}

/**
 * The restore point for a restore of the latest state: the one LATEST
 * names; when LATEST is missing, too large, garbage, or names a manifest
 * that is missing or fails restore's checks, the newest manifest of the
 * prefix that passes them, with `fellBackFrom` saying what was wrong.
 * @throws NoRestorePointError when there is no LATEST and no manifest (nothing was backed up).
 * @throws RestorePointRejectedError (key: LATEST's) naming LATEST's problem and why no
 *   manifest was usable, when there are manifests but none is.
 */
export async function latestRestorePoint(
  store: ObjectStore,
  prefix: string,
  signal?: AbortSignal,
): Promise<PickedLatest> {
  const latest = await readLatest(store, prefix, signal);
  let fellBackFrom: LatestFallback;
  if (latest.state === 'ok') {
    const target = latest.manifestKey;
    try {
      const loaded = await loadRestorePoint(store, prefix, target, signal);
      if (loaded !== null) return { point: loaded };
      fellBackFrom = { latest: target, reason: `LATEST names ${target}, which does not exist` };
    } catch (error) {
      if (!RestorePointRejectedError.isInstance(error)) throw error;
      fellBackFrom = {
        latest: target,
        reason: `LATEST names ${target}, which is refused: ${error.problems.join('; ')}`,
      };
    }
  } else if (latest.state === 'invalid') {
    fellBackFrom = { latest: null, reason: latest.problem };
  } else {
    fellBackFrom = { latest: null, reason: `${latestKey(prefix)} does not exist` };
  }
  const found = await newestUsableRestorePoint(store, prefix, fellBackFrom.latest, signal);
  if (found.point !== null) return { point: found.point, fellBackFrom };
  if (latest.state === 'missing' && found.tried === 0) {
    throw new NoRestorePointError(
      prefix,
      `${latestKey(prefix)} does not exist (nothing was backed up here yet)`,
    );
  }
  const named = found.rejected
    .slice(0, REJECTIONS_NAMED)
    .map((entry) => `${entry.key}: ${entry.problems.join(', ')}`);
  const more = found.rejected.length - named.length;
  throw new RestorePointRejectedError(latestKey(prefix), [
    fellBackFrom.reason,
    found.tried === 0
      ? 'and there is no other manifest to fall back to'
      : `and none of the ${found.tried} other manifest(s) passes restore's checks (${named.join('; ')}${more > 0 ? `; ${more} more` : ''})`,
  ]);
}

/**
 * The restore point that restores exactly commit `commitSeq`: of the
 * readable manifests whose range `[restorableFrom, commitSeq]` holds it, the
 * one with the fewest commits (the least to download).
 * @throws NoRestorePointError naming the nearest restorable commits and every range.
 */
export async function restorePointForCommit(
  store: ObjectStore,
  prefix: string,
  commitSeq: number,
  signal?: AbortSignal,
): Promise<LoadedRestorePoint> {
  const { manifests } = await listManifestKeys(store, prefix, signal);
  const loaded = new Map<string, LoadedRestorePoint>();
  const tryLoad = async (key: string): Promise<LoadedRestorePoint | undefined> => {
    try {
      const point = await loadRestorePoint(store, prefix, key, signal);
      if (point !== null) loaded.set(key, point);
      return point ?? undefined;
    } catch (error) {
      // An unreadable manifest is not a restore point; another may still
      // cover the commit. verify() reports it.
      if (RestorePointRejectedError.isInstance(error)) return undefined;
      throw error;
    }
  };
  for (const candidate of manifests) {
    if (candidate.commitSeq < commitSeq) continue;
    const point = await tryLoad(candidate.key);
    if (point !== undefined && point.restorableFrom <= commitSeq) return point;
  }
  // Nothing covers it: read the rest, to say what is available.
  for (const candidate of manifests) {
    if (candidate.commitSeq < commitSeq) await tryLoad(candidate.key);
  }
  const available: RestorableRange[] = [...loaded.values()]
    .map((point) => ({
      manifestKey: point.key,
      from: point.restorableFrom,
      to: point.manifest.commitSeq,
    }))
    .sort((a, b) => a.to - b.to || a.from - b.from);
  let nearestBelow: number | undefined;
  let nearestAbove: number | undefined;
  for (const range of available) {
    if (range.to < commitSeq) nearestBelow = Math.max(nearestBelow ?? range.to, range.to);
    if (range.from > commitSeq) nearestAbove = Math.min(nearestAbove ?? range.from, range.from);
  }
  throw new NoRestorePointError(
    prefix,
    available.length === 0
      ? `no readable restore point to restore commit ${commitSeq} from`
      : `no restore point covers commit ${commitSeq}`,
    {
      requestedCommitSeq: commitSeq,
      ...(nearestBelow === undefined ? {} : { nearestBelow }),
      ...(nearestAbove === undefined ? {} : { nearestAbove }),
      available,
    },
  );
}
