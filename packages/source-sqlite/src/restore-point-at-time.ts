/**
 * Restore to a time: the newest commit recorded at or before it in a SQLite
 * backup prefix, and the restore-point target for `restore()`. Commit times
 * are in the records (commit-record.ts). The newest valid restore point of
 * each generation is read, newest generation first; a newer generation's
 * commits are all later, so the first answer found is the one. A snapshot
 * dated after the time skips its generation; one at or before it, with no
 * commit by then, answers with its state. Version 1 restore points date no
 * snapshot, so that gap falls back to the previous generation: never a newer
 * state. Rules: package README, `sqliteCommitAtTime`, _Commit times_.
 */
import type { AgeIdentity } from '@x/age-envelope';
import { type Manifest, parseManifest, restorableFrom, stateTimes } from '@x/manifest';
import {
  decodeSegmentEntry,
  expectedPreviousCrc32,
  findRollForward,
  fineRunOf,
  type GenerationEncryption,
  generationEncryption,
  isSegmentObject,
  listRestorePoints,
  ObjectKeyError,
  type RestorePointTarget,
  rolledForwardManifest,
  storedEncryption,
} from '@x/restore';
import type { ObjectStore } from '@x/store';
import { decodeCommitRecord, joinParts, splitLogFrames } from './commit-record.ts';
import { corruptAs, SqliteRestoreCorruptError } from './sqlite-errors.ts';
import { commitLogCutter } from './sqlite-materializer.ts';

export interface SqliteCommitAtTime {
  /** The commit found. */
  readonly commitSeq: number;
  /** The restore point that covers `commitSeq`, itself or by the chained segments shipped after it. */
  readonly manifestKey: string;
  /** The commit's recorded time (ms since the epoch), at or before the time asked for. */
  readonly commitTime: number;
  /**
   * Pass to `restore()` as `target`: `manifestKey` cut after `commitSeq`,
   * rolled forward when the commit is past the restore point's own.
   */
  readonly target: RestorePointTarget;
}

export interface SqliteCommitAtTimeOptions {
  readonly signal?: AbortSignal;
  /** The age identities that open encrypted segments (as `restore()`'s). */
  readonly identities?: readonly AgeIdentity[];
}

/** What reading one generation's log needs: the search's options and the generation's encryption. */
interface LogReading extends SqliteCommitAtTimeOptions {
  readonly encryption?: GenerationEncryption;
}

/**
 * The newest commit recorded at or before `time` (ms since the epoch), or
 * `null` when no restore point holds one.
 * @throws SqliteRestoreCorruptError when a segment fails its CRC or holds no
 *   commit record, or states another encryption than its generation's first segment.
 * @throws ObjectKeyError (`@x/restore`) when a segment it reads is encrypted
 *   and none of `options.identities` opens it.
 */
export async function sqliteCommitAtTime(
  store: ObjectStore,
  prefix: string,
  time: number,
  options: SqliteCommitAtTimeOptions = {},
): Promise<SqliteCommitAtTime | null> {
  const { signal } = options;
  const points = await listRestorePoints(store, prefix, signal === undefined ? {} : { signal });
  const newestPerGeneration = new Map<number, (typeof points)[number]>();
  for (const point of points) {
    if (point.status !== 'ok' || point.walGeneration === undefined) continue;
    const known = newestPerGeneration.get(point.walGeneration);
    if (known === undefined || point.commitSeq > known.commitSeq)
      newestPerGeneration.set(point.walGeneration, point);
  }
  const generations = [...newestPerGeneration.values()].sort((a, b) => b.commitSeq - a.commitSeq);
  for (const { manifestKey } of generations) {
    const object = await store.get(manifestKey, signal === undefined ? {} : { signal });
    if (object === null) continue; // Deleted by retention since the listing.
    const named = parseManifest(object.body, { prefix });
    // Every segment read is held to one encryption, its generation's. The
    // search reads logs only: the first segment's header says it (the
    // snapshot's, when the restore point names no segment).
    const first = named.segments[0]?.key;
    const encryption =
      first === undefined
        ? await generationEncryption(store, prefix, named, signal)
        : await storedEncryption(store, prefix, first, signal);
    const reading: LogReading = { ...options, ...(encryption === undefined ? {} : { encryption }) };
    // A generation also holds the chained segments shipped after its newest
    // restore point (a replicate killed before its next one): verified
    // history, and what a time between that restore point and the next
    // generation's snapshot asks for.
    const manifest = rolledForwardManifest(
      named,
      await findRollForward(store, prefix, named, {
        ...reading,
        createWalCutter: commitLogCutter,
        pastLaterGenerations: true,
      }),
    );
    const snapshotTime = stateTimes(manifest).from;
    // A snapshot taken after the time holds a state newer than asked.
    if (snapshotTime !== null && snapshotTime > time) continue;
    // No commit of this generation by then: its snapshot's state is the newest.
    const found =
      (await lastCommitBy(store, prefix, manifest, time, reading)) ??
      (snapshotTime === null
        ? null
        : { commitSeq: restorableFrom(manifest), commitTime: snapshotTime });
    if (found === null) continue;
    const { commitSeq, commitTime } = found;
    // Past the restore point's own commits: among the chained segments after it.
    const rollForward = commitSeq > named.commitSeq;
    const target: RestorePointTarget = { kind: 'restore-point', manifestKey, commitSeq };
    return {
      commitSeq,
      manifestKey,
      commitTime,
      target: { ...target, ...(rollForward ? { rollForward } : {}) },
    };
  }
  return null;
}

