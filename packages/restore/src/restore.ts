/**
 * restore(): a restore point from the bucket to a directory, verified before
 * any of it is used, in this order: check the target (before the bucket is
 * read); plan the restore point and its objects (restore-plan.ts), who can
 * open them included; stream each object into staging inside the target,
 * checking size, CRC-32, envelope, encryption and commit counts, and cut
 * the rebuilt WAL (a refusal removes the staging, the target as it was);
 * only then move the files into place (fsync, rename, fsync the directory),
 * the parent record last. Objects stream chunk by chunk, never held whole.
 * Guarantees: package README.
 */
import type { AgeIdentity } from '@x/age-envelope';
import type { RestoreMaterializer } from '@x/engine';
import {
  type FileEntry,
  type Manifest,
  type ParentRecord,
  parseSegmentKey,
  parseSnapshotKey,
  type SegmentEntry,
} from '@x/manifest';
import { normalizePrefix, type ObjectStore } from '@x/store';
import { downloadFileObject, isFileObject } from './file-object-read.ts';
import type { GenerationEncryption, ObjectOpenOptions } from './generation-encryption.ts';
import { PROGRESS_BYTE_STEP, type RestoreProgress } from './progress.ts';
import {
  NoRestorePointError,
  ObjectMissingError,
  RestoreError,
  RestoreIncompleteError,
  RestoreOptionsError,
  RestorePointRejectedError,
} from './restore-errors.ts';
import {
  chooseRestore,
  pickRestorePoint,
  type RestoreOptions,
  type RolledForward,
  targetOf,
  validateOptions,
} from './restore-plan.ts';
import {
  companionDirectoryProblem,
  fileNameProblem,
  placedNameProblem,
} from './restore-point-checks.ts';
import type { LatestFallback, LoadedRestorePoint } from './restore-points.ts';
import {
  checkLinkAfterCompacted,
  type DecodedSegmentEntry,
  decodedSize,
  decodeSegmentEntryLinks,
  expectedPreviousCrc32,
  isSegmentObject,
} from './segment-object-read.ts';
import {
  type CommitPlan,
  checkCommit,
  commitStaged,
  createStagedFile,
  createStaging,
  discardStaging,
  prepareTarget,
  type Staging,
  syncStagedFile,
} from './target-directory.ts';
import { downloadVerified } from './verified-download.ts';

export type { RestoreOptions, RestoreTarget, RolledForward } from './restore-plan.ts';

export interface RestoreResult {
  /** Absolute path of the target directory. */
  readonly targetDir: string;
  readonly manifestKey: string;
  /** The commit count restored (the manifest's, or the one asked for). */
  readonly commitSeq: number;
  readonly lineage: string;
  readonly walGeneration: number;
  /** Files written into the target, the parent record last. */
  readonly files: readonly string[];
  /** Objects downloaded and checked. */
  readonly objects: number;
  /** Bytes downloaded and checked. */
  readonly bytes: number;
  readonly parent: ParentRecord;
  /**
   * Present when the latest state was asked for and LATEST was unusable
   * (missing, too large, garbage, or naming a manifest that is missing or
   * refused): what was wrong with it, and that `manifestKey` (the newest
   * restore point that passes restore's checks) was used instead.
   */
  readonly fellBackFrom?: LatestFallback;
  /**
   * Present for a restore of the latest state: the chained segments past the
   * restore point that were applied (see `roll-forward.ts`), how many commits
   * they hold beyond `manifestKey`'s, and where and why the chain stopped.
   */
  readonly rolledForward?: RolledForward;
  /**
   * Where a chain of later `.seg` segments continues the restored state's
   * log: the last object it was rebuilt from (a fine segment, or the
   * generation's snapshot when it names none), with its stored CRC-32, which
   * the next segment's header names as `previous`, and the log offset the
   * next segment starts at. `null` when the log ends with a compacted
   * object or the state stops inside a segment (a commit or time target).
   */
  readonly chainEnd: ChainEnd | null;
  /** The encryption every object of the restored generation states; absent for a restore point without objects that say. */
  readonly encryption?: GenerationEncryption;
}

/** See {@link RestoreResult.chainEnd}. */
export interface ChainEnd {
  readonly key: string;
  readonly crc32: string;
  readonly end: number;
}

