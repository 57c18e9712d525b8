/**
 * listRestorePoints(): what `backupd ls` shows, one entry per manifest of a
 * prefix (package README). Applies restore's checks to each manifest
 * (`checked: 'manifest'`); with `deep`, takes verify's verdict per manifest
 * (`checked: 'objects'`). An unreadable or unsafe manifest is listed with
 * its problems rather than failing the listing; one deleted after the
 * listing is left out, and LATEST is followed as verify follows it. Store
 * failures and aborts throw.
 */
import type { AgeIdentity } from '@x/age-envelope';
import {
  type Manifest,
  type ManifestFormatVersion,
  parseManifestKey,
  parseSegmentKey,
} from '@x/manifest';
import type { ObjectStore } from '@x/store';
import { compactedWithFineSegments } from './fine-run.ts';
import { RestorePointRejectedError } from './restore-errors.ts';
import { checkedPrefix } from './restore-point-checks.ts';
import {
  followMovedLatest,
  listManifestKeys,
  loadRestorePoint,
  readLatest,
} from './restore-points.ts';
import { type SupersededTenure, supersededTenures } from './superseded-tenures.ts';
import { verify } from './verify.ts';

export interface RestorePointInfo {
  readonly manifestKey: string;
  /** The commit the manifest restores to (from its key when it did not parse). */
  readonly commitSeq: number;
  /** Whether LATEST names this manifest. */
  readonly latest: boolean;
  /**
   * `ok`: the checks `checked` names passed; `problems`: listed with what is
   * wrong, not restorable.
   */
  readonly status: 'ok' | 'problems';
  /**
   * What `ok` rests on: `manifest` — the manifest was read and passed
   * restore's checks (it parses, its lineage is consistent, every name, key
   * and segment range is safe), its objects were not read; `objects` — also
   * every object it names exists with the recorded size and CRC-32 (`deep`).
   */
  readonly checked: 'manifest' | 'objects';
  readonly problems: readonly string[];
  /** The lowest commit it restores to (its WAL cut to nothing); any commit in `[restorableFrom, commitSeq]` restores. */
  readonly restorableFrom?: number;
  readonly createdAt?: string;
  readonly lineage?: string;
  readonly walGeneration?: number;
  /** The lease generation its writer held (manifest version 3; absent before, `null`: written without a lease). */
  readonly leaseGeneration?: number | null;
  /**
   * Set when a later lease tenure had already written a restore point of
   * this lineage at a lower commit: a second writer wrote this one (see
   * `supersededTenures`).
   */
  readonly superseded?: SupersededTenure;
  /** Bytes of every object the manifest names (what a restore of `commitSeq` downloads, `backup.lineage` included). */
  readonly sizeBytes?: number;
  /** Number of objects it names. */
  readonly objects?: number;
  /** The manifest's format version. */
  readonly formatVersion?: ManifestFormatVersion;
  /**
   * The time of the oldest state it restores (at `restorableFrom`, its
   * snapshot's), RFC 3339; `null` when unknown (format version 1, or an
   * engine that records no times).
   */
  readonly snapshotTime?: string | null;
  /** The recorded commit time of its newest state (at `commitSeq`); `null` when unknown. */
  readonly commitTime?: string | null;
  /**
   * How finely its commit log can be restored, as runs of one granularity,
   * oldest first; present only when it names a compacted object. See
   * {@link GranularityRun}.
   */
  readonly granularity?: readonly GranularityRun[];
}

/**
 * Consecutive entries of a restore point's commit log of one level: after
 * commit `after`, up to commit `to`. Level 0: fine segments, every commit
 * restorable (a batch shipped while behind aside). Level n ≥ 1: compacted
 * objects of level n, each restorable only at its end (`objects` ends).
 */
export interface GranularityRun {
  readonly level: number;
  readonly after: number;
  readonly to: number;
  readonly objects: number;
  /**
   * Level n ≥ 1 of LATEST's restore point: every commit after this one
   * restores exactly, because the bucket still holds the fine segments of
   * the run's newest objects (the worker's exact window). Absent: none.
   */
  readonly exactAfter?: number;
}

/** The runs of `manifest`'s chain from `restorableFrom` on; `undefined` when nothing is compacted. */
export function granularityRuns(
  prefix: string,
  manifest: Manifest,
  restorableFrom: number,
  exactObjects: ReadonlySet<string> = new Set(),
): GranularityRun[] | undefined {
  const runs: { level: number; after: number; to: number; objects: number; exactAfter?: number }[] =
    [];
  let at = restorableFrom;
  for (const segment of manifest.segments) {
    const parsed = parseSegmentKey(prefix, segment.key);
    const level = parsed?.layout === 'compacted' ? parsed.level : 0;
    let last = runs.at(-1);
    if (last !== undefined && last.level === level) {
      last.to += segment.frames;
      last.objects += 1;
    } else {
      last = { level, after: at, to: at + segment.frames, objects: 1 };
      runs.push(last);
    }
    // The run's exact part is its newest objects, each with fine segments.
    if (!exactObjects.has(segment.key)) delete last.exactAfter;
    else last.exactAfter ??= at;
    at += segment.frames;
  }
  return runs.some((run) => run.level > 0) ? runs : undefined;
}

