/**
 * The first half of a restore: which restore point, which of its objects,
 * in which order, how many bytes, and the commit it lands on, read from the
 * bucket without writing anything. `restore()` acts on this choice;
 * `planRestore()` returns it (what `backupd restore --dry-run` prints).
 */
import { type FileEntry, type Manifest, parseManifestKey, type SegmentEntry } from '@x/manifest';
import type { ObjectStore } from '@x/store';
import type { RestoreMaterializer } from './materializer.ts';
import type { RestoreProgress } from './progress.ts';
import {
  NoRestorePointError,
  RestoreOptionsError,
  RestorePointRejectedError,
} from './restore-errors.ts';
import { checkedPrefix, fileNameProblem, messageOf } from './restore-point-checks.ts';
import {
  type LatestFallback,
  type LoadedRestorePoint,
  latestRestorePoint,
  loadRestorePoint,
  type PickedLatest,
  restorePointForCommit,
} from './restore-points.ts';
import { findRollForward, type RollForward, rolledForwardManifest } from './roll-forward.ts';

export interface RestoreOptions {
  /** Restore from this manifest (a full key under the prefix) instead of LATEST's. */
  readonly manifestKey?: string;
  /**
   * Restore exactly this commit: the restore point covering it, with the WAL
   * cut after its frame. With `manifestKey`, that manifest must cover it.
   */
  readonly commitSeq?: number;
  /**
   * With `manifestKey`: roll forward past that restore point over the
   * chained segments of its generation shipped after it (also when a later
   * generation exists), so `commitSeq` may name a commit among them (what a
   * search by time finds past a generation's newest restore point). Without `manifestKey` it changes
   * nothing: the latest state always rolls forward, a `commitSeq` alone
   * never does.
   */
  readonly rollForward?: boolean;
  /** Restore into a non-empty target, replacing the store files in it. */
  readonly force?: boolean;
  readonly signal?: AbortSignal;
  readonly onProgress?: (progress: RestoreProgress) => void;
  /**
   * How the restore point becomes files: the engine's layout (for example
   * `framedStoreMaterializer` of `@x/source-framed`, `sqliteMaterializer` of
   * `@x/source-sqlite`). Restore knows no engine, so there is no default.
   */
  readonly materializer: RestoreMaterializer;
}

/** What a restore of the latest state applied beyond its restore point. */
export interface RolledForward {
  /** The restore point's own commit count (`commitSeq` minus `commits`). */
  readonly fromCommitSeq: number;
  readonly segments: number;
  readonly commits: number;
  /** The first object that did not chain, and why (it and everything after it was not applied). */
  readonly stoppedAt?: { readonly key: string; readonly reason: string };
  /** A later generation is in the bucket: nothing was rolled forward (its data has no restore point to chain from). */
  readonly laterGeneration?: number;
}

function rolledForwardOf(fromCommitSeq: number, found: RollForward): RolledForward {
  return {
    fromCommitSeq,
    segments: found.segments.length,
    commits: found.commits,
    ...(found.stoppedAt === undefined ? {} : { stoppedAt: found.stoppedAt }),
    ...(found.laterGeneration === undefined ? {} : { laterGeneration: found.laterGeneration }),
  };
}

/** The part of a roll-forward a restore cut `commits` past its restore point uses; undefined for none. */
function usedOfRoll(
  rolled: RolledForward,
  found: RollForward,
  commits: number,
): RolledForward | undefined {
  if (commits <= 0) return undefined;
  let segments = 0;
  for (let counted = 0; counted < commits && segments < found.segments.length; segments += 1)
    counted += found.segments[segments]!.frames;
  return { fromCommitSeq: rolled.fromCommitSeq, segments, commits };
}

export interface PlannedFile {
  readonly entry: FileEntry;
  readonly name: string;
}

export function validateOptions(prefix: string, options: RestoreChoice): string {
  const normalized = checkedPrefix(prefix);
  const { commitSeq, manifestKey } = options;
  if (commitSeq !== undefined && (!Number.isSafeInteger(commitSeq) || commitSeq < 0)) {
    throw new RestoreOptionsError(
      'commitSeq',
      `must be a non-negative integer, got ${String(commitSeq)}`,
    );
  }
  if (
    manifestKey !== undefined &&
    (typeof manifestKey !== 'string' || parseManifestKey(normalized, manifestKey) === undefined)
  ) {
    throw new RestoreOptionsError(
      'manifestKey',
      `must be a manifest key of this prefix (${normalized}/manifest/{20-digit commit}.json)`,
    );
  }
  return normalized;
}