/**
 * Restores a restore point of `prefix` into `targetDir`. A latest or commit
 * target whose restore point retention retires mid-read is picked again, up
 * to {@link RETIRED_POINT_ATTEMPTS} attempts; a named restore point never is.
 * @throws RestoreOptionsError, RestoreTargetNotEmptyError, RestoreTargetUnsafeError
 *   (options, target); NoRestorePointError (nothing covers the target);
 *   RestorePointRejectedError (the manifest, or LATEST and every fallback, fails
 *   the checks); ObjectMissingError, ObjectCorruptError, ObjectEncodingError (an
 *   object); ObjectKeyError (encrypted objects none of `options.identities`
 *   opens, found before any download); RestoreIncompleteError (moving into place failed part way: the only
 *   case that changes the target). Store errors and aborts propagate as they are.
 */
export async function restore(
  store: ObjectStore,
  prefix: string,
  targetDir: string,
  options: RestoreOptions,
): Promise<RestoreResult> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await restoreOnce(store, prefix, targetDir, options);
    } catch (error) {
      if (
        attempt >= RETIRED_POINT_ATTEMPTS ||
        targetOf(options).kind === 'restore-point' ||
        !ObjectMissingError.isInstance(error) ||
        !(await pickedAnother(store, prefix, options, error.manifestKey))
      )
        throw error;
    }
  }
}

/**
 * Attempts at a restore whose restore point retention retired while it
 * read it. A restore point a compaction superseded, or one that left the
 * window, is deleted (manifest first, then the objects only it named) while
 * a restore that picked it may still be downloading: the restore then picks
 * again. Bounded, so a bucket whose objects keep vanishing still ends in
 * the error.
 */
const RETIRED_POINT_ATTEMPTS = 3;

/**
 * Whether picking the restore point again (LATEST, or the one for the
 * commit asked for) gives another than `failed`: the failed one was
 * retired under the restore, not broken. A named restore point is never
 * replaced by another; a pick that fails keeps the original error.
 */
async function pickedAnother(
  store: ObjectStore,
  prefix: string,
  options: RestoreOptions,
  failed: string,
): Promise<boolean> {
  try {
    const again = await pickRestorePoint(
      store,
      normalizePrefix(prefix),
      targetOf(options),
      options.signal,
    );
    return again.point.key !== failed;
  } catch {
    return false;
  }
}

/** One attempt of {@link restore}. */
async function restoreOnce(
  store: ObjectStore,
  prefix: string,
  targetDir: string,
  options: RestoreOptions,
): Promise<RestoreResult> {
  const materializer = checkedMaterializer(options);
  const normalizedPrefix = validateOptions(prefix, options);
  const companion = materializer.companionDirectory;
  const { signal, onProgress } = options;
  const force = options.force === true;
  const target = await prepareTarget(
    targetDir,
    force,
    materializer.sharesDirectory ? (name) => materializer.ownsName(name) : undefined,
    companion,
  );
  signal?.throwIfAborted();

  onProgress?.({ phase: 'select', bytesDone: 0, bytesTotal: 0, objectsDone: 0, objectsTotal: 0 });
  const chosen = await chooseRestore(store, normalizedPrefix, options);
  const { point, fellBackFrom, rolledForward, commitSeq, walCommits, files, segments } = chosen;
  const manifest = point.manifest;
  const opening = openingOf(options.identities, chosen.encryption);
  options.onChosen?.({ manifestKey: point.key, commitSeq });

  // Stops prefetches and parallel downloads when this restore fails.
  const internal = new AbortController();
  const download = verifiedDownloader(store, normalizedPrefix, point.key, {
    objects: [...files.map((file) => file.entry), ...segments],
    signal: signal === undefined ? internal.signal : AbortSignal.any([signal, internal.signal]),
    opening,
    ...(onProgress === undefined ? {} : { onProgress }),
  });

  const staging = await createStaging(target, companion);
  try {
    await inParallel(files, PARALLEL_FILES, async (file) => {
      const writer = await createStagedFile(staging, file.name);
      try {
        // A file object (`.snap`, `.bko`) is decoded into the staged file as
        // it streams; the file is used only once every check of it passed.
        await download(
          file.entry,
          file.name,
          (chunk) => writer.write(chunk),
          isFileObject(normalizedPrefix, file.entry.key) ? file.entry : undefined,
        );
        await writer.finish();
      } finally {
        await writer.abandon();
      }
    });
    await rebuildWal(staging, materializer, point, segments, walCommits, download, {
      prefix: normalizedPrefix,
      opening,
    });

    let names = [...files.map((file) => file.name), materializer.walFileName];
    if (materializer.finish !== undefined) {
      names = [
        ...(await materializer.finish(
          { directory: staging.directory, names, manifest, commitSeq },
          signal === undefined ? {} : { signal },
        )),
      ];
      const parentName = materializer.parentRecordName;
      for (const name of names) {
        const problem = placedNameProblem(name, companion);
        if (problem !== undefined || name === parentName) {
          throw new RestoreError(
            `materializer ${materializer.name} produced an unusable file name ${JSON.stringify(name)}`,
          );
        }
        await syncStagedFile(staging, name);
      }
    }
    signal?.throwIfAborted();

    const parent: ParentRecord = { lineage: manifest.lineage, manifestKey: point.key, commitSeq };
    const parentRecordName = materializer.parentRecordName;
    const plan: CommitPlan = {
      names,
      parentRecord: {
        name: parentRecordName,
        bytes: new TextEncoder().encode(`${JSON.stringify(parent)}\n`),
      },
      ownsName: (name) => materializer.ownsName(name),
      force,
    };
    await checkCommit(staging, plan);
    download.report('commit');
    try {
      await commitStaged(staging, plan);
    } catch (error) {
      throw new RestoreIncompleteError(target.directory, error);
    }
    download.report('done');
    return {
      targetDir: target.directory,
      manifestKey: point.key,
      commitSeq,
      lineage: manifest.lineage,
      walGeneration: manifest.walGeneration,
      files: [...names, parentRecordName],
      objects: download.objectsDone,
      bytes: download.bytesDone,
      parent,
      chainEnd: chainEndOf(normalizedPrefix, manifest, files, segments, walCommits),
      ...(chosen.encryption === undefined ? {} : { encryption: chosen.encryption }),
      ...(fellBackFrom === undefined ? {} : { fellBackFrom }),
      ...(rolledForward === undefined ? {} : { rolledForward }),
    };
  } catch (error) {
    internal.abort();
    // Before the commit this leaves the target as it was; during it, it
    // removes only what was not moved yet (RestoreIncompleteError says so).
    await discardStaging(staging).catch(() => {
      // The original error is the one to act on. A staging directory that
      // could not be removed is hidden (a leading "."), holds nothing the
      // store reads, and a forced restore removes it.
    });
    throw error;
  }
}

