/**
 * Reading restore points from a prefix: LATEST, one manifest, all of them,
 * and the one that covers a chosen commit.
 *
 * A manifest is read in bounded memory (at most `MAX_MANIFEST_BYTES`), and
 * accepted only when it parses, its lineage is consistent, and every name
 * and key in it is safe (`restore-point-checks.ts`).
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
import { getCapped, isTooLarge, type ObjectStore } from '@x/store';
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

/**
 * The restore point LATEST names.
 * @throws NoRestorePointError when there is no LATEST.
 * @throws RestorePointRejectedError when LATEST or its manifest is unreadable or unsafe.
 */
export async function latestRestorePoint(
  store: ObjectStore,
  prefix: string,
  signal?: AbortSignal,
): Promise<LoadedRestorePoint> {
  const latest = await readLatest(store, prefix, signal);
  if (latest.state === 'missing') {
    throw new NoRestorePointError(
      prefix,
      `${latestKey(prefix)} does not exist (nothing was backed up here yet)`,
    );
  }
  if (latest.state === 'invalid') {
    throw new RestorePointRejectedError(latestKey(prefix), [latest.problem]);
  }
  const loaded = await loadRestorePoint(store, prefix, latest.manifestKey, signal);
  if (loaded === null) {
    throw new RestorePointRejectedError(latestKey(prefix), [
      `LATEST names ${latest.manifestKey}, which does not exist`,
    ]);
  }
  return loaded;
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
