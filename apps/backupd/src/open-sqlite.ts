/**
 * SQLite sources for the daemon, with each database's checkpoint settings.
 * At start only the database header is read, so a missing or non-WAL
 * database fails `replicate` at once; the source itself (its pinned read,
 * its checkpoints, its state file) is opened by the worker only while this
 * instance holds the bucket lease, so a standby never counts commits of its
 * own nor overwrites the holder's state file.
 */
import { closeSync, openSync, readSync } from 'node:fs';
import {
  SqliteDatabaseMissingError,
  SqliteNotWalError,
  SqliteSource,
  type SqliteSourceOptions,
} from '@x/source-sqlite';
import type { BackupdConfig } from './config.ts';
import type { SourceFactory } from './daemon.ts';

/**
 * What the file at `path` is, read-only (it never creates the file): missing,
 * not (yet) a SQLite database in WAL mode (too short, another header, or
 * another journal mode), or a WAL database. Byte offsets 18 and 19 of a
 * SQLite header are the file format versions, both 2 in WAL mode: the
 * `journal_mode=WAL` setting as the file stores it.
 */
export function sqliteFileState(path: string): 'missing' | 'not-wal' | 'wal' {
  let descriptor: number;
  try {
    descriptor = openSync(path, 'r');
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ENOENT' ? 'missing' : 'not-wal';
  }
  try {
    const header = Buffer.alloc(100);
    const read = readSync(descriptor, header, 0, 100, 0);
    return read === 100 &&
      header.toString('latin1', 0, 16) === 'SQLite format 3\u0000' &&
      header[18] === 2 &&
      header[19] === 2
      ? 'wal'
      : 'not-wal';
  } finally {
    closeSync(descriptor);
  }
}

/** Whether `path` is a SQLite database in WAL mode ({@link sqliteFileState}). */
export function isWalDatabase(path: string): boolean {
  return sqliteFileState(path) === 'wal';
}

/**
 * Refuses a database that is missing or not in WAL mode, reading only its
 * header (it never creates the file).
 * @throws SqliteDatabaseMissingError | SqliteNotWalError
 */
export function assertWalDatabase(path: string): void {
  const state = sqliteFileState(path);
  if (state === 'missing') throw new SqliteDatabaseMissingError(path);
  if (state === 'not-wal') throw new SqliteNotWalError(path, 'delete');
}

/**
 * Polls `path` until it is a SQLite database in WAL mode (read-only: never
 * creates it). Resolves true then, or false once `gaveUp()` says to stop
 * waiting (checked after a last look at the file).
 */
export async function waitForWalDatabase(
  path: string,
  options: { readonly gaveUp: () => boolean; readonly intervalMs?: number },
): Promise<boolean> {
  for (;;) {
    const stop = options.gaveUp();
    if (isWalDatabase(path)) return true;
    if (stop) return false;
    await new Promise((resolve) => setTimeout(resolve, options.intervalMs ?? 100));
  }
}

export function sqliteSourceFactory(_config: BackupdConfig): SourceFactory {
  return async (database) => {
    // Checked here so `replicate` on a database that is not in WAL mode (or
    // does not exist) fails at start, as opening the source would, without
    // opening it (and without creating an empty file at a mistyped path).
    assertWalDatabase(database.path);
    const options: SqliteSourceOptions = {
      path: database.path,
      passiveCheckpointPages: database.checkpoint.passivePages,
      truncateCheckpointPages: database.checkpoint.truncatePages,
      holdCheckpointLock: database.checkpoint.holdLock,
    };
    // Opened by the worker once it holds the lease (see the module comment).
    return { openSource: async () => SqliteSource.open(options) };
  };
}
