/**
 * Publishing a new state of a followed database to readers of its file.
 * The target is kept as a rollback-journal database; a new state goes in
 * under SQLite's own EXCLUSIVE lock (taken through `node:sqlite`), with a
 * SQLite-format rollback journal of every page it changes written and synced
 * first, so a reader never sees a torn state and a kill part way leaves a
 * hot journal that the next read-write open rolls back. Why this design:
 * docs/decisions/2026-12-07-follow-publish.md.
 */
import { randomBytes } from 'node:crypto';
import {
  closeSync,
  copyFileSync,
  fstatSync,
  fsyncSync,
  ftruncateSync,
  openSync,
  readSync,
  renameSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { dirname } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { FollowError } from './follow-errors.ts';

/** How page 1's header is written: kept a rollback database for readers, or exactly as restored (WAL mode, for `replicate`). */
export type PublishHeader = 'rollback' | 'as-restored';

export interface PublishOptions {
  /** How long to wait for readers to finish their read transactions (ms). Default 5000. */
  readonly busyTimeoutMs?: number;
  readonly header?: PublishHeader;
  /** The change counter the target must have (the one this process wrote last): another means someone else wrote to it. */
  readonly expectedCounter?: number;
  /**
   * The only pages (1-based numbers) that may differ besides page 1 and
   * those past either end, when the caller knows them (it applied the
   * commits itself): only they are compared. Default: every page.
   */
  readonly mayDiffer?: ReadonlySet<number>;
}

export interface PublishResult {
  /** Pages of the target written (changed, added); page 1 always. */
  readonly pagesWritten: number;
  /** Pages of the target before, and after. */
  readonly pagesBefore: number;
  readonly pagesAfter: number;
  /** The change counter the target has now. */
  readonly counter: number;
}

const JOURNAL_MAGIC = Buffer.from('d9d505f920a163d7', 'hex');
/** The journal header's size: SQLite reads the sector size from the header, and records start there. */
const JOURNAL_SECTOR = 512;
/** Pages compared per read. */
const COMPARE_PAGES = 256;

/** The page size a database header states (bytes 16-17; 1 means 65,536). */
export function pageSizeOf(header: Uint8Array, path: string): number {
  const raw = header.byteLength >= 100 ? (header[16]! << 8) | header[17]! : 0;
  const size = raw === 1 ? 65536 : raw;
  if (
    Buffer.from(header.subarray(0, 16)).toString('latin1') !== 'SQLite format 3\0' ||
    size < 512 ||
    (size & (size - 1)) !== 0
  )
    throw new FollowError(
      `${path} is not a SQLite database (no SQLite header with a valid page size)`,
      path,
      'FOLLOW_TARGET_INVALID',
    );
  return size;
}

/**
 * Creates the target from the staged database when it does not exist yet
 * (no reader can have a file open that does not exist): written beside it,
 * synced, renamed. Its header says rollback journal.
 */
export function createTarget(targetPath: string, stagedPath: string): PublishResult {
  const temporary = `${targetPath}.follow-${process.pid}.tmp`;
  copyFileSync(stagedPath, temporary);
  let pages: number;
  const fd = openSync(temporary, 'r+');
  try {
    const bytes = fstatSync(fd).size;
    const pageSize = pageSizeOf(readAt(fd, 0, Math.min(bytes, 100)), stagedPath);
    pages = Math.floor(bytes / pageSize);
    const page1 = readAt(fd, 0, pageSize);
    toRollbackHeader(page1, 1, pages);
    writeSync(fd, page1, 0, page1.byteLength, 0);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameAndSync(temporary, targetPath);
  return { pagesWritten: pages, pagesBefore: 0, pagesAfter: pages, counter: 1 };
}

/**
 * Makes the target hold the staged database's state: under SQLite's
 * EXCLUSIVE lock, the journal of every page to change (and of every page
 * cut off) written and synced, then the changed pages, then the journal
 * removed. With `header: 'rollback'` page 1 says rollback journal and
 * carries a change counter one above the target's, so every reader drops
 * its cache; with `'as-restored'` the file ends byte for byte the staged
 * one. @throws FollowError when the lock is not had within the busy
 * timeout (readers kept it) or the target is not a database.
 */
export function publishState(
  targetPath: string,
  stagedPath: string,
  options: PublishOptions = {},
): PublishResult {
  const connection = new DatabaseSync(targetPath, { timeout: options.busyTimeoutMs ?? 5000 });
  let fd: number | undefined;
  try {
    try {
      // A target left as restored (WAL mode) goes back to a rollback
      // journal first: only then does BEGIN EXCLUSIVE lock the file.
      const mode = connection.prepare('PRAGMA journal_mode').get() as { journal_mode: string };
      if (String(mode.journal_mode).toLowerCase() === 'wal')
        connection.exec('PRAGMA journal_mode = DELETE');
      connection.exec('BEGIN EXCLUSIVE');
    } catch (error) {
      throw new FollowError(
        `could not lock ${targetPath} to publish a new state: readers held it past the busy timeout (${messageOf(error)})`,
        targetPath,
        'FOLLOW_LOCKED',
        { cause: error },
      );
    }
    // This descriptor stays open until the lock is released: closing any
    // descriptor of a file drops every POSIX lock the process holds on it.
    fd = openSync(targetPath, 'r+');
    return writeUnderLock(fd, targetPath, stagedPath, options);
  } finally {
    try {
      connection.exec('COMMIT');
    } catch {
      // Not in a transaction: the lock was never had.
    }
    connection.close();
    if (fd !== undefined) closeSync(fd);
  }
}

function writeUnderLock(
  fd: number,
  targetPath: string,
  stagedPath: string,
  options: PublishOptions,
): PublishResult {
  const staged = openSync(stagedPath, 'r');
  try {
    const oldBytes = fstatSync(fd).size;
    const newBytes = fstatSync(staged).size;
    const newFirst = readAt(staged, 0, Math.min(newBytes, 65536));
    const newPageSize = pageSizeOf(newFirst, stagedPath);
    const oldFirst = readAt(fd, 0, Math.min(oldBytes, 65536));
    const oldPageSize = oldBytes === 0 ? newPageSize : pageSizeOf(oldFirst, targetPath);
    const oldPages = Math.floor(oldBytes / oldPageSize);
    const newPages = Math.floor(newBytes / newPageSize);
    const oldCounter = oldBytes >= 100 ? oldFirst.readUInt32BE(24) : 0;
    if (options.expectedCounter !== undefined && oldCounter !== options.expectedCounter)
      throw new FollowError(
        `${targetPath} was written by someone else while it was followed (change counter ${oldCounter}, ${options.expectedCounter} expected); a followed database is read-only`,
        targetPath,
        'FOLLOW_TARGET_CHANGED',
      );
    const page1 = readAt(staged, 0, newPageSize);
    if ((options.header ?? 'rollback') === 'rollback')
      toRollbackHeader(page1, (oldCounter + 1) >>> 0, newPages);
    const samePageSize = oldPageSize === newPageSize;
    // Another page size (a VACUUM that changed it): every page is new.
    const changed = !samePageSize
      ? allPages(oldPages)
      : options.mayDiffer === undefined
        ? changedPages(fd, staged, oldPages, newPages, newPageSize)
        : changedAmong(fd, staged, options.mayDiffer, oldPages, newPages, newPageSize);
    if (!changed.includes(0)) changed.unshift(0);
    writeJournal(`${targetPath}-journal`, fd, changed, oldPages, oldPageSize);
    let written = 0;
    const writePages = (first: number, count: number) => {
      const bytes = first === 0 ? page1 : readAt(staged, first * newPageSize, count * newPageSize);
      writeSync(fd, bytes, 0, bytes.byteLength, first * newPageSize);
      written += count;
    };
    if (samePageSize) {
      for (const page of changed) if (page < newPages) writePages(page, 1);
    } else writePages(0, 1);
    // Pages past the old end are new: the journal's original size cuts them off on a rollback.
    for (
      let page = samePageSize ? Math.max(oldPages, 1) : 1;
      page < newPages;
      page += COMPARE_PAGES
    )
      writePages(page, Math.min(COMPARE_PAGES, newPages - page));
    if (newBytes !== oldBytes) ftruncateSync(fd, newPages * newPageSize);
    fsyncSync(fd);
    unlinkSync(`${targetPath}-journal`);
    return {
      pagesWritten: written,
      pagesBefore: oldPages,
      pagesAfter: newPages,
      counter: page1.readUInt32BE(24),
    };
  } finally {
    closeSync(staged);
  }
}

/** Pages (0-based) of the old file that differ from the new, or that the new one cuts off. */
function changedPages(
  fd: number,
  staged: number,
  oldPages: number,
  newPages: number,
  pageSize: number,
): number[] {
  const changed: number[] = [];
  for (let first = 0; first < oldPages; first += COMPARE_PAGES) {
    const count = Math.min(COMPARE_PAGES, oldPages - first);
    const old = readAt(fd, first * pageSize, count * pageSize);
    const inNew = Math.max(0, Math.min(count, newPages - first));
    const now = readAt(staged, first * pageSize, inNew * pageSize);
    for (let index = 0; index < count; index += 1) {
      const start = index * pageSize;
      if (
        index >= inNew ||
        !old.subarray(start, start + pageSize).equals(now.subarray(start, start + pageSize))
      )
        changed.push(first + index);
    }
  }
  return changed;
}

/** {@link changedPages} over the pages of `candidates` (1-based) and those the new file cuts off. */
function changedAmong(
  fd: number,
  staged: number,
  candidates: ReadonlySet<number>,
  oldPages: number,
  newPages: number,
  pageSize: number,
): number[] {
  const changed: number[] = [];
  for (const page of [...candidates].map((number) => number - 1).sort((a, b) => a - b)) {
    if (page <= 0 || page >= Math.min(oldPages, newPages)) continue;
    const old = readAt(fd, page * pageSize, pageSize);
    if (!old.equals(readAt(staged, page * pageSize, pageSize))) changed.push(page);
  }
  for (let page = newPages; page < oldPages; page += 1) changed.push(page);
  return changed;
}

function allPages(count: number): number[] {
  return Array.from({ length: count }, (_, index) => index);
}

/** Writes and syncs a rollback journal holding the original bytes of `pages` of `fd`. */
function writeJournal(
  path: string,
  fd: number,
  pages: readonly number[],
  originalPages: number,
  pageSize: number,
): void {
  const nonce = randomBytes(4).readUInt32BE(0);
  const journaled = pages.filter((page) => page < originalPages);
  const journal = openSync(path, 'w', 0o644);
  try {
    const header = Buffer.alloc(JOURNAL_SECTOR);
    JOURNAL_MAGIC.copy(header, 0);
    header.writeUInt32BE(journaled.length, 8);
    header.writeUInt32BE(nonce, 12);
    header.writeUInt32BE(originalPages, 16);
    header.writeUInt32BE(JOURNAL_SECTOR, 20);
    header.writeUInt32BE(pageSize, 24);
    writeSync(journal, header);
    const record = Buffer.alloc(pageSize + 8);
    for (const page of journaled) {
      record.writeUInt32BE(page + 1, 0);
      const original = readAt(fd, page * pageSize, pageSize);
      original.copy(record, 4);
      record.writeUInt32BE(journalChecksum(nonce, original), pageSize + 4);
      writeSync(journal, record);
    }
    fsyncSync(journal);
  } finally {
    closeSync(journal);
  }
}

/** SQLite's journal record checksum: the nonce plus every 200th byte from the end of the page. */
function journalChecksum(nonce: number, page: Uint8Array): number {
  let sum = nonce;
  for (let index = page.byteLength - 200; index > 0; index -= 200) sum = (sum + page[index]!) >>> 0;
  return sum;
}

/** Page 1's header as a rollback-journal database's, with `counter` as change counter and its size valid. */
function toRollbackHeader(page1: Buffer, counter: number, pages: number): void {
  page1[18] = 1;
  page1[19] = 1;
  page1.writeUInt32BE(counter, 24);
  page1.writeUInt32BE(pages, 28);
  page1.writeUInt32BE(counter, 92);
}

function readAt(fd: number, position: number, length: number): Buffer {
  const bytes = Buffer.alloc(length);
  let done = 0;
  while (done < length) {
    const read = readSync(fd, bytes, done, length - done, position + done);
    if (read === 0) break;
    done += read;
  }
  return done === length ? bytes : bytes.subarray(0, done);
}

/** Renames `from` to `to` and syncs their directory, so the rename survives a crash. */
function renameAndSync(from: string, to: string): void {
  renameSync(from, to);
  const directory = openSync(dirname(to), 'r');
  try {
    fsyncSync(directory);
  } finally {
    closeSync(directory);
  }
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
