/**
 * What a worker knows about the bucket during one lease tenure. A new tenure
 * starts from a fresh `Tenure`: another writer may have changed the bucket
 * meanwhile, so nothing learned before is trusted, and resetting is one
 * assignment, so no field can be forgotten. Plain state, no I/O.
 */
import type { FileEntry, Manifest, SegmentEntry } from '@x/manifest';
import type { ObjectVersion } from '@x/store';
import type { WalKey } from './health.ts';
import { NO_SNAPSHOT_WAIT, type SnapshotWait } from './snapshot-schedule.ts';

/** The WAL generation being shipped: its objects and how far it got. */
export interface Generation {
  /** Its number in the bucket (`walGeneration`). */
  readonly number: number;
  readonly key: WalKey;
  /** Bytes of the WAL file shipped so far. */
  cursor: number;
  /** `cursor` as of the last manifest `LATEST` names. */
  inRestorePoint: number;
  readonly floor: number;
  /** Wall-clock ms this worker started the generation (scheduled snapshots count from here). */
  readonly startedAt: number;
  /** The chain files, as they were when the generation started. */
  readonly chain: FileEntry[];
  readonly segments: SegmentEntry[];
  /** The source's time of the snapshot's state (ms), `null` when unknown. */
  readonly snapshotTime: number | null;
  /** The recorded time of the newest shipped commit (ms; the snapshot's before any), `null` when unknown. */
  commitTime: number | null;
}

/** Notes the newest commit time of a shipped range: unknown once any range's time is unknown. */
export function noteShippedTime(
  generation: Generation,
  range: { readonly frames: number; readonly lastCommitTime?: number | null },
): void {
  if (range.frames === 0) return;
  const time = range.lastCommitTime ?? null;
  // Never before the snapshot's (a wall clock stepped back): the manifest refuses that order.
  generation.commitTime =
    time === null || generation.commitTime === null ? null : Math.max(time, generation.commitTime);
}

/** Stored bytes of the generation's chain: what a restore of it reads beyond its snapshot. */
export function chainBytes(generation: Generation): number {
  let bytes = 0;
  for (const segment of generation.segments) bytes += segment.size;
  return bytes;
}

export interface KnownArchive {
  /**
   * The archive file's length, when known: a raw archive's stored size, or
   * what this tenure stored or checked; `null` for a sealed one not opened yet.
   */
  readonly length: number | null;
  readonly entry: FileEntry;
  /** The local file is known to hold these bytes (uploaded by this tenure, or checked). */
  verified: boolean;
}

export class Tenure {
  /** A due scheduled snapshot, carried from step to step (`decideSnapshot`). */
  snapshotWait: SnapshotWait = NO_SNAPSHOT_WAIT;
  /** The bucket's previous state was read and the lineage checked. */
  resumed = false;
  lineage: string | null = null;
  /** The lineage this store was restored from (adoption), if any. */
  parentLineage: string | null = null;
  /** Manifest keys that hold the parent lineage's restore point at the same commit count. */
  readonly parentKeys = new Set<string>();
  latestVersion: ObjectVersion | null = null;
  /** The source was offered the newest restore point's generation (generation-continuation.ts). */
  continuationOffered = false;
  /** The restore point LATEST named when the tenure resumed (`null`: none). */
  latestManifest: Manifest | null = null;
  latestTarget: string | null = null;
  /** The lease generation LATEST says wrote it, as last read or written; `undefined`: unknown. */
  latestLeaseGeneration: number | null | undefined = undefined;
  /**
   * The manifest a LATEST write named whose outcome is unknown (its answer
   * never came: aborted, timed out, a dropped connection): the service may
   * have applied it, which leaves `latestVersion` stale. See
   * `ManifestWriter` for how the next write settles it.
   */
  latestInDoubt: string | null = null;
  /** Versions of the manifests this tenure wrote, by key. */
  readonly manifestVersions = new Map<string, ObjectVersion>();
  /** Generation numbers this tenure allocated. */
  readonly allocated = new Set<number>();
  /** Generations whose segment prefix retention has already listed and cleared. */
  readonly retiredSegments = new Set<number>();
  /** Manifests read or written, by key, with the version they were read at (see retention). */
  readonly manifestCache = new Map<string, { version: ObjectVersion; manifest: Manifest | null }>();
  /**
   * Chain entries a compaction replaced (compaction.ts), with the wall-clock
   * ms they were shipped at: retention deletes each once no kept restore
   * point names it (a fine segment only past the exact window), without
   * listing for them.
   */
  readonly compactedAway = new Map<string, number>();
  /** Side-file keys this tenure wrote (or found with the same content), not deleted since. */
  readonly sideKeysWritten = new Set<string>();
  /**
   * Sealed side and chain files this tenure wrote or opened, by name and
   * content (`sideContentOf`), not deleted since: their keys name the
   * stored bytes, which a new sealing changes (side-file-entry.ts).
   */
  readonly sealedSide = new Map<string, FileEntry>();
  /** Whether this tenure's retention has deleted the side objects earlier writers left unnamed. */
  sideSwept = false;
  /** Keys of sealed side files of the newest restore point already opened for reuse. */
  readonly sealedSideOpened = new Set<string>();
  nextGeneration = 0;
  /** Generation numbers with objects in the bucket that retention has not retired. */
  generations = new Set<number>();
  current: Generation | null = null;
  snapshot: FileEntry | null = null;
  readonly archives = new Map<number, KnownArchive>();
  baseArchives: number[] = [];
  /** The side files of the restore point, by name: their identity, content (`sideContentOf`) and entry. */
  readonly side = new Map<string, { identity: string; content: string; entry: FileEntry }>();
  manifestDirty = false;
  lastManifestAt: number | null = null;
  /** Monotonic ms of this tenure's last retention pass (manifest-writer.ts); `null` before the first. */
  lastRetentionAt: number | null = null;

  /** The lineage stamped on this tenure's objects (empty before resume). */
  ownLineage(): string {
    return this.lineage ?? '';
  }
}