export async function pickRestorePoint(
  store: ObjectStore,
  prefix: string,
  options: RestoreChoice,
): Promise<PickedLatest> {
  const { manifestKey, commitSeq, signal } = options;
  if (manifestKey !== undefined) {
    const point = await loadRestorePoint(store, prefix, manifestKey, signal);
    if (point === null) throw new NoRestorePointError(prefix, `${manifestKey} does not exist`);
    if (
      commitSeq !== undefined &&
      (commitSeq < point.restorableFrom || commitSeq > point.manifest.commitSeq)
    ) {
      throw new NoRestorePointError(
        prefix,
        `${manifestKey} restores commits ${point.restorableFrom} to ${point.manifest.commitSeq}, not ${commitSeq}`,
        {
          requestedCommitSeq: commitSeq,
          available: [{ manifestKey, from: point.restorableFrom, to: point.manifest.commitSeq }],
        },
      );
    }
    return { point };
  }
  if (commitSeq !== undefined)
    return { point: await restorePointForCommit(store, prefix, commitSeq, signal) };
  return latestRestorePoint(store, prefix, signal);
}

/** The file entries to download and their target names, checked. */
function planFiles(point: LoadedRestorePoint, materializer: RestoreMaterializer): PlannedFile[] {
  const reserved = new Set([materializer.walFileName, materializer.parentRecordName]);
  const planned: PlannedFile[] = [];
  const names = new Set<string>();
  const problems: string[] = [];
  for (const entry of point.manifest.files) {
    let name: string | null;
    try {
      name = materializer.targetName(entry, point.manifest);
    } catch (error) {
      if (RestorePointRejectedError.isInstance(error)) problems.push(...error.problems);
      else problems.push(messageOf(error));
      continue;
    }
    if (name === null) continue;
    const problem = fileNameProblem(name);
    if (problem !== undefined) problems.push(`file name ${JSON.stringify(name)} ${problem}`);
    else if (reserved.has(name)) problems.push(`a file entry would overwrite ${name}`);
    else if (names.has(name)) problems.push(`two entries restore to ${name}`);
    else {
      names.add(name);
      planned.push({ entry, name });
    }
  }
  if (problems.length > 0) throw new RestorePointRejectedError(point.key, problems);
  return planned;
}

/** The segments needed for `walCommits` commits of WAL: a prefix of the manifest's list. */
function planSegments(manifest: Manifest, walCommits: number): SegmentEntry[] {
  const needed: SegmentEntry[] = [];
  let frames = 0;
  for (const segment of manifest.segments) {
    if (frames >= walCommits) break;
    needed.push(segment);
    frames += segment.frames;
  }
  return needed;
}

/** Which state a restore takes: the options of {@link RestoreOptions} that choose it. */
export type RestoreChoice = Pick<
  RestoreOptions,
  'manifestKey' | 'commitSeq' | 'rollForward' | 'signal' | 'materializer'
>;

/** The restore point chosen, and what of it a restore downloads. */
export interface ChosenRestore {
  /** The restore point, its manifest extended by a roll-forward. */
  readonly point: LoadedRestorePoint;
  readonly fellBackFrom?: LatestFallback;
  readonly rolledForward?: RolledForward;
  /** The commit the restore lands on. */
  readonly commitSeq: number;
  /** Commits of the log applied over the files. */
  readonly walCommits: number;
  readonly files: readonly PlannedFile[];
  readonly segments: readonly SegmentEntry[];
}

/**
 * Picks the restore point the options choose, rolls the latest state (or a
 * named restore point with `rollForward`) forward over the chained segments
 * after it, and lists the objects a restore of `commitSeq` needs.
 */
