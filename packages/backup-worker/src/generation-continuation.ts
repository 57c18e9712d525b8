/**
 * A restart without a new snapshot: the worker offers its source the restore
 * point `LATEST` names, and when the source proves that it opened on exactly
 * that state, or on it plus pages it then ships as one commit (see
 * `BackupSource.continueGeneration`), the tenure takes that generation over
 * where its log ends instead of uploading the database again. What is offered,
 * the tail, the logged refusals: @x/engine's README (`continueGeneration`); why:
 * docs/decisions/2026-12-06-continuing-generations.md. On `true`, the tenure's
 * current generation is that restore point's (with the tail), its cursor at the
 * log's end, dirty only when a tail was taken. Writes nothing to the bucket.
 */
import type { GenerationCandidate } from '@x/engine';
import {
  type Manifest,
  parseSegmentKey,
  parseSnapshotKey,
  segmentGenerationPrefix,
} from '@x/manifest';
import type { WorkerContext } from './context.ts';
import { messageOf, RestorePointReadError } from './errors.ts';
import { restorePointContent } from './restore-point-read.ts';
import { keyOf } from './shipper.ts';
import { adoptTail } from './tail-adoption.ts';

function msOrNull(text: string | null | undefined): number | null {
  if (text === null || text === undefined) return null;
  const ms = Date.parse(text);
  return Number.isFinite(ms) ? ms : null;
}

/** The candidate `latest` offers, or `null` (rules: @x/engine's README, `continueGeneration`). */
export function candidateOf(
  prefix: string,
  latest: Manifest | null,
  lineage: string | null,
): GenerationCandidate | null {
  if (latest === null || lineage === null || latest.lineage !== lineage) return null;
  if (latest.files.length !== 1) return null;
  const snapshot = parseSnapshotKey(prefix, latest.files[0]!.key);
  if (snapshot === undefined || snapshot.generation !== latest.walGeneration) return null;
  let logEnd = 0;
  for (const segment of latest.segments) {
    const range = parseSegmentKey(prefix, segment.key);
    if (range === undefined || range.generation !== latest.walGeneration || range.start !== logEnd)
      return null;
    logEnd = range.end;
  }
  // The next segment names the last entry's stored CRC-32 as its previous:
  // that holds only for a fine segment (the worker never compacts the last
  // entry; a bucket that says otherwise gets a new snapshot).
  const last = latest.segments.at(-1);
  if (last !== undefined && parseSegmentKey(prefix, last.key)?.layout === 'compacted') return null;
  return {
    lineage,
    walGeneration: latest.walGeneration,
    logEnd,
    commitSeq: latest.commitSeq,
  };
}

/**
 * Offers the newest restore point's generation to the source; on its proof,
 * makes it the tenure's current generation. `false` when nothing was
 * offered or the source could not prove it.
 */
export async function continueGeneration(
  ctx: WorkerContext,
  latest: Manifest | null,
  signal: AbortSignal,
): Promise<boolean> {
  const { tenure, prefix, requests, source } = ctx;
  if (source.continueGeneration === undefined || tenure.current !== null) return false;
  const candidate = candidateOf(prefix, latest, tenure.lineage);
  if (candidate === null || latest === null) return false;
  // A newer generation has objects (a run that crashed before its first
  // restore point): its state is not the candidate's.
  if (tenure.nextGeneration !== candidate.walGeneration + 1) {
    ctx.logger.info('backup.continuation_skipped', {
      reason: `a newer generation than the newest restore point's (${candidate.walGeneration}) has objects`,
    });
    return false;
  }
  const listed = await requests.list(segmentGenerationPrefix(prefix, candidate.walGeneration));
  const beyond: string[] = [];
  for (const object of listed.objects) {
    const range = parseSegmentKey(prefix, object.key);
    if (range !== undefined && range.end > candidate.logEnd) beyond.push(object.key);
  }
  const tail =
    beyond.length === 0
      ? { entries: [], logEnd: candidate.logEnd, commits: 0 }
      : await adoptTail(ctx, latest, candidate.logEnd, beyond);
  if (tail === null) {
    ctx.logger.info('backup.continuation_skipped', {
      reason: 'objects after the newest restore point do not chain on it',
    });
    return false;
  }
  // With its tail, the state offered is the one a restore of the latest
  // state rolls forward to.
  const rolledForward: Manifest = { ...latest, segments: [...latest.segments, ...tail.entries] };
  const content = restorePointContent(ctx, rolledForward);
  const offered: GenerationCandidate = {
    ...candidate,
    logEnd: tail.logEnd,
    commitSeq: candidate.commitSeq + tail.commits,
    content,
  };
  let proven: boolean;
  try {
    proven = await source.continueGeneration(offered, { signal });
  } catch (error) {
    if (!RestorePointReadError.isInstance(error)) throw error;
    ctx.logger.warn('backup.continuation_unproven', { error: messageOf(error) });
    return false;
  }
  if (!proven) {
    ctx.logger.info('backup.continuation_skipped', {
      reason: 'the database is not provably the newest restore point state or near it',
    });
    return false;
  }
  // From here the source counts the bucket's log: the generation is taken over.
  const position = await source.durablePosition();
  const snapshotTime = msOrNull(latest.snapshotTime);
  tenure.snapshot = latest.files[0]!;
  tenure.baseArchives = [];
  tenure.current = {
    number: candidate.walGeneration,
    key: keyOf(position),
    cursor: offered.logEnd,
    inRestorePoint: candidate.logEnd,
    floor: latest.oldestCommitSeq,
    // Scheduled snapshots count from the generation's snapshot, not from
    // this restart: a daily snapshot stays daily across restarts.
    startedAt: snapshotTime ?? ctx.clock.wallNow(),
    chain: [],
    segments: [...rolledForward.segments],
    snapshotTime,
    commitTime: msOrNull(latest.commitTime),
  };
  // The tail is in no restore point yet: the next one names it.
  tenure.manifestDirty = tail.entries.length > 0;
  ctx.health.shipped = { key: tenure.current.key, cursor: tenure.current.cursor };
  ctx.logger.info('backup.generation_continued', {
    walGeneration: candidate.walGeneration,
    logEnd: offered.logEnd,
    commitSeq: offered.commitSeq,
    // Bytes of the restore point read back to prove the state (0: a record did).
    restorePointBytesRead: content.bytesRead(),
    tailSegments: tail.entries.length,
  });
  return true;
}
