/**
 * The first half of a restore: which restore point, which of its objects,
 * in which order, how many bytes, and the commit it lands on, read from the
 * bucket without writing anything. `restore()` acts on this choice;
 * `planRestore()` returns it (what `backupd restore --dry-run` prints).
 */
import type { AgeIdentity } from '@x/age-envelope';
import type { RestoreMaterializer } from '@x/engine';
import type { FileEntry, Manifest, SegmentEntry } from '@x/manifest';
import type { ObjectStore } from '@x/store';
import { fineRunOf } from './fine-run.ts';
import {
  checkSameEncryption,
  type GenerationEncryption,
  generationEncryption,
  isRawLayout,
  plaintext,
  restorePointKeys,
} from './generation-encryption.ts';
import { lockedObjectsError, opens } from './object-keys.ts';
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
import {
  checkTargetOptions,
  LATEST_TARGET,
  type RestoreTarget,
  requestedCommit,
  rollsForward,
} from './restore-target.ts';
import { findRollForward, type RollForward, rolledForwardManifest } from './roll-forward.ts';

export type {
  CommitTarget,
  LatestTarget,
  RestorePointTarget,
  RestoreTarget,
  RestoreTargetKind,
} from './restore-target.ts';

export interface RestoreOptions {
  /** Which state to restore (see {@link RestoreTarget}); default the latest. */
  readonly target?: RestoreTarget;
  /** Restore into a non-empty target directory, replacing the store files in it. */
  readonly force?: boolean;
  readonly signal?: AbortSignal;
  readonly onProgress?: (progress: RestoreProgress) => void;
  /**
   * Called once the restore point is chosen, before anything is downloaded
   * (again if a retired restore point makes the restore choose another).
   */
  readonly onChosen?: (chosen: {
    readonly manifestKey: string;
    readonly commitSeq: number;
  }) => void;
  /**
   * How the restore point becomes files: the engine's layout (for example
   * `framedStoreMaterializer` of `@x/source-framed`, `sqliteMaterializer` of
   * `@x/source-sqlite`). Restore knows no engine, so there is no default.
   */
  readonly materializer: RestoreMaterializer;
  /**
   * The age identities that open encrypted objects (`parseIdentityFile` of
   * `@x/age-envelope`): any one recipient's identity opens an object. Not
   * needed for a plaintext restore point.
   */
  readonly identities?: readonly AgeIdentity[];
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

/** The prefix normalized, once it, the target and the identities are checked. @throws RestoreOptionsError */
export function validateOptions(prefix: string, options: RestoreChoice): string {
  const normalized = checkedPrefix(prefix);
  checkTargetOptions(normalized, options);
  checkIdentities(options.identities);
  return normalized;
}

/**
 * Identities checked at run time too: a caller from plain JavaScript gets
 * a typed error naming the option, not a TypeError from deep inside.
 */
function checkIdentities(identities: unknown): void {
  if (identities === undefined) return;
  const valid =
    Array.isArray(identities) &&
    identities.every(
      (identity) => typeof (identity as AgeIdentity | null)?.recipient?.text === 'string',
    );
  if (!valid)
    throw new RestoreOptionsError(
      'identities',
      'must be an array of age identities (parseIdentity or parseIdentityFile of @x/age-envelope)',
    );
}

/** The target the options choose: the latest state unless one is given. */
export function targetOf(options: Pick<RestoreOptions, 'target'>): RestoreTarget {
  return options.target ?? LATEST_TARGET;
}

/** @throws NoRestorePointError unless `point` restores `commitSeq`; `what` names it in the message. */
function checkCovers(
  prefix: string,
  point: LoadedRestorePoint,
  commitSeq: number,
  what: string,
): void {
  const from = point.restorableFrom;
  const to = point.manifest.commitSeq;
  if (commitSeq >= from && commitSeq <= to) return;
  throw new NoRestorePointError(
    prefix,
    `${what} restores commits ${from} to ${to}, not ${commitSeq}`,
    { requestedCommitSeq: commitSeq, available: [{ manifestKey: point.key, from, to }] },
  );
}

/**
 * The restore point a target names, before any roll-forward. A named one
 * rolled forward is checked against its commit only once its chained
 * segments are known (chooseRestore).
 */
export async function pickRestorePoint(
  store: ObjectStore,
  prefix: string,
  target: RestoreTarget,
  signal?: AbortSignal,
): Promise<PickedLatest> {
  switch (target.kind) {
    case 'latest':
      return latestRestorePoint(store, prefix, signal);
    case 'commit':
      return { point: await restorePointForCommit(store, prefix, target.commitSeq, signal) };
    case 'restore-point': {
      const { manifestKey, commitSeq } = target;
      const point = await loadRestorePoint(store, prefix, manifestKey, signal);
      if (point === null) throw new NoRestorePointError(prefix, `${manifestKey} does not exist`);
      if (commitSeq !== undefined && target.rollForward !== true)
        checkCovers(prefix, point, commitSeq, manifestKey);
      return { point };
    }
  }
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
  'target' | 'signal' | 'materializer' | 'identities'
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
  /** What every object of the restore point's generation must state about its encryption. */
  readonly encryption?: GenerationEncryption;
}

/**
 * Picks the restore point the target chooses, rolls the latest state (or a
 * named restore point with `rollForward`) forward over the chained segments
 * after it, and lists the objects a restore of the commit asked for needs.
 */
export async function chooseRestore(
  store: ObjectStore,
  normalizedPrefix: string,
  options: RestoreChoice,
): Promise<ChosenRestore> {
  const target = targetOf(options);
  const picked = await pickRestorePoint(store, normalizedPrefix, target, options.signal);
  const encryption = await openableEncryption(store, normalizedPrefix, picked.point, options);
  const opening = { ...options, ...(encryption === undefined ? {} : { encryption }) };
  const { point, rolledForward } = rollsForward(target)
    ? await rollForwardPoint(store, normalizedPrefix, picked.point, target, opening)
    : { point: picked.point, rolledForward: undefined };
  const commitSeq = requestedCommit(target) ?? point.manifest.commitSeq;
  const walCommits = commitSeq - point.restorableFrom;
  const exact = await withFineRunAtCut(store, normalizedPrefix, point, walCommits, opening);
  const files = planFiles(exact, options.materializer);
  const segments = planSegments(exact.manifest, walCommits);
  checkRawObjects(normalizedPrefix, files, segments, encryption);
  return {
    point: exact,
    ...(picked.fellBackFrom === undefined ? {} : { fellBackFrom: picked.fellBackFrom }),
    ...(rolledForward === undefined ? {} : { rolledForward }),
    commitSeq,
    walCommits,
    files,
    segments,
    ...(encryption === undefined ? {} : { encryption }),
  };
}

/**
 * The encryption of the restore point's generation (its snapshot's header),
 * once the identities given open it.
 * @throws ObjectKeyError naming every object of the restore point found
 *   locked, before anything is downloaded.
 */
async function openableEncryption(
  store: ObjectStore,
  prefix: string,
  point: LoadedRestorePoint,
  { identities = [], signal }: RestoreChoice,
): Promise<GenerationEncryption | undefined> {
  const encryption = await generationEncryption(store, prefix, point.manifest, signal);
  if (encryption === undefined || opens(identities, encryption)) return encryption;
  throw await lockedObjectsError(
    store,
    prefix,
    encryption,
    restorePointKeys(point.manifest),
    identities,
    signal,
  );
}

/**
 * Objects of a raw layout (`.snapshot`, `.segment`, a raw archive or side
 * file) are plaintext: refused in a generation that is encrypted, before
 * anything is downloaded.
 * @throws ObjectEncodingError (`encryption`)
 */
function checkRawObjects(
  prefix: string,
  files: readonly PlannedFile[],
  segments: readonly SegmentEntry[],
  encryption: GenerationEncryption | undefined,
): void {
  const keys = [...files.map((file) => file.entry.key), ...segments.map((segment) => segment.key)];
  for (const key of keys)
    if (isRawLayout(prefix, key)) checkSameEncryption(plaintext(key), encryption);
}

/** The choice with the encryption of the restore point's generation. */
type OpeningChoice = RestoreChoice & { readonly encryption?: GenerationEncryption };

/** The signal, identities and generation encryption as options of the searches that read objects. */
function openOptions(
  signal: AbortSignal | undefined,
  identities: readonly AgeIdentity[] | undefined,
  encryption: GenerationEncryption | undefined,
): {
  signal?: AbortSignal;
  identities?: readonly AgeIdentity[];
  encryption?: GenerationEncryption;
} {
  return {
    ...(signal === undefined ? {} : { signal }),
    ...(identities === undefined ? {} : { identities }),
    ...(encryption === undefined ? {} : { encryption }),
  };
}

/**
 * The restore point with the compacted object that the cut falls inside
 * (not at its end) replaced by the fine segments it stands for, while the
 * bucket holds them: the commit asked for is then restored exactly rather
 * than refused as inside a merged batch. Otherwise `point` as it is.
 */
async function withFineRunAtCut(
  store: ObjectStore,
  prefix: string,
  point: LoadedRestorePoint,
  walCommits: number,
  { materializer, signal, identities, encryption }: OpeningChoice,
): Promise<LoadedRestorePoint> {
  const { segments } = point.manifest;
  let before = 0;
  for (const [index, segment] of segments.entries()) {
    if (before >= walCommits) break;
    if (before + segment.frames > walCommits) {
      const run = await fineRunOf(store, prefix, point.manifest, index, {
        createWalCutter: (commits) => materializer.createWalCutter(commits),
        ...openOptions(signal, identities, encryption),
      });
      if (run === undefined) return point;
      const replaced = [...segments.slice(0, index), ...run, ...segments.slice(index + 1)];
      return { ...point, manifest: { ...point.manifest, segments: replaced } };
    }
    before += segment.frames;
  }
  return point;
}

/**
 * The restore point extended by the chained segments shipped after it (its
 * segment list and commit count grow by them; each is downloaded and checked
 * again like a named one), and what of them a restore uses.
 */
async function rollForwardPoint(
  store: ObjectStore,
  prefix: string,
  picked: LoadedRestorePoint,
  target: RestoreTarget,
  { materializer, signal, identities, encryption }: OpeningChoice,
): Promise<{ point: LoadedRestorePoint; rolledForward: RolledForward | undefined }> {
  const named = target.kind === 'restore-point';
  const found = await findRollForward(store, prefix, picked.manifest, {
    createWalCutter: (commits) => materializer.createWalCutter(commits),
    // A commit of a named restore point's generation is asked for, not the
    // newest state: its chained tail serves even when a later generation exists.
    ...(named ? { pastLaterGenerations: true } : {}),
    ...openOptions(signal, identities, encryption),
  });
  const point = { ...picked, manifest: rolledForwardManifest(picked.manifest, found) };
  const rolledForward = rolledForwardOf(picked.manifest.commitSeq, found);
  const wanted = requestedCommit(target);
  if (wanted === undefined) return { point, rolledForward };
  checkCovers(prefix, point, wanted, `${point.key} rolled forward`);
  // The result says what of the roll the commit uses (nothing, when it is the restore point's own).
  return {
    point,
    rolledForward: usedOfRoll(rolledForward, found, wanted - picked.manifest.commitSeq),
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
 * The plan of a restore of `options.target`: the restore point, the objects
 * and bytes it downloads, the commit it lands on. Reads LATEST, manifests,
 * the snapshot's header (who can open the restore point) and (for the
 * latest state) the chained segments' listing and objects; writes nothing
 * and touches no target.
 * @throws RestoreOptionsError, NoRestorePointError, RestorePointRejectedError,
 *   ObjectKeyError — as `restore()`.
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