export async function chooseRestore(
  store: ObjectStore,
  normalizedPrefix: string,
  options: RestoreChoice,
): Promise<ChosenRestore> {
  const { materializer, signal } = options;
  // A named restore point rolled forward is checked against the commit
  // asked for only once its chained segments are known (below).
  const rollNamed = options.rollForward === true && options.manifestKey !== undefined;
  const picked = await pickRestorePoint(
    store,
    normalizedPrefix,
    rollNamed ? { ...options, commitSeq: undefined } : options,
  );
  let point = picked.point;
  // The latest state: the restore point, then the chained segments shipped
  // after it. The segment list and the commit count grow by them; each is
  // downloaded and checked again like a named one (size, CRC-32, envelope,
  // chain, commits).
  let rolledForward: RolledForward | undefined;
  if ((options.manifestKey === undefined && options.commitSeq === undefined) || rollNamed) {
    const found = await findRollForward(store, normalizedPrefix, point.manifest, {
      createWalCutter: (commits) => materializer.createWalCutter(commits),
      // A commit of a named restore point's generation is asked for, not the
      // newest state: its chained tail serves even when a later generation exists.
      ...(rollNamed ? { pastLaterGenerations: true } : {}),
      ...(signal === undefined ? {} : { signal }),
    });
    rolledForward = rolledForwardOf(point.manifest.commitSeq, found);
    point = { ...point, manifest: rolledForwardManifest(point.manifest, found) };
    const wanted = options.commitSeq;
    if (
      rollNamed &&
      wanted !== undefined &&
      (wanted < point.restorableFrom || wanted > point.manifest.commitSeq)
    )
      throw new NoRestorePointError(
        normalizedPrefix,
        `${point.key} rolled forward restores commits ${point.restorableFrom} to ${point.manifest.commitSeq}, not ${wanted}`,
        {
          requestedCommitSeq: wanted,
          available: [
            { manifestKey: point.key, from: point.restorableFrom, to: point.manifest.commitSeq },
          ],
        },
      );
    // A commit chosen among the rolled-forward ones: the result says what
    // of the roll it used (nothing, when the commit is the restore point's own).
    if (rollNamed && wanted !== undefined)
      rolledForward = usedOfRoll(rolledForward, found, wanted - rolledForward.fromCommitSeq);
  }
  const commitSeq = options.commitSeq ?? point.manifest.commitSeq;
  const walCommits = commitSeq - point.restorableFrom;
  return {
    point,
    ...(picked.fellBackFrom === undefined ? {} : { fellBackFrom: picked.fellBackFrom }),
    ...(rolledForward === undefined ? {} : { rolledForward }),
    commitSeq,
    walCommits,
    files: planFiles(point, materializer),
    segments: planSegments(point.manifest, walCommits),
  };
}

/** One object a restore downloads. */
export interface PlannedObject {
  readonly key: string;
  /** Stored bytes (what is downloaded). */
  readonly size: number;
  /** The file it becomes in the target (the materializer's name), or `null` for a log segment. */
  readonly file: string | null;
}

/** What a restore would do, without doing it. */
export interface RestorePlan {
  readonly manifestKey: string;
  /** The commit it lands on. */
  readonly commitSeq: number;
  readonly restorableFrom: number;
  readonly lineage: string;
  readonly walGeneration: number;
  /**
   * The recorded time of the state it lands on, when the manifest says it
   * (the restore point's own newest commit); `null` otherwise: a commit
   * inside the log, or one past the restore point, is dated by its record.
   */
  readonly commitTime: string | null;
  /** Files first, then log segments in order. */
  readonly objects: readonly PlannedObject[];
  readonly bytes: number;
  readonly fellBackFrom?: LatestFallback;
  readonly rolledForward?: RolledForward;
}

/**
 * The plan of a restore with these options: the restore point, the objects
 * and bytes it downloads, the commit it lands on. Reads LATEST, manifests
 * and (for the latest state) the chained segments' listing and headers;
 * writes nothing and touches no target.
 * @throws RestoreOptionsError, NoRestorePointError, RestorePointRejectedError — as `restore()`.
 */
export async function planRestore(
  store: ObjectStore,
  prefix: string,
  options: RestoreChoice,
): Promise<RestorePlan> {
  const normalized = validateOptions(prefix, options);
  const chosen = await chooseRestore(store, normalized, options);
  const { point, commitSeq } = chosen;
  const objects: PlannedObject[] = [
    ...chosen.files.map((file) => ({
      key: file.entry.key,
      size: file.entry.size,
      file: file.name,
    })),
    ...chosen.segments.map((segment) => ({ key: segment.key, size: segment.size, file: null })),
  ];
  const atOwnCommit =
    (chosen.rolledForward?.commits ?? 0) === 0 && commitSeq === point.manifest.commitSeq;
  return {
    manifestKey: point.key,
    commitSeq,
    restorableFrom: point.restorableFrom,
    lineage: point.manifest.lineage,
    walGeneration: point.manifest.walGeneration,
    commitTime: atOwnCommit ? (point.manifest.commitTime ?? null) : null,
    objects,
    bytes: objects.reduce((sum, object) => sum + object.size, 0),
    ...(chosen.fellBackFrom === undefined ? {} : { fellBackFrom: chosen.fellBackFrom }),
    ...(chosen.rolledForward === undefined ? {} : { rolledForward: chosen.rolledForward }),
  };
}