/** What `describePoint` needs besides the store and prefix. */
interface PointContext {
  readonly key: string;
  /** The commit its key says (reported for a manifest that does not load). */
  readonly commitSeq: number;
  readonly isLatest: boolean;
  readonly checked: RestorePointInfo['checked'];
  /** Object problems per manifest key, from verify's deep pass. */
  readonly objectProblems: ReadonlyMap<string, string[]>;
  readonly signal: AbortSignal | undefined;
}

/** One restore point's entry, or `null` when its manifest is gone (deleted since it was listed). */
async function describePoint(
  store: ObjectStore,
  prefix: string,
  context: PointContext,
): Promise<RestorePointInfo | null> {
  const { key, isLatest, checked } = context;
  let point: Awaited<ReturnType<typeof loadRestorePoint>>;
  try {
    point = await loadRestorePoint(store, prefix, key, context.signal);
  } catch (error) {
    if (!RestorePointRejectedError.isInstance(error)) throw error;
    return {
      manifestKey: key,
      commitSeq: context.commitSeq,
      latest: isLatest,
      status: 'problems',
      checked,
      problems: error.problems,
    };
  }
  if (point === null) return null;
  const { manifest } = point;
  let sizeBytes = 0;
  for (const entry of manifest.files) sizeBytes += entry.size;
  for (const entry of manifest.segments) sizeBytes += entry.size;
  const problems = context.objectProblems.get(key) ?? [];
  const exact = isLatest
    ? await compactedWithFineSegments(store, prefix, manifest, context.signal)
    : undefined;
  const granularity = granularityRuns(prefix, manifest, point.restorableFrom, exact);
  return {
    manifestKey: key,
    commitSeq: manifest.commitSeq,
    latest: isLatest,
    status: problems.length === 0 ? 'ok' : 'problems',
    checked,
    problems,
    restorableFrom: point.restorableFrom,
    createdAt: manifest.createdAt,
    lineage: manifest.lineage,
    walGeneration: manifest.walGeneration,
    ...(manifest.leaseGeneration === undefined
      ? {}
      : { leaseGeneration: manifest.leaseGeneration }),
    sizeBytes,
    objects: manifest.files.length + manifest.segments.length,
    formatVersion: manifest.formatVersion,
    snapshotTime: manifest.snapshotTime ?? null,
    commitTime: manifest.commitTime ?? null,
    ...(granularity === undefined ? {} : { granularity }),
  };
}

/**
 * Every restore point under `prefix`, oldest commit first.
 * @throws RestoreOptionsError for an invalid prefix; store errors and aborts as they are.
 */
export async function listRestorePoints(
  store: ObjectStore,
  prefix: string,
  options: {
    readonly signal?: AbortSignal;
    readonly deep?: boolean;
    /** With `deep`: the age identities that open encrypted objects (as `verify`'s). */
    readonly identities?: readonly AgeIdentity[];
  } = {},
): Promise<RestorePointInfo[]> {
  const normalized = checkedPrefix(prefix);
  const { signal } = options;
  const latest = await readLatest(store, normalized, signal);
  const latestTarget = latest.state === 'ok' ? latest.manifestKey : undefined;
  const { manifests } = await listManifestKeys(store, normalized, signal);
  const deep = options.deep === true;
  // Object problems per manifest key, from verify's deep pass.
  const objectProblems = new Map<string, string[]>();
  if (deep) {
    const report = await verify(store, normalized, {
      deep,
      ...(signal === undefined ? {} : { signal }),
      ...(options.identities === undefined ? {} : { identities: options.identities }),
    });
    for (const manifest of report.manifests) {
      // A superseded tenure is told by its own field, not as damage.
      const damage = manifest.problems.filter((problem) => problem.kind !== 'superseded-tenure');
      if (manifest.status === 'problems' && damage.length > 0)
        objectProblems.set(
          manifest.key,
          damage.map((problem) => problem.message),
        );
    }
  }
  const checked = deep ? 'objects' : 'manifest';
  const describe = (key: string, commitSeq: number, isLatest: boolean) =>
    describePoint(store, normalized, { key, commitSeq, isLatest, checked, objectProblems, signal });
  const points: RestorePointInfo[] = [];
  for (const listed of manifests) {
    const point = await describe(listed.key, listed.commitSeq, listed.key === latestTarget);
    if (point !== null) points.push(point);
  }
  // LATEST's target gone by the time it was read (a live writer moved LATEST
  // on and retired it): follow LATEST as verify does, marking the restore
  // point it names now, or adding it when it was written after the listing.
  // When LATEST stays put on a missing manifest, no entry is LATEST's.
  if (latestTarget !== undefined && !points.some((point) => point.latest))
    await followMovedLatest(
      store,
      normalized,
      latest,
      async (key) => {
        const index = points.findIndex((point) => point.manifestKey === key);
        if (index >= 0) {
          points[index] = { ...points[index]!, latest: true };
          return true;
        }
        const commitSeq = parseManifestKey(normalized, key);
        const point = commitSeq === undefined ? null : await describe(key, commitSeq, true);
        if (point === null) return false;
        points.push(point);
        points.sort((a, b) => a.commitSeq - b.commitSeq);
        return true;
      },
      signal,
    );
  return markSuperseded(points);
}

function markSuperseded(points: RestorePointInfo[]): RestorePointInfo[] {
  const found = supersededTenures(
    points.flatMap((point) =>
      point.lineage === undefined
        ? []
        : [{ ...point, key: point.manifestKey, lineage: point.lineage }],
    ),
  );
  return points.map((point) => {
    const superseded = found.get(point.manifestKey);
    return superseded === undefined ? point : { ...point, superseded };
  });
}
