/**
 * Restore of a SQLite database from a snapshot and the commit log after it:
 * each record's pages over the snapshot in order, the file cut to the chosen
 * commit's size. Atomic (a temporary file beside the target, fsync, rename)
 * and checked (frame CRC-32s, page sizes, patch bases, recorded page hashes,
 * `integrity_check` unless `verify: false`) before anything is at the target.
 * Replaces a database (or a `-wal`/`-shm`) only with `force`, removing the
 * old `-wal` and `-shm` first so SQLite never replays an old WAL onto it; no
 * process may have the target open. The result is in WAL mode. Memory: one
 * log chunk and the page writes gathered (PendingPageWrites), up to
 * {@link MAX_PENDING_WRITE_BYTES}.
 */

import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { open, rename, rm } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import {
  decodeCommitRecord,
  LOG_FRAME_HEADER_BYTES,
  splitLogFrames,
  wholeFrames,
} from './commit-record.ts';
import { copyOf, PendingPageWrites } from './page-patch.ts';
import { PatchablePages } from './patchable-pages.ts';
import { RecordedPageHashes } from './recorded-page-hashes.ts';
import {
  corruptAs,
  SqliteRestoreCorruptError,
  SqliteRestoreRefusedError,
} from './sqlite-errors.ts';

/** Pages gathered before they are written out (see PendingPageWrites): 64 MiB. */
export const MAX_PENDING_WRITE_BYTES = 64 * 1024 * 1024;

export type ByteSource = Uint8Array | AsyncIterable<Uint8Array> | Iterable<Uint8Array>;

export interface SqliteRestoreOptions {
  /** Path of the database file to create. */
  readonly targetPath: string;
  /** The database image at the generation's start. */
  readonly snapshot: ByteSource;
  /** The generation's commit log, from its first byte (segments concatenated in order). */
  readonly log: ByteSource;
  /**
   * Apply exactly this many commits of the log (0: the snapshot alone).
   * Default: every complete commit in `log`. Fails when the log holds fewer.
   */
  readonly commits?: number;
  /**
   * Apply the commits recorded at or before this wall-clock time (ms since
   * the epoch): the newest commit at or before it. Combined with `commits`,
   * the earlier of the two wins.
   */
  readonly time?: number;
  /**
   * When the snapshot was taken (ms). With `time` before it, the restore
   * fails instead of returning a database newer than asked for.
   */
  readonly snapshotTime?: number;
  /** Replace an existing database at the target. Default false. */
  readonly force?: boolean;
  /** Run `PRAGMA integrity_check` before renaming into place. Default true. */
  readonly verify?: boolean;
  /**
   * Check each page rebuilt from a patch against the hash its record
   * carries (SBC4). Default true; off only to look at a damaged log.
   */
  readonly checkPageHashes?: boolean;
  readonly signal?: AbortSignal;
}

export interface SqliteRestoreResult {
  readonly path: string;
  readonly pageSize: number;
  readonly databasePages: number;
  /** Commits of the log applied onto the snapshot. */
  readonly commitsApplied: number;
  /** Commit time of the last applied commit; `null` when none was applied. */
  readonly lastCommitTime: number | null;
}

function chunksOf(source: ByteSource): AsyncIterable<Uint8Array> | Iterable<Uint8Array> {
  return source instanceof Uint8Array ? [source] : source;
}

function pageSizeOf(header: Uint8Array, targetPath: string): number {
  if (header.byteLength < 100)
    throw new SqliteRestoreCorruptError(
      targetPath,
      'the snapshot is shorter than a database header',
    );
  const magic = new TextDecoder().decode(header.subarray(0, 16));
  if (magic !== 'SQLite format 3\u0000')
    throw new SqliteRestoreCorruptError(targetPath, 'the snapshot is not a SQLite database image');
  const raw = (header[16]! << 8) | header[17]!;
  return raw === 1 ? 65536 : raw;
}