/** See {@link RestoreResult.chainEnd}. */
function chainEndOf(
  prefix: string,
  manifest: Manifest,
  files: readonly { readonly entry: FileEntry }[],
  segments: readonly SegmentEntry[],
  walCommits: number,
): ChainEnd | null {
  // Commits held by the segments restored, against those the state has past its snapshot.
  const segmentCommits = segments.reduce((sum, segment) => sum + segment.frames, 0);
  if (segmentCommits !== walCommits) return null;
  const last = segments.at(-1);
  if (last !== undefined) {
    const range = parseSegmentKey(prefix, last.key);
    if (range === undefined || range.layout !== 'object') return null;
    return { key: last.key, crc32: last.crc32, end: range.end };
  }
  const snapshot = files.find(
    (file) => parseSnapshotKey(prefix, file.entry.key)?.generation === manifest.walGeneration,
  );
  return snapshot === undefined
    ? null
    : { key: snapshot.entry.key, crc32: snapshot.entry.crc32, end: 0 };
}

/**
 * The materializer, checked at run time too: a caller from plain JavaScript
 * gets a typed error naming the option rather than a TypeError from deep inside.
 */
function checkedMaterializer(options: RestoreOptions): RestoreMaterializer {
  const materializer = (options as Partial<RestoreOptions> | undefined)?.materializer;
  if (materializer === undefined) {
    throw new RestoreOptionsError(
      'materializer',
      'is required: restore knows no engine (use framedStoreMaterializer, sqliteMaterializer or your own)',
    );
  }
  const companion = materializer.companionDirectory;
  const companionProblem =
    companion === undefined ? undefined : companionDirectoryProblem(companion);
  if (companionProblem !== undefined)
    throw new RestoreOptionsError(
      'materializer',
      `companion directory ${JSON.stringify(companion)} ${companionProblem}`,
    );
  for (const [name, problem] of [
    [materializer.walFileName, fileNameProblem(materializer.walFileName)],
    [materializer.parentRecordName, placedNameProblem(materializer.parentRecordName, companion)],
  ] as const) {
    if (problem !== undefined) {
      throw new RestoreOptionsError('materializer', `file name ${JSON.stringify(name)} ${problem}`);
    }
  }
  return materializer;
}

/**
 * How each object is opened: with the identities given, held to the
 * encryption of the restore point's generation (every object it names
 * states that one, see generation-encryption.ts).
 */
type Opening = (key: string) => ObjectOpenOptions;

function openingOf(
  identities: readonly AgeIdentity[] | undefined,
  encryption: GenerationEncryption | undefined,
): Opening {
  const options = {
    ...(identities === undefined ? {} : { identities }),
    ...(encryption === undefined ? {} : { encryption }),
  };
  return () => options;
}

