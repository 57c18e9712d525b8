/**
 * Opening the database for the tap: what is at the path is checked before
 * any SQLite connection opens it, so each failure names its cause with its
 * own error and a missing database file is never created; then the tap's
 * connections, which never checkpoint by themselves, and the check that the
 * database is in WAL mode (the tap never switches a journal mode).
 */
import { accessSync, constants, existsSync, readSync, type Stats, statSync } from 'node:fs';
import { dirname } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import type { SharedDescriptor } from './quiet-descriptors.ts';
import { sqliteSidecarFiles } from './sidecar-files.ts';
import {
  SqliteDatabaseMissingError,
  SqliteNotWalError,
  SqliteOpenRefusedError,
} from './sqlite-errors.ts';

/** The first 16 bytes of every SQLite database file. */
const SQLITE_HEADER_MAGIC = Buffer.from('SQLite format 3\0', 'latin1');
/** SQLite's result codes for a file it cannot read as a database. */
const SQLITE_CORRUPT = 11;
const SQLITE_NOTADB = 26;

function kindOf(stat: Stats): string {
  if (stat.isDirectory()) return 'directory';
  if (stat.isSocket()) return 'socket';
  if (stat.isFIFO()) return 'named pipe';
  if (stat.isCharacterDevice() || stat.isBlockDevice()) return 'device';
  return 'special file';
}

/**
 * Checks what is at `path` before any SQLite connection opens it, so each
 * failure names its cause and a missing path is never created (opening a
 * connection on a missing path creates an empty database):
 * missing, not a regular file, not SQLite's header magic, and a location
 * where the files kept beside the database cannot be written. Returns the
 * descriptor `acquire` gave, which the header was read through (given back
 * when a check fails). A header that
 * carries the magic but is corrupt is SQLite's to find (see
 * {@link unreadableOr}).
 */
export function checkDatabaseFile(
  path: string,
  acquire: (path: string) => SharedDescriptor,
): SharedDescriptor {
  const stat = missingAs(path, () => statSync(path));
  if (!stat.isFile()) throw SqliteOpenRefusedError.notAFile(path, kindOf(stat));
  // Through a descriptor the tap keeps, never one opened and closed here:
  // that close would drop this process's other connections' locks on the file.
  const database = missingAs(path, () => acquire(path));
  try {
    checkHeaderAndLocation(path, database.fd);
  } catch (error) {
    database.release();
    throw error;
  }
  return database;
}

/** `action()`, with a missing file (`ENOENT`) as {@link SqliteDatabaseMissingError}. */
function missingAs<T>(path: string, action: () => T): T {
  try {
    return action();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT')
      throw new SqliteDatabaseMissingError(path, { cause: error });
    throw error;
  }
}

function checkHeaderAndLocation(path: string, fd: number): void {
  const header = Buffer.alloc(SQLITE_HEADER_MAGIC.length);
  const read = readSync(fd, header, 0, header.length, 0);
  if (read === 0) throw SqliteOpenRefusedError.notADatabase(path, 'the file is empty');
  if (read < header.length || !header.equals(SQLITE_HEADER_MAGIC))
    throw SqliteOpenRefusedError.notADatabase(
      path,
      'its first 16 bytes are not the SQLite header "SQLite format 3\\0"',
    );
  // access(2) answers EROFS for a read-only filesystem even to root.
  const writable = (location: string) => {
    try {
      accessSync(location, constants.W_OK);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') return;
      if (code === 'EROFS' || code === 'EACCES' || code === 'EPERM')
        throw SqliteOpenRefusedError.readOnlyLocation(path, location, error);
      throw error;
    }
  };
  writable(dirname(path));
  writable(path);
  const sidecars = sqliteSidecarFiles(path).directory;
  writable(sidecars);
  if (existsSync(sidecars) && !statSync(sidecars).isDirectory())
    throw SqliteOpenRefusedError.readOnlyLocation(
      path,
      sidecars,
      Object.assign(new Error(`${sidecars} is not a directory`), { code: 'ENOTDIR' }),
    );
  writable(`${path}-shm`);
}

/** SQLite's "not a database" / "corrupt" as `SqliteOpenRefusedError` (`SQLITE_DATABASE_UNREADABLE`); anything else as it is. */
function unreadableOr(path: string, error: unknown): unknown {
  const errcode = (error as { errcode?: unknown }).errcode;
  const primary = typeof errcode === 'number' ? errcode & 0xff : null;
  if (primary === SQLITE_NOTADB || primary === SQLITE_CORRUPT)
    return SqliteOpenRefusedError.unreadable(path, (error as Error).message, error);
  return error;
}

/** A connection of the tap's: it never checkpoints by itself. */
export function openTapConnection(path: string, timeout: number): DatabaseSync {
  const connection = new DatabaseSync(path, { timeout });
  try {
    // The tap's connections never checkpoint by themselves.
    connection.exec('PRAGMA wal_autocheckpoint=0');
  } catch (error) {
    connection.close();
    throw unreadableOr(path, error);
  }
  return connection;
}

/**
 * The tap's writer connection (it only ever takes the write lock, never
 * writes), once the database proved to be in WAL mode.
 * @throws SqliteOpenRefusedError (SQLITE_DATABASE_UNREADABLE) when SQLite cannot read its header or schema.
 * @throws SqliteNotWalError when it is a valid database in another journal mode.
 */
export function openWriterConnection(path: string, busyTimeoutMs: number): DatabaseSync {
  const writer = openTapConnection(path, busyTimeoutMs);
  let mode: string;
  try {
    // Read the schema first: `PRAGMA journal_mode` alone answers the
    // connection's default ("delete") without reading the file, so a
    // corrupt header would pass for a database in another journal mode.
    writer.prepare('PRAGMA schema_version').get();
    const row = writer.prepare('PRAGMA journal_mode').get() as { journal_mode: string };
    mode = String(row.journal_mode).toLowerCase();
  } catch (error) {
    writer.close();
    throw unreadableOr(path, error);
  }
  if (mode !== 'wal') {
    writer.close();
    throw new SqliteNotWalError(path, mode);
  }
  return writer;
}