/**
 * Builds the database at the chosen commit and moves it into place.
 * @throws SqliteRestoreRefusedError (SQLITE_RESTORE_TARGET_EXISTS) without `force` when the target exists.
 * @throws SqliteRestoreRefusedError (SQLITE_RESTORE_POINT_UNAVAILABLE) when `commits` exceeds the log,
 *   or `time` precedes `snapshotTime`.
 * @throws SqliteRestoreCorruptError when a check fails (nothing left at the target).
 */
export async function restoreSqliteDatabase(
  options: SqliteRestoreOptions,
): Promise<SqliteRestoreResult> {
  const target = options.targetPath;
  const force = options.force ?? false;
  await refuseBeforeWriting(options);
  const temporary = join(
    dirname(target),
    `.${basename(target)}.restore-${randomBytes(6).toString('hex')}`,
  );
  const handle = await open(temporary, 'wx+', 0o644);
  let handleOpen = true;
  try {
    const snapshot = await writeSnapshot(handle, options);
    const log = await applyCommitLog(handle, snapshot, options);
    await handle.truncate(log.databasePages * snapshot.pageSize);
    if (options.checkPageHashes !== false)
      await checkPageHashes(handle, snapshot.pageSize, log.recorded, options);
    await handle.sync();
    await handle.close();
    handleOpen = false;
    if (options.verify ?? true) checkIntegrity(temporary, target);
    // Old -wal/-shm go first: SQLite would replay an old WAL onto the new file.
    if (force) {
      await rm(`${target}-wal`, { force: true });
      await rm(`${target}-shm`, { force: true });
    }
    await rename(temporary, target);
    await syncDirectory(dirname(target));
    return {
      path: target,
      pageSize: snapshot.pageSize,
      databasePages: log.databasePages,
      commitsApplied: log.applied,
      lastCommitTime: log.lastCommitTime,
    };
  } catch (error) {
    if (handleOpen) await handle.close().catch(() => undefined);
    await rm(temporary, { force: true });
    await rm(`${temporary}-wal`, { force: true });
    await rm(`${temporary}-shm`, { force: true });
    throw error;
  }
}

/** What {@link applyCommitsInPlace} did. */
export interface AppliedInPlace {
  readonly commitsApplied: number;
  readonly pageSize: number;
  readonly databasePages: number;
  readonly lastCommitTime: number | null;
  /** Page numbers (1-based) the commits wrote; pages past `databasePages` were cut. */
  readonly pagesWritten: ReadonlySet<number>;
}

/**
 * Applies the commit records of `log` (whole records, continuing the log
 * the database at `path` was rebuilt from) to that file in place, with the
 * checks of {@link restoreSqliteDatabase}: frame CRC-32s, page sizes, patch
 * bases, recorded page hashes, and `integrity_check` unless `verify` is
 * false. For a private copy no one else opens (a follower's): a failure
 * leaves the file part way, to be rebuilt whole.
 * @throws SqliteRestoreCorruptError
 */
export async function applyCommitsInPlace(
  path: string,
  log: ByteSource,
  options: {
    readonly signal?: AbortSignal;
    readonly verify?: boolean;
    /** Apply only the records of commits recorded at or before this time (ms). */
    readonly time?: number;
  } = {},
): Promise<AppliedInPlace> {
  const handle = await open(path, 'r+');
  const written = new Set<number>();
  const restoreOptions: SqliteRestoreOptions = {
    targetPath: path,
    snapshot: new Uint8Array(0),
    log,
    ...(options.signal === undefined ? {} : { signal: options.signal }),
    ...(options.time === undefined ? {} : { time: options.time }),
  };
  let applied: AppliedLog;
  let pageSize: number;
  try {
    const header = new Uint8Array(100);
    await handle.read(header, 0, 100, 0);
    pageSize = pageSizeOf(header, path);
    const pages = Math.floor((await handle.stat()).size / pageSize);
    applied = await applyCommitLog(handle, { pageSize, pages }, restoreOptions, written);
    await handle.truncate(applied.databasePages * pageSize);
    await checkPageHashes(handle, pageSize, applied.recorded, restoreOptions);
    await handle.sync();
  } finally {
    await handle.close();
  }
  if (options.verify ?? true) checkIntegrity(path, path);
  return {
    commitsApplied: applied.applied,
    pageSize,
    databasePages: applied.databasePages,
    lastCommitTime: applied.lastCommitTime,
    pagesWritten: written,
  };
}

