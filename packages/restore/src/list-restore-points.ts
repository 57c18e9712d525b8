/**
 * listRestorePoints(): what `backupd ls` shows — every manifest of a prefix
 * with the commits it restores, when it was made, how many bytes a restore
 * of it downloads, its generation and lineage, and whether LATEST names it.
 *
 * Reads LATEST, one listing of `manifest/` and each manifest; objects are
 * not checked (that is verify's job). A manifest that cannot be read or is
 * unsafe is listed with its problems instead of failing the listing; store
 * failures and aborts throw.
 */
import { normalizePrefix, type ObjectStore } from '@x/store';
import { RestoreOptionsError, RestorePointRejectedError } from './restore-errors.ts';
import { messageOf } from './restore-point-checks.ts';
import { listManifestKeys, loadRestorePoint, readLatest } from './restore-points.ts';

export interface RestorePointInfo {
  readonly manifestKey: string;
  /** The commit the manifest restores to (from its key when it did not parse). */
  readonly commitSeq: number;
  /** Whether LATEST names this manifest. */
  readonly latest: boolean;
  /** `ok`: readable and safe; `problems`: listed with what is wrong, not restorable. */
  readonly status: 'ok' | 'problems';
  readonly problems: readonly string[];
  /** The lowest commit it restores to (its WAL cut to nothing); any commit in `[restorableFrom, commitSeq]` restores. */
  readonly restorableFrom?: number;
  readonly createdAt?: string;
  readonly lineage?: string;
  readonly walGeneration?: number;
  /** Bytes of every object the manifest names (what a restore of `commitSeq` downloads, `backup.lineage` included). */
  readonly sizeBytes?: number;
  /** Number of objects it names. */
  readonly objects?: number;
}

/**
 * Every restore point under `prefix`, oldest commit first.
 * @throws RestoreOptionsError for an invalid prefix; store errors and aborts as they are.
 */
export async function listRestorePoints(
  store: ObjectStore,
  prefix: string,
  options: { readonly signal?: AbortSignal } = {},
): Promise<RestorePointInfo[]> {
  let normalized: string;
  try {
    normalized = normalizePrefix(prefix);
  } catch (error) {
    throw new RestoreOptionsError('prefix', messageOf(error));
  }
  if (normalized === '') throw new RestoreOptionsError('prefix', 'must not be empty');
  const { signal } = options;
  const latest = await readLatest(store, normalized, signal);
  const latestTarget = latest.state === 'ok' ? latest.manifestKey : undefined;
  const { manifests } = await listManifestKeys(store, normalized, signal);
  const points: RestorePointInfo[] = [];
  for (const listed of manifests) {
    const isLatest = listed.key === latestTarget;
    let point: Awaited<ReturnType<typeof loadRestorePoint>>;
    try {
      point = await loadRestorePoint(store, normalized, listed.key, signal);
    } catch (error) {
      if (!RestorePointRejectedError.isInstance(error)) throw error;
      points.push({
        manifestKey: listed.key,
        commitSeq: listed.commitSeq,
        latest: isLatest,
        status: 'problems',
        problems: error.problems,
      });
      continue;
    }
    // Deleted between the listing and the read (retention): not a restore point any more.
    if (point === null) continue;
    const { manifest } = point;
    let sizeBytes = 0;
    for (const entry of manifest.files) sizeBytes += entry.size;
    for (const entry of manifest.segments) sizeBytes += entry.size;
    points.push({
      manifestKey: listed.key,
      commitSeq: manifest.commitSeq,
      latest: isLatest,
      status: 'ok',
      problems: [],
      restorableFrom: point.restorableFrom,
      createdAt: manifest.createdAt,
      lineage: manifest.lineage,
      walGeneration: manifest.walGeneration,
      sizeBytes,
      objects: manifest.files.length + manifest.segments.length,
    });
  }
  return points;
}
