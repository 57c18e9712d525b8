/**
 * Builds the manifest of the current restore point from what a tenure has
 * shipped: the snapshot, the base archives in chain order, the chain files,
 * the per-manifest side files, and the generation's segments. Pure: no I/O.
 *
 * Guarantees: `commitSeq` is computed from the objects listed (floor plus
 * every archive's and segment's frames), so it is what a restore reports; a
 * manifest naming an object of another lineage is refused (it would not
 * verify) with `@x/manifest`'s `ManifestError`.
 */
import {
  computeCommitSeq,
  type FileEntry,
  MANIFEST_FORMAT_VERSION,
  type Manifest,
  manifestKey,
  verifyLineage,
} from '@x/manifest';
import type { Generation, Tenure } from './tenure.ts';

export interface BuiltRestorePoint {
  readonly key: string;
  readonly manifest: Manifest;
}

function isoOrNull(ms: number | null): string | null {
  return ms === null || !Number.isFinite(ms) ? null : new Date(ms).toISOString();
}

/** The files a restore point of `generation` names: snapshot, base archives, chain files, side files. */
function restorePointFiles(tenure: Tenure, generation: Generation): FileEntry[] {
  const files: FileEntry[] = [];
  if (tenure.snapshot) files.push(tenure.snapshot);
  for (const n of tenure.baseArchives) {
    const archive = tenure.archives.get(n);
    if (archive) files.push(archive.entry);
  }
  files.push(...generation.chain);
  for (const { entry } of tenure.side.values()) files.push(entry);
  return files;
}

/**
 * The commit count of `generation`'s restore point before its first segment
 * (floor plus the files' commits): a segment's first commit counts from here.
 */
export function restorePointBaseCommits(tenure: Tenure, generation: Generation): number {
  return computeCommitSeq({
    oldestCommitSeq: generation.floor,
    files: restorePointFiles(tenure, generation),
    segments: [],
  });
}

/** The restore point of `tenure`'s current generation, or `null` when there is none. */
export function buildRestorePoint(
  prefix: string,
  tenure: Tenure,
  wallNowMs: number,
  leaseGeneration: number | null,
): BuiltRestorePoint | null {
  const generation = tenure.current;
  if (!generation) return null;
  const files = restorePointFiles(tenure, generation);
  const segments = [...generation.segments];
  const commitSeq = computeCommitSeq({ oldestCommitSeq: generation.floor, files, segments });
  const manifest: Manifest = {
    formatVersion: MANIFEST_FORMAT_VERSION,
    lineage: tenure.ownLineage(),
    createdAt: new Date(wallNowMs).toISOString(),
    commitSeq,
    oldestCommitSeq: generation.floor,
    walGeneration: generation.number,
    leaseGeneration,
    snapshotTime: isoOrNull(generation.snapshotTime),
    commitTime: isoOrNull(
      generation.commitTime === null || generation.snapshotTime === null
        ? generation.commitTime
        : Math.max(generation.commitTime, generation.snapshotTime),
    ),
    files,
    segments,
  };
  // Refuse rather than write a restore point that would not verify.
  verifyLineage(manifest);
  return { key: manifestKey(prefix, commitSeq), manifest };
}