/** What can be refused before anything is written: an existing target, a time before the snapshot. */
async function refuseBeforeWriting(options: SqliteRestoreOptions): Promise<void> {
  const target = options.targetPath;
  if (!(options.force ?? false)) {
    for (const path of [target, `${target}-wal`, `${target}-shm`])
      if (existsSync(path)) throw SqliteRestoreRefusedError.targetExists(target);
  }
  if (
    options.time !== undefined &&
    options.snapshotTime !== undefined &&
    options.time < options.snapshotTime
  )
    throw SqliteRestoreRefusedError.pointUnavailable(
      target,
      `time ${new Date(options.time).toISOString()} is before this restore point's snapshot (${new Date(options.snapshotTime).toISOString()})`,
    );
}

interface WrittenSnapshot {
  readonly pageSize: number;
  readonly pages: number;
}

/** Step 1: the snapshot, as is, a whole number of pages. */
async function writeSnapshot(
  handle: FileHandle,
  options: SqliteRestoreOptions,
): Promise<WrittenSnapshot> {
  let written = 0;
  let header: Uint8Array | null = null;
  for await (const chunk of chunksOf(options.snapshot)) {
    options.signal?.throwIfAborted();
    if (header === null) header = copyOf(chunk.subarray(0, 100));
    await handle.write(chunk, 0, chunk.byteLength, written);
    written += chunk.byteLength;
  }
  const pageSize = pageSizeOf(header ?? new Uint8Array(0), options.targetPath);
  if (written % pageSize !== 0)
    throw new SqliteRestoreCorruptError(
      options.targetPath,
      `the snapshot (${written} bytes) is not a whole number of ${pageSize}-byte pages`,
    );
  return { pageSize, pages: written / pageSize };
}

interface AppliedLog {
  readonly applied: number;
  readonly databasePages: number;
  readonly lastCommitTime: number | null;
  readonly recorded: RecordedPageHashes;
}

