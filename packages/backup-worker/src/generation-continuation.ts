/**
 * A restart without a new snapshot: the source is offered the restore point
 * `LATEST` names (with the tail a crashed run left after it), and when it
 * proves it opened on that state (`BackupSource.continueGeneration`), the
 * tenure takes the generation over where its log ends instead of uploading
 * the database again. Only a generation sealed to exactly the recipients this
 * worker writes to is offered (generation-recipients.ts). Why:
 * docs/decisions/2026-12-06-continuing-generations.md. Writes nothing to the
 * bucket.
 */
import type { GenerationCandidate, RestorePointContent } from '@x/engine';
import {
  Crc32,
  crc32Hex,
  type Manifest,
  parseSegmentKey,
  parseSnapshotKey,
  type SegmentEntry,
  segmentGenerationPrefix,
} from '@x/manifest';
import {
  decodeSegmentObject,
  decodeSegmentObjectStream,
  readSegmentObjectHeader,
  type SegmentObjectHeader,
} from '@x/wal-segment';
import type { WorkerContext } from './context.ts';
import { BackupError, messageOf, RestorePointReadError } from './errors.ts';
import { generationRecipientsProblem } from './generation-recipients.ts';
import { keyOf } from './health.ts';
import { readCheckedLogObject } from './log-object-read.ts';

function msOrNull(text: string | null | undefined): number | null {
  if (text === null || text === undefined) return null;
  const ms = Date.parse(text);
  return Number.isFinite(ms) ? ms : null;
}

/** The candidate `latest` offers, or `null` (rules: @x/engine's README, `continueGeneration`). */
function candidateOf(
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
  let sealing: string | null;
  try {
    sealing = await generationRecipientsProblem(ctx, latest);
  } catch (error) {
    if (!RestorePointReadError.isInstance(error)) throw error;
    ctx.logger.warn('backup.continuation_unproven', { error: messageOf(error) });
    return false;
  }
  if (sealing !== null) {
    ctx.logger.info('backup.continuation_skipped', {
      reason: `${sealing}: a restart takes a new snapshot`,
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

interface AdoptedTail {
  readonly entries: readonly SegmentEntry[];
  /** Where the log ends with the tail. */
  readonly logEnd: number;
  /** Commits the tail holds. */
  readonly commits: number;
}

/**
 * The tail a crashed run left after its newest restore point: `.seg` segments
 * no restore point names yet, which a restore of the latest state already
 * rolls forward over. Taken, as they are, only under the roll-forward's
 * rules: a `.seg` key starting where the chain ends; a header naming that
 * generation, range and lineage, the worker's recipients, and as
 * `previousCrc32` the stored CRC-32 of the object before it; a body that
 * decodes (opened with the worker's identities). Compacted objects beyond the
 * end are passed over; any other leftover gives `null` (no offer). One GET
 * each.
 */
async function adoptTail(
  ctx: WorkerContext,
  latest: Manifest,
  logEnd: number,
  beyond: readonly string[],
): Promise<AdoptedTail | null> {
  const { prefix, requests } = ctx;
  const byStart = new Map<number, string>();
  for (const key of beyond) {
    const range = parseSegmentKey(prefix, key);
    if (range?.layout === 'compacted') continue;
    if (range === undefined || range.layout !== 'object' || byStart.has(range.start)) return null;
    byStart.set(range.start, key);
  }
  const entries: SegmentEntry[] = [];
  let end = logEnd;
  let commits = 0;
  let previous = latest.segments.at(-1)?.crc32 ?? latest.files[0]?.crc32 ?? '00000000';
  for (let key = byStart.get(end); key !== undefined; key = byStart.get(end)) {
    const range = parseSegmentKey(prefix, key)!;
    const object = await requests.get(key);
    if (object === null) return null;
    let header: SegmentObjectHeader;
    try {
      header = readSegmentObjectHeader(object.body);
    } catch {
      return null;
    }
    if (
      ctx.keys.disagreement(header.recipients, key) !== null ||
      header.kind !== 'segment' ||
      header.generation !== latest.walGeneration ||
      header.start !== range.start ||
      header.end !== range.end ||
      header.lineage !== latest.lineage ||
      header.previousCrc32 !== Number.parseInt(previous, 16)
    )
      return null;
    try {
      decodeSegmentObject(object.body, { identities: ctx.keys.identities });
    } catch {
      return null;
    }
    previous = crc32Hex(object.body);
    entries.push({
      key,
      size: object.body.byteLength,
      crc32: previous,
      frames: header.commits,
      lineage: header.lineage,
    });
    commits += header.commits;
    end = range.end;
    byStart.delete(range.start);
  }
  // Anything not on the chain: not what a roll-forward reaches.
  if (byStart.size > 0) return null;
  return { entries, logEnd: end, commits };
}

/**
 * The content of `manifest` (a snapshot and log objects of its generation),
 * read back on demand for a source with no record of its own to prove its
 * state with, each object checked as a restore checks it before a byte is
 * handed on: the snapshot's stored size and CRC-32 as it streams (and for a
 * `.snap`, its envelope, kind and generation), log objects as
 * log-object-read.ts does. Failures are `RestorePointReadError`s.
 */
function restorePointContent(
  ctx: WorkerContext,
  manifest: Manifest,
): RestorePointContent & { readonly bytesRead: () => number } {
  const { requests, prefix, keys } = ctx;
  let bytesRead = 0;
  const fail = (key: string, problem: string) => new RestorePointReadError(key, problem);
  return {
    bytesRead: () => bytesRead,
    async *image() {
      const entry = manifest.files[0];
      const parsed = entry === undefined ? undefined : parseSnapshotKey(prefix, entry.key);
      if (entry === undefined || parsed === undefined)
        throw fail(entry?.key ?? prefix, 'the restore point names no snapshot');
      async function* stored(): AsyncGenerator<Uint8Array> {
        const crc = new Crc32();
        let size = 0;
        for await (const chunk of requests.getStream(entry!.key, () =>
          fail(entry!.key, 'missing from the bucket'),
        )) {
          size += chunk.byteLength;
          bytesRead += chunk.byteLength;
          if (size > entry!.size)
            throw fail(entry!.key, `holds more than its entry's ${entry!.size} bytes`);
          crc.update(chunk);
          yield chunk;
        }
        if (size !== entry!.size || crc.hex() !== entry!.crc32)
          throw fail(
            entry!.key,
            `holds ${size} bytes of CRC-32 ${crc.hex()}, its entry says ${entry!.size} of ${entry!.crc32}`,
          );
      }
      if (parsed.layout !== 'object') {
        if (keys.encrypts)
          throw fail(entry.key, 'a raw snapshot is in clear, this worker encrypts');
        yield* stored();
        return;
      }
      try {
        const decoded = await decodeSegmentObjectStream(stored(), { identities: keys.identities });
        if (decoded.header.kind !== 'snapshot' || decoded.header.generation !== parsed.generation)
          throw fail(
            entry.key,
            `its header says a ${decoded.header.kind} of generation ${decoded.header.generation}`,
          );
        const sealing = keys.disagreement(decoded.header.recipients, 'the snapshot');
        if (sealing !== null) throw fail(entry.key, sealing);
        yield* decoded.body;
      } catch (error) {
        if (BackupError.isInstance(error)) throw error;
        throw fail(entry.key, messageOf(error));
      }
    },
    async *logBodies() {
      for (const entry of manifest.segments) {
        const { body } = await readCheckedLogObject({
          requests,
          prefix,
          generation: manifest.walGeneration,
          entry,
          keys,
          fail,
        });
        bytesRead += entry.size;
        yield body;
      }
    },
  };
}