/** Downloads one object, checked, into `sink`; counts what it read for the progress reports. */
type Downloader = ((
  expected: { key: string; size: number; crc32: string },
  name: string,
  sink: (chunk: Uint8Array) => void | Promise<void>,
  /** A file entry whose key is a file object (`.snap`, `.bko`): its decoded bytes go to `sink`. */
  snapshot?: FileEntry,
) => Promise<void>) & {
  readonly bytesDone: number;
  readonly objectsDone: number;
  report(phase: RestoreProgress['phase'], key?: string, name?: string): void;
};

/** The downloader of one restore: every object verified, progress counted in stored bytes. */
function verifiedDownloader(
  store: ObjectStore,
  normalizedPrefix: string,
  manifestKey: string,
  options: {
    readonly objects: readonly { readonly size: number }[];
    readonly signal: AbortSignal;
    readonly opening: Opening;
    readonly onProgress?: (progress: RestoreProgress) => void;
  },
): Downloader {
  const objectsTotal = options.objects.length;
  let bytesTotal = 0;
  for (const object of options.objects) bytesTotal += object.size;
  let bytesDone = 0;
  let objectsDone = 0;
  const report = (phase: RestoreProgress['phase'], key?: string, name?: string): void => {
    options.onProgress?.({
      phase,
      bytesDone,
      bytesTotal,
      objectsDone,
      objectsTotal,
      ...(key === undefined ? {} : { key }),
      ...(name === undefined ? {} : { name }),
    });
  };
  const download = async (
    expected: { key: string; size: number; crc32: string },
    name: string,
    sink: (chunk: Uint8Array) => void | Promise<void>,
    snapshot?: FileEntry,
  ): Promise<void> => {
    let counted = 0;
    let reported = 0;
    report('download', expected.key, name);
    const verified = {
      manifestKey,
      signal: options.signal,
      onBytes: (read: number) => {
        bytesDone += read - counted;
        counted = read;
        if (read - reported >= PROGRESS_BYTE_STEP) {
          reported = read;
          report('download', expected.key, name);
        }
      },
    };
    if (snapshot === undefined) await downloadVerified(store, expected, sink, verified);
    else
      await downloadFileObject(store, normalizedPrefix, snapshot, sink, {
        ...verified,
        ...options.opening(snapshot.key),
      });
    objectsDone += 1;
    report('download', expected.key, name);
  };
  return Object.defineProperties(download, {
    bytesDone: { get: () => bytesDone },
    objectsDone: { get: () => objectsDone },
    report: { value: report },
  }) as Downloader;
}

/** A segment fetched whole: its bytes, and for a `.seg` the chain links of its header. */
interface FetchedSegment {
  readonly chunks: Uint8Array[];
  readonly links?: DecodedSegmentEntry;
}

/** File entries downloaded at once (each into its own staged file). */
const PARALLEL_FILES = 4;
/** Segments fetched ahead of the one being written, at most. */
const PREFETCH_SEGMENTS = 8;
/** Bytes of fetched-ahead segments held in memory, at most. */
const PREFETCH_BYTES = 64 * 1024 * 1024;
/** Larger segments are never fetched ahead: they stream straight to disk in their turn. */
const PREFETCH_SEGMENT_MAX_BYTES = 8 * 1024 * 1024;

/** Runs `work` over `items`, at most `limit` at a time; rejects with the first failure. */
async function inParallel<T>(
  items: readonly T[],
  limit: number,
  work: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  let failed = false;
  const worker = async (): Promise<void> => {
    while (!failed && next < items.length) {
      const item = items[next]!;
      next += 1;
      try {
        await work(item);
      } catch (error) {
        failed = true;
        throw error;
      }
    }
  };
  const workers = Array.from({ length: Math.min(limit, items.length) }, () => worker());
  const results = await Promise.allSettled(workers);
  for (const result of results) if (result.status === 'rejected') throw result.reason;
}

/**
 * Streams the needed segments, in order, through the cutter into the staged
 * WAL file. Small segments are fetched (and verified) up to
 * {@link PREFETCH_SEGMENTS} ahead within {@link PREFETCH_BYTES} of memory,
 * so many small objects do not cost one round trip each in sequence; large
 * ones stream in their turn. Each segment's frame count is checked.
 */