/** Step 2: the commits, in order, up to the chosen one (by count or by time). */
async function applyCommitLog(
  handle: FileHandle,
  snapshot: WrittenSnapshot,
  options: SqliteRestoreOptions,
  /** Collects the page numbers the records write. */
  written?: Set<number>,
): Promise<AppliedLog> {
  const target = options.targetPath;
  const { pageSize } = snapshot;
  const limit = options.commits ?? Number.POSITIVE_INFINITY;
  let databasePages = snapshot.pages;
  let applied = 0;
  let lastCommitTime: number | null = null;
  let done = limit === 0;
  /** Bytes after the last whole frame read so far. */
  let carried = 0;
  const pending = new PendingPageWrites(pageSize);
  const patchable = new PatchablePages(databasePages);
  const recorded = new RecordedPageHashes(databasePages);
  for await (const body of wholeFrames(chunksOf(options.log))) {
    if (done) break;
    options.signal?.throwIfAborted();
    const split = corruptAs(target, () => splitLogFrames(body));
    carried = split.rest.byteLength;
    for (const payload of split.payloads) {
      const record = corruptAs(target, () => decodeCommitRecord(payload));
      if (record.pageSize !== pageSize)
        throw new SqliteRestoreCorruptError(
          target,
          `commit ${applied + 1} has ${record.pageSize}-byte pages, the snapshot ${pageSize}`,
        );
      if (options.time !== undefined && record.commitTime > options.time) {
        done = true;
        break;
      }
      const commits = record.commits ?? 1;
      if (applied + commits > limit)
        throw SqliteRestoreRefusedError.pointUnavailable(
          target,
          `commit ${limit} of this generation is inside a batch of commits ${applied + 1} to ${applied + commits}, shipped as one record while the backup was behind: restorable are ${applied} and ${applied + commits}`,
        );
      // A patch is exact only over the version it was computed against:
      // without it (a page above the size, or never written) it is refused,
      // never put over zeros.
      const unheld = patchable.unheld(record);
      if (unheld !== null)
        throw new SqliteRestoreCorruptError(
          target,
          `commit ${applied + 1} of the log patches page ${unheld}, whose version before it neither the snapshot (${snapshot.pages} pages) nor an earlier commit holds (the database had ${patchable.databasePages} pages): the patch has no base to be put over`,
        );
      patchable.advance(record);
      if (written !== undefined) {
        for (const page of record.pages.keys()) written.add(page);
        for (const page of record.patches?.keys() ?? []) written.add(page);
      }
      recorded.add(record, applied + commits);
      pending.add(record);
      if (pending.bytes >= MAX_PENDING_WRITE_BYTES) await pending.writeTo(handle, options.signal);
      databasePages = record.databasePages;
      lastCommitTime = record.commitTime;
      applied += commits;
      if (applied >= limit) {
        done = true;
        break;
      }
    }
    if (done) break;
  }
  await pending.writeTo(handle, options.signal);
  if (!done && carried >= LOG_FRAME_HEADER_BYTES && options.commits !== undefined)
    throw new SqliteRestoreCorruptError(target, 'the log ends inside a commit record');
  if (options.commits !== undefined && applied < options.commits)
    throw SqliteRestoreRefusedError.pointUnavailable(
      target,
      `asked for commit ${options.commits} of this generation, the log holds ${applied}`,
    );
  return { applied, databasePages, lastCommitTime, recorded };
}

/** Every page whose last write was a hashed patch hashes as the tap recorded. */
async function checkPageHashes(
  handle: FileHandle,
  pageSize: number,
  recorded: RecordedPageHashes,
  options: SqliteRestoreOptions,
): Promise<void> {
  const mismatch = await recorded.firstMismatch(handle, pageSize, options.signal);
  if (mismatch !== null)
    throw new SqliteRestoreCorruptError(
      options.targetPath,
      `page ${mismatch.page} rebuilt from a patch hashes ${mismatch.found}, and commit ${mismatch.commit} of the log recorded ${mismatch.expected} for it when it was captured: the patch was made against another version of the page than the backup holds`,
      { pageHash: mismatch },
    );
}

/** Step 3: the image as SQLite sees it. */
function checkIntegrity(temporary: string, target: string): void {
  let answer: string;
  try {
    answer = integrityCheck(temporary);
  } catch (error) {
    throw new SqliteRestoreCorruptError(
      target,
      `SQLite cannot read the image: ${(error as Error).message}`,
      { cause: error },
    );
  }
  if (answer !== 'ok')
    throw new SqliteRestoreCorruptError(target, `PRAGMA integrity_check answered: ${answer}`);
}

/** `PRAGMA integrity_check` on a closed database file: `ok` or SQLite's first complaints. */
export function integrityCheck(path: string): string {
  const database = new DatabaseSync(path);
  try {
    const rows = database.prepare('PRAGMA integrity_check').all() as { integrity_check: string }[];
    return rows.map((row) => row.integrity_check).join('; ');
  } finally {
    // Closing the only connection checkpoints and removes the -wal it created.
    database.close();
  }
}

async function syncDirectory(path: string): Promise<void> {
  const directory = await open(path, 'r');
  try {
    await directory.sync();
  } catch {
    // Some filesystems refuse fsync on a directory; the rename is still atomic.
  } finally {
    await directory.close();
  }
}
