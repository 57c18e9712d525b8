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
import { parseManifest, restorableFrom, stateTimes } from '@x/manifest';
import {
  decodeSegmentEntry,
  expectedPreviousCrc32,
  FramedWalCutter,
  findRollForward,
  fineRunOf,
  isSegmentObject,
  listRestorePoints,
  type RestorePointTarget,
  rolledForwardManifest,
} from '@x/restore';
import type { ObjectStore } from '@x/store';
import {
  COMMIT_RECORD_HEADER_BYTES,
  commitsOfRecordHeader,
  decodeCommitRecord,
  splitLogFrames,
} from './commit-record.ts';
import { SqliteRestoreCorruptError } from './sqlite-errors.ts';

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

/**
 * The newest commit recorded at or before `time` (ms since the epoch), or
 * `null` when no restore point holds one.
 * @throws SqliteRestoreCorruptError when a segment fails its CRC or holds no commit record.
 */
export async function sqliteCommitAtTime(
  store: ObjectStore,
  prefix: string,
  time: number,
  options: { readonly signal?: AbortSignal } = {},
): Promise<SqliteCommitAtTime | null> {
  const points = await listRestorePoints(store, prefix, options);
  const newestPerGeneration = new Map<number, (typeof points)[number]>();
  for (const point of points) {
    if (point.status !== 'ok' || point.walGeneration === undefined) continue;
    const known = newestPerGeneration.get(point.walGeneration);
    if (known === undefined || point.commitSeq > known.commitSeq)
      newestPerGeneration.set(point.walGeneration, point);
  }
  const generations = [...newestPerGeneration.values()].sort((a, b) => b.commitSeq - a.commitSeq);
  for (const point of generations) {
    const object = await store.get(point.manifestKey, options);
    if (object === null) continue; // Deleted by retention since the listing.
    const named = parseManifest(object.body, { prefix });
    // A generation also holds the chained segments shipped after its newest
    // restore point (a replicate killed before its next one): verified
    // history, and what a time between that restore point and the next
    // generation's snapshot asks for.
    const manifest = rolledForwardManifest(
      named,
      await findRollForward(store, prefix, named, {
        createWalCutter: commitLogCutter,
        pastLaterGenerations: true,
        ...(options.signal === undefined ? {} : { signal: options.signal }),
      }),
    );
    const snapshotTime = stateTimes(manifest).from;
    // A snapshot taken after the time holds a state newer than asked.
    if (snapshotTime !== null && snapshotTime > time) continue;
    let commitSeq = restorableFrom(manifest);
    let found: SqliteCommitAtTime | null = null;
    let carry: Uint8Array = new Uint8Array(0);
    let segments = manifest.segments;
    for (let index = 0; index < segments.length; index += 1) {
      const segment = segments[index]!;
      const object = await store.get(segment.key, options);
      if (object === null) break;
      let body = object.body;
      if (isSegmentObject(prefix, segment.key)) {
        // A `.seg` segment: the WAL bytes are its decoded body, used only
        // once header, length and CRC-32 checked out.
        try {
          body = decodeSegmentEntry(
            prefix,
            segment,
            body,
            expectedPreviousCrc32(prefix, { ...manifest, segments }, index),
          );
        } catch (error) {
          throw new SqliteRestoreCorruptError(segment.key, (error as Error).message, {
            cause: error,
          });
        }
      }
      const joined = new Uint8Array(carry.byteLength + body.byteLength);
      joined.set(carry, 0);
      joined.set(body, carry.byteLength);
      let split: ReturnType<typeof splitLogFrames>;
      try {
        split = splitLogFrames(joined);
      } catch (error) {
        throw new SqliteRestoreCorruptError(segment.key, (error as Error).message, {
          cause: error,
        });
      }
      let past = false;
      let straddled = false;
      const before: { commitSeq: number; found: SqliteCommitAtTime | null } = { commitSeq, found };
      for (const payload of split.payloads) {
        const record = decodeCommitRecord(payload);
        if (record.commitTime > time) {
          past = true;
          straddled = (record.commits ?? 1) > 1;
          break;
        }
        // A batch's time is its last commit's: the batch is restorable as a
        // whole, at or after that time.
        commitSeq += record.commits ?? 1;
        found = commitAt(point.manifestKey, commitSeq, record.commitTime, named.commitSeq);
      }
      if (straddled) {
        // The time falls inside a merged batch: the fine segments it
        // replaced, while the bucket holds them, date every commit.
        const run = await fineRunOf(store, prefix, { ...manifest, segments }, index, {
          createWalCutter: commitLogCutter,
          ...(options.signal === undefined ? {} : { signal: options.signal }),
        });
        if (run !== undefined) {
          segments = [...segments.slice(0, index), ...run, ...segments.slice(index + 1)];
          ({ commitSeq, found } = before);
          index -= 1;
          continue;
        }
      }
      carry = split.rest.slice();
      if (past) break;
    }
    if (found !== null) return found;
    // No commit of this generation by then: its snapshot's state is the newest.
    if (snapshotTime !== null)
      return commitAt(point.manifestKey, restorableFrom(manifest), snapshotTime, named.commitSeq);
  }
  return null;
}

/** Counts the commits of the SQLite commit log (a batch record counts all of its commits). */
function commitLogCutter(commits: number): FramedWalCutter {
  return new FramedWalCutter(commits, {
    headerBytes: COMMIT_RECORD_HEADER_BYTES,
    commitsOf: commitsOfRecordHeader,
  });
}

/** The answer for `commitSeq` of the restore point at `manifestKey`, whose own newest commit is `ownCommitSeq`. */
function commitAt(
  manifestKey: string,
  commitSeq: number,
  commitTime: number,
  ownCommitSeq: number,
): SqliteCommitAtTime {
  // Past the restore point's own commits: among the chained segments after it.
  const rollForward = commitSeq > ownCommitSeq;
  return {
    commitSeq,
    manifestKey,
    commitTime,
    target: {
      kind: 'restore-point',
      manifestKey,
      commitSeq,
      ...(rollForward ? { rollForward } : {}),
    },
  };
}
