/**
 * The database file as the tap sees it while it runs: its identity (the
 * inode it opened), the check made before every capture that it is still
 * that file and no shorter than its pages outside the WAL need, and the
 * database size recorded in its header.
 */
import { statSync } from 'node:fs';
import { SqliteCaptureStoppedError, SqliteDatabaseReplacedError } from './sqlite-errors.ts';
import { readAt } from './wal-file.ts';

/** What {@link checkDatabaseUnchanged} compares the file at the path with. */
export interface ExpectedDatabaseFile {
  readonly path: string;
  /** The file the tap opened (its `fstat`). */
  readonly identity: { readonly dev: number; readonly ino: number };
  readonly pageSize: number;
  /** Database size in pages after the last captured commit. */
  readonly databasePages: number;
  /** Pages the current WAL cycle holds a committed version of. */
  readonly walPages: ReadonlySet<number>;
}

/**
 * @throws SqliteDatabaseReplacedError when another file (or none) is at the path.
 * @throws SqliteCaptureStoppedError (SQLITE_DATABASE_TRUNCATED) when it is shorter than its pages outside the WAL need.
 */
export function checkDatabaseUnchanged(expected: ExpectedDatabaseFile): void {
  const { path, identity, pageSize } = expected;
  let stat: ReturnType<typeof statSync>;
  try {
    stat = statSync(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT')
      throw new SqliteDatabaseReplacedError(path, 'the file is gone');
    throw error;
  }
  if (stat.ino !== identity.ino || stat.dev !== identity.dev)
    throw new SqliteDatabaseReplacedError(path, `inode ${identity.ino} became ${stat.ino}`);
  // Every page of the database that is not in the WAL must be in the file.
  // (Page 1 on disk may record more pages than the file has: a checkpoint
  // copies each page's newest frame only, so it can copy page 1 and leave a
  // new page for later. Hence no check against the on-disk header.)
  let needed = expected.databasePages;
  while (needed > 1 && expected.walPages.has(needed)) needed -= 1;
  const expectedBytes = Math.max(needed, 1) * pageSize;
  if (stat.size < expectedBytes || stat.size % pageSize !== 0)
    throw SqliteCaptureStoppedError.truncated(path, stat.size, expectedBytes);
}

/** Reads the database size from the file's header (page 1 on disk). */
export function databasePagesOnDisk(fd: number, pageSize: number, fileBytes: number): number {
  const header = readAt(fd, 0, 100);
  if (header.byteLength < 100) return 0;
  const view = new DataView(header.buffer, header.byteOffset, 100);
  const inHeader = view.getUint32(28);
  const valid = inHeader !== 0 && view.getUint32(24) === view.getUint32(92);
  return valid ? inHeader : Math.floor(fileBytes / pageSize);
}