async function rebuildWal(
  staging: Staging,
  materializer: RestoreMaterializer,
  point: LoadedRestorePoint,
  segments: readonly SegmentEntry[],
  walCommits: number,
  download: Downloader,
  { prefix, opening }: { readonly prefix: string; readonly opening: Opening },
): Promise<void> {
  const name = materializer.walFileName;
  const cutter = materializer.createWalCutter(walCommits);
  const writer = await createStagedFile(staging, name);
  const prefetched = new Map<number, Promise<FetchedSegment>>();
  let prefetchedBytes = 0;
  let ahead = 0;
  // A `.seg` segment is held whole, stored and decoded, while it is checked:
  // nothing of it reaches the cutter (or the staged file) before its header,
  // decoded length and decoded CRC-32 passed.
  const memoryOf = (segment: SegmentEntry): number =>
    isSegmentObject(prefix, segment.key)
      ? segment.size + decodedSize(prefix, segment)
      : segment.size;
  // Fetched whole: a `.seg` decoded, with its header's chain links (checked
  // in order below: the link after a compacted entry is in no manifest).
  const fetchWhole = async (index: number): Promise<FetchedSegment> => {
    const segment = segments[index]!;
    const chunks: Uint8Array[] = [];
    await download(segment, name, (chunk) => {
      chunks.push(chunk);
    });
    if (!isSegmentObject(prefix, segment.key)) return { chunks };
    const stored = chunks.length === 1 ? chunks[0]! : new Uint8Array(Buffer.concat(chunks));
    const links = decodeSegmentEntryLinks(
      prefix,
      segment,
      stored,
      expectedPreviousCrc32(prefix, point.manifest, index),
      opening(segment.key),
    );
    return { chunks: [links.body], links };
  };
  const fetchAhead = (from: number): void => {
    for (let index = Math.max(from, ahead); index < segments.length; index += 1) {
      const segment = segments[index]!;
      if (prefetched.size >= PREFETCH_SEGMENTS) break;
      if (memoryOf(segment) > PREFETCH_SEGMENT_MAX_BYTES) {
        // Streams in its turn; nothing past it is fetched before then, so
        // memory stays bounded and the order of requests stays simple.
        break;
      }
      if (prefetchedBytes + memoryOf(segment) > PREFETCH_BYTES) break;
      const fetched = fetchWhole(index);
      // Awaited in its turn; until then a failure must not count as unhandled.
      fetched.catch(() => {});
      prefetched.set(index, fetched);
      prefetchedBytes += memoryOf(segment);
      ahead = index + 1;
    }
  };
  const write = async (chunk: Uint8Array): Promise<void> => {
    const keep = cutter.push(chunk);
    if (keep > 0) await writer.write(keep === chunk.byteLength ? chunk : chunk.subarray(0, keep));
  };
  // The chain end of the compacted entry just written (`null` after any other).
  let chainEnd: number | null = null;
  const writeWhole = async (segment: SegmentEntry, whole: FetchedSegment): Promise<void> => {
    if (chainEnd !== null && whole.links !== undefined)
      checkLinkAfterCompacted(segment.key, whole.links.previousCrc32, chainEnd);
    chainEnd = whole.links?.chainEndCrc32 ?? null;
    for (const chunk of whole.chunks) await write(chunk);
  };
  try {
    for (const [index, segment] of segments.entries()) {
      const seenBefore = cutter.commitsSeen;
      fetchAhead(index);
      const fetched = prefetched.get(index);
      if (fetched === undefined) {
        if (isSegmentObject(prefix, segment.key))
          await writeWhole(segment, await fetchWhole(index));
        else {
          chainEnd = null;
          await download(segment, name, write);
        }
        ahead = Math.max(ahead, index + 1);
      } else {
        const whole = await fetched;
        prefetched.delete(index);
        prefetchedBytes -= memoryOf(segment);
        await writeWhole(segment, whole);
      }
      const frames = cutter.commitsSeen - seenBefore;
      if (frames !== segment.frames) {
        throw new RestorePointRejectedError(point.key, [
          `segment ${segment.key} holds ${frames} complete frames, the manifest records ${segment.frames}`,
        ]);
      }
    }
    const batch = cutter.straddledBatch;
    if (batch) {
      const base = point.restorableFrom;
      throw new NoRestorePointError(
        prefix,
        `commit ${base + walCommits} was shipped inside a batch of commits ${base + batch.first} to ${base + batch.last} (written as one record while the backup was behind the application), so it is restorable only with the whole batch`,
        {
          requestedCommitSeq: base + walCommits,
          nearestBelow: base + batch.first - 1,
          nearestAbove: base + batch.last,
        },
      );
    }
    if (cutter.commitsKept !== walCommits) {
      throw new RestorePointRejectedError(point.key, [
        `the WAL holds ${cutter.commitsKept} commits, ${walCommits} needed for commit ${point.restorableFrom + walCommits}`,
      ]);
    }
    await writer.finish();
  } finally {
    await writer.abandon();
  }
}