/**
 * The last commit of `manifest`'s log recorded at or before `time`, with its
 * time; `null` when none is. A time inside a merged batch (a compacted
 * object) is dated commit by commit from the fine segments it replaced,
 * while the bucket holds them.
 */
async function lastCommitBy(
  store: ObjectStore,
  prefix: string,
  manifest: Manifest,
  time: number,
  reading: LogReading,
): Promise<{ commitSeq: number; commitTime: number } | null> {
  let commitSeq = restorableFrom(manifest);
  type Found = { commitSeq: number; commitTime: number } | null;
  let found: Found = null;
  let carry: Uint8Array = new Uint8Array(0);
  let chain = manifest;
  for (let index = 0; index < chain.segments.length; index += 1) {
    const segment = chain.segments[index]!;
    const object = await store.get(
      segment.key,
      reading.signal === undefined ? {} : { signal: reading.signal },
    );
    if (object === null) break;
    const body = logBytesOf(prefix, chain, index, object.body, reading);
    const joined = joinParts([carry, body], carry.byteLength + body.byteLength);
    const split = corruptAs(segment.key, () => splitLogFrames(joined));
    const before: { commitSeq: number; found: Found } = { commitSeq, found };
    let past: { commits: number } | null = null;
    for (const payload of split.payloads) {
      const record = decodeCommitRecord(payload);
      if (record.commitTime > time) {
        past = { commits: record.commits ?? 1 };
        break;
      }
      // A batch's time is its last commit's: the batch is restorable as a
      // whole, at or after that time.
      commitSeq += record.commits ?? 1;
      found = { commitSeq, commitTime: record.commitTime };
    }
    const run =
      past !== null && past.commits > 1
        ? await fineRunOf(store, prefix, chain, index, {
            ...reading,
            createWalCutter: commitLogCutter,
          })
        : undefined;
    if (run !== undefined) {
      // Again from this object's place, over its fine segments.
      const segments = [
        ...chain.segments.slice(0, index),
        ...run,
        ...chain.segments.slice(index + 1),
      ];
      chain = { ...chain, segments };
      ({ commitSeq, found } = before);
      index -= 1;
      continue;
    }
    if (past !== null) return found;
    carry = split.rest.slice();
  }
  return found;
}

/**
 * The log bytes of `chain.segments[index]`: a `.seg` segment's decoded body,
 * once header, length, CRC-32 and encryption check out; a raw one's bytes.
 * A missing key is the caller's to fix, not corruption: it stays an `ObjectKeyError`.
 */
function logBytesOf(
  prefix: string,
  chain: Manifest,
  index: number,
  stored: Uint8Array,
  reading: LogReading,
): Uint8Array {
  const segment = chain.segments[index]!;
  if (!isSegmentObject(prefix, segment.key)) {
    const lead = reading.encryption;
    if (lead !== undefined && lead.encryption !== 'none')
      throw new SqliteRestoreCorruptError(
        segment.key,
        `encryption: a raw .segment is plaintext, its generation's first object ${lead.key} is encrypted`,
      );
    return stored;
  }
  const previous = expectedPreviousCrc32(prefix, chain, index);
  try {
    return decodeSegmentEntry(prefix, segment, stored, previous, reading);
  } catch (error) {
    if (ObjectKeyError.isInstance(error)) throw error;
    throw new SqliteRestoreCorruptError(segment.key, (error as Error).message, { cause: error });
  }
}
