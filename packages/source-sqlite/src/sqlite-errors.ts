/**
 * Typed errors of the SQLite source and restore. Same shape as `@x/store`'s:
 * a `code`, a `cause`, a `Symbol.for` marker and `static isInstance`, so a
 * check survives two copies of the package.
 */
import { errorMarker, hasErrorMarker, markError } from '@x/store';
import type { PageHashMismatch } from './recorded-page-hashes.ts';
import { sqliteSidecarFiles } from './sidecar-files.ts';

export type SqliteBackupErrorCode =
  | 'SQLITE_BACKUP_ERROR'
  | 'SQLITE_NOT_WAL'
  | 'SQLITE_DATABASE_MISSING'
  | 'SQLITE_DATABASE_REPLACED'
  | 'SQLITE_DATABASE_UNAVAILABLE'
  | 'SQLITE_WAL_RESTARTED_UNDERNEATH'
  | 'SQLITE_RESTORE_CORRUPT'
  | SqliteOpenRefusal
  | SqliteCaptureStop
  | SqliteRestoreRefusal;

function markerOf(name: string): symbol {
  return errorMarker('x.backup-worker.sqlite.error', name);
}

/** Gives `error` the name of its class and that class's marker (each class above it adds its own). */
function named(error: SqliteBackupError, name: string): void {
  error.name = name;
  markError(error, markerOf(name));
}

/** The `isInstance` of the class named `name`: true for its errors made by any copy of the package. */
function isMarked<T>(name: string): (value: unknown) => value is T {
  const marker = markerOf(name);
  return (value): value is T => hasErrorMarker(value, marker);
}

/** Base class of every SQLite source and restore error. */
export class SqliteBackupError extends Error {
  static isInstance = isMarked<SqliteBackupError>('SqliteBackupError');

  /** Whether the same call, made again later, may succeed with nothing else changed. */
  get retryable(): boolean {
    return false;
  }

  readonly code: SqliteBackupErrorCode;
  /** The database file the error is about. */
  readonly path: string;

  constructor(
    message: string,
    path: string,
    options: { cause?: unknown } = {},
    code: SqliteBackupErrorCode = 'SQLITE_BACKUP_ERROR',
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    named(this, 'SqliteBackupError');
    this.code = code;
    this.path = path;
  }
}

/**
 * The database is not in WAL mode. backupd never switches it: switching
 * needs every other connection closed and changes how the application runs.
 */
export class SqliteNotWalError extends SqliteBackupError {
  static override isInstance = isMarked<SqliteNotWalError>('SqliteNotWalError');

  readonly journalMode: string;

  constructor(path: string, journalMode: string) {
    super(
      `${path} uses journal_mode=${journalMode}; backupd needs WAL mode and does not change it. ` +
        'Switch once, with no other connection open: sqlite3 <db> "PRAGMA journal_mode=WAL;" ' +
        '(the setting is stored in the database file and persists).',
      path,
      {},
      'SQLITE_NOT_WAL',
    );
    named(this, 'SqliteNotWalError');
    this.journalMode = journalMode;
  }
}

/**
 * No file at the database path. backupd never creates one: an empty database
 * it made would be backed up in place of the application's.
 */
export class SqliteDatabaseMissingError extends SqliteBackupError {
  static override isInstance = isMarked<SqliteDatabaseMissingError>('SqliteDatabaseMissingError');

  override get retryable(): boolean {
    return true;
  }

  constructor(path: string, options: { cause?: unknown } = {}) {
    super(
      `${path} does not exist; backupd backs up an existing database and never creates one ` +
        '(check the path, and that the application has created its database)',
      path,
      options,
      'SQLITE_DATABASE_MISSING',
    );
    named(this, 'SqliteDatabaseMissingError');
  }
}

/**
 * The file at the database path is not the one backupd opened (another inode):
 * it was replaced, e.g. by a restore or a copy. backupd's connections still
 * see the old file; it must reopen and start a new generation.
 */
export class SqliteDatabaseReplacedError extends SqliteBackupError {
  static override isInstance = isMarked<SqliteDatabaseReplacedError>('SqliteDatabaseReplacedError');

  override get retryable(): boolean {
    return true;
  }

  constructor(path: string, detail: string) {
    super(
      `${path} was replaced underneath backupd (${detail}); reopen it to start a new generation`,
      path,
      {},
      'SQLITE_DATABASE_REPLACED',
    );
    named(this, 'SqliteDatabaseReplacedError');
  }
}

/**
 * The database file was replaced, and what is at the path now cannot be
 * opened (`cause`: missing, not a SQLite database, not in WAL mode, ...).
 * The source closed the tap of the old file and captures nothing until a
 * SQLite database in WAL mode is back at the path; it tries again at each
 * call of the worker's, and the first that opens starts a new generation.
 */
export class SqliteDatabaseUnavailableError extends SqliteBackupError {
  static override isInstance = isMarked<SqliteDatabaseUnavailableError>(
    'SqliteDatabaseUnavailableError',
  );

  override get retryable(): boolean {
    return true;
  }

  constructor(path: string, options: { cause?: unknown } = {}) {
    const why = options.cause instanceof Error ? `: ${options.cause.message}` : '';
    super(
      `${path} was replaced and cannot be opened again${why}; nothing is captured until a ` +
        'SQLite database in WAL mode is back at the path (a new generation then starts)',
      path,
      options,
      'SQLITE_DATABASE_UNAVAILABLE',
    );
    named(this, 'SqliteDatabaseUnavailableError');
  }
}

/**
 * The WAL was restarted in a way SQLite's own restart cannot explain (its
 * header's checkpoint sequence and salt did not advance together, e.g. the
 * `-wal` file was deleted or copied over), so frames may have been lost
 * before they were captured. The generation ends; a new one starts from a
 * fresh snapshot.
 */
export class SqliteWalRestartedUnderneathError extends SqliteBackupError {
  static override isInstance = isMarked<SqliteWalRestartedUnderneathError>(
    'SqliteWalRestartedUnderneathError',
  );

  override get retryable(): boolean {
    return true;
  }

  constructor(path: string, detail: string, options: { cause?: unknown; message?: string } = {}) {
    super(
      options.message ??
        `${path}-wal was restarted underneath backupd (${detail}); starting a new generation`,
      path,
      options,
      'SQLITE_WAL_RESTARTED_UNDERNEATH',
    );
    named(this, 'SqliteWalRestartedUnderneathError');
  }
}

/**
 * A WAL restart of the tap's could not begin its read transaction again
 * (`cause` says why); it released the write lock all the same, so the
 * application is never left blocked. Without a reader held for that moment,
 * the application's checkpoints may have copied, and a restart overwritten,
 * frames not captured yet: continuity is not proven, so, like a WAL
 * restarted underneath, the generation ends. The tap refuses to capture
 * until `startGeneration`.
 */
export class SqliteReaderLostError extends SqliteWalRestartedUnderneathError {
  static override isInstance = isMarked<SqliteReaderLostError>('SqliteReaderLostError');

  constructor(path: string, options: { cause?: unknown } = {}) {
    const why = options.cause instanceof Error ? `: ${options.cause.message}` : '';
    super(path, 'the read transaction could not be begun again', {
      ...options,
      message:
        `backupd's read transaction on ${path} could not be begun again after a WAL restart${why}; ` +
        'the write lock was released; starting a new generation',
    });
    named(this, 'SqliteReaderLostError');
  }
}

/** The restored image fails a check (record framing, page size, `PRAGMA integrity_check`). Nothing is left at the target. */
export class SqliteRestoreCorruptError extends SqliteBackupError {
  static override isInstance = isMarked<SqliteRestoreCorruptError>('SqliteRestoreCorruptError');

  /** Set when a page rebuilt from a patch is not the page its record captured. */
  readonly pageHash: PageHashMismatch | undefined;

  constructor(
    path: string,
    detail: string,
    options: { cause?: unknown; pageHash?: PageHashMismatch } = {},
  ) {
    super(
      `restore of ${path} failed verification: ${detail}`,
      path,
      options,
      'SQLITE_RESTORE_CORRUPT',
    );
    named(this, 'SqliteRestoreCorruptError');
    this.pageHash = options.pageHash;
  }
}

/** `action()`, with what it throws as a {@link SqliteRestoreCorruptError} about `path`. */
export function corruptAs<T>(path: string, action: () => T): T {
  try {
    return action();
  } catch (error) {
    throw new SqliteRestoreCorruptError(path, (error as Error).message, { cause: error });
  }
}

/** Why a database path cannot be backed up as it is (`code`). */
export type SqliteOpenRefusal =
  | 'SQLITE_NOT_A_FILE'
  | 'SQLITE_NOT_A_DATABASE'
  | 'SQLITE_DATABASE_UNREADABLE'
  | 'SQLITE_READ_ONLY_LOCATION';

/**
 * The path cannot be backed up as it is: not a regular file, not a SQLite
 * database, a database SQLite cannot read, or a location backupd cannot
 * write its files in. `code` says which; the path, the file or the mount
 * must change first.
 */
export class SqliteOpenRefusedError extends SqliteBackupError {
  static override isInstance = isMarked<SqliteOpenRefusedError>('SqliteOpenRefusedError');

  declare readonly code: SqliteOpenRefusal;
  /** With `SQLITE_NOT_A_FILE`: what the path is instead (`directory`, `socket`, …). */
  readonly kind: string | undefined;
  /** With `SQLITE_READ_ONLY_LOCATION`: what could not be written. */
  readonly location: string | undefined;

  private constructor(
    code: SqliteOpenRefusal,
    message: string,
    path: string,
    facts: { cause?: unknown; kind?: string; location?: string } = {},
  ) {
    super(message, path, facts, code);
    named(this, 'SqliteOpenRefusedError');
    this.kind = facts.kind;
    this.location = facts.location;
  }

  static notAFile(path: string, kind: string): SqliteOpenRefusedError {
    return new SqliteOpenRefusedError(
      'SQLITE_NOT_A_FILE',
      `${path} is a ${kind}, not a database file; give the path of the SQLite database file itself`,
      path,
      { kind },
    );
  }

  static notADatabase(path: string, detail: string): SqliteOpenRefusedError {
    return new SqliteOpenRefusedError(
      'SQLITE_NOT_A_DATABASE',
      `${path} is not a SQLite database (${detail}); check the path`,
      path,
    );
  }

  static unreadable(path: string, detail: string, cause?: unknown): SqliteOpenRefusedError {
    return new SqliteOpenRefusedError(
      'SQLITE_DATABASE_UNREADABLE',
      `${path} looks like a SQLite database but SQLite cannot read it (${detail}): ` +
        'its header or schema is corrupt; nothing is backed up until it is repaired or restored',
      path,
      { cause },
    );
  }

  static readOnlyLocation(path: string, location: string, cause?: unknown): SqliteOpenRefusedError {
    const errno = (cause as NodeJS.ErrnoException | undefined)?.code;
    return new SqliteOpenRefusedError(
      'SQLITE_READ_ONLY_LOCATION',
      `${path}: cannot write ${location}${errno === undefined ? '' : ` (${errno})`}; backupd keeps ` +
        `its directory ${sqliteSidecarFiles(path).directory} and SQLite's ${path}-shm beside the ` +
        'database and needs that directory writable (not a read-only filesystem or mount)',
      path,
      { cause, location },
    );
  }
}

/** Why capture stopped for good (`code`). */
export type SqliteCaptureStop = 'SQLITE_DATABASE_TRUNCATED' | 'SQLITE_CORRUPT_WAL_FRAME';

/**
 * Capture stopped: the database file was truncated underneath it, or a
 * committed WAL frame fails its checksum (every commit before it was kept;
 * reported again at every capture, never skipped). `code` says which.
 */
export class SqliteCaptureStoppedError extends SqliteBackupError {
  static override isInstance = isMarked<SqliteCaptureStoppedError>('SqliteCaptureStoppedError');

  declare readonly code: SqliteCaptureStop;
  /** With `SQLITE_DATABASE_TRUNCATED`: the file's size and the size its pages need. */
  readonly fileBytes: number | undefined;
  readonly expectedBytes: number | undefined;
  /** With `SQLITE_CORRUPT_WAL_FRAME`: the frame, its offset, and the last valid commit of the generation. */
  readonly frame: number | undefined;
  readonly walOffset: number | undefined;
  readonly lastValidCommit: number | undefined;

  private constructor(
    code: SqliteCaptureStop,
    message: string,
    path: string,
    facts: {
      fileBytes?: number;
      expectedBytes?: number;
      frame?: number;
      walOffset?: number;
      lastValidCommit?: number;
    },
  ) {
    super(message, path, {}, code);
    named(this, 'SqliteCaptureStoppedError');
    this.fileBytes = facts.fileBytes;
    this.expectedBytes = facts.expectedBytes;
    this.frame = facts.frame;
    this.walOffset = facts.walOffset;
    this.lastValidCommit = facts.lastValidCommit;
  }

  static truncated(
    path: string,
    fileBytes: number,
    expectedBytes: number,
  ): SqliteCaptureStoppedError {
    return new SqliteCaptureStoppedError(
      'SQLITE_DATABASE_TRUNCATED',
      `${path} is ${fileBytes} bytes but the database needs ${expectedBytes}: it was truncated underneath backupd; nothing more is shipped`,
      path,
      { fileBytes, expectedBytes },
    );
  }

  static corruptWalFrame(
    path: string,
    frame: number,
    walOffset: number,
    lastValidCommit: number,
  ): SqliteCaptureStoppedError {
    return new SqliteCaptureStoppedError(
      'SQLITE_CORRUPT_WAL_FRAME',
      `${path}-wal: committed frame ${frame} (offset ${walOffset}) fails its checksum; ` +
        `capture stopped at the last valid commit (${lastValidCommit} in this generation)`,
      path,
      { frame, walOffset, lastValidCommit },
    );
  }
}

/** Why a SQLite restore did not start (`code`). */
export type SqliteRestoreRefusal =
  | 'SQLITE_RESTORE_TARGET_EXISTS'
  | 'SQLITE_RESTORE_POINT_UNAVAILABLE';

/**
 * A SQLite restore refused before writing anything: the target exists (and
 * `force` was not given), or the restore point cannot be restored as asked.
 */
export class SqliteRestoreRefusedError extends SqliteBackupError {
  static override isInstance = isMarked<SqliteRestoreRefusedError>('SqliteRestoreRefusedError');

  declare readonly code: SqliteRestoreRefusal;

  private constructor(code: SqliteRestoreRefusal, message: string, path: string) {
    super(message, path, {}, code);
    named(this, 'SqliteRestoreRefusedError');
  }

  static targetExists(path: string): SqliteRestoreRefusedError {
    return new SqliteRestoreRefusedError(
      'SQLITE_RESTORE_TARGET_EXISTS',
      `${path} (or its -wal/-shm) already exists; restore refuses to overwrite it unless forced`,
      path,
    );
  }

  static pointUnavailable(path: string, detail: string): SqliteRestoreRefusedError {
    return new SqliteRestoreRefusedError(
      'SQLITE_RESTORE_POINT_UNAVAILABLE',
      `cannot restore ${path}: ${detail}`,
      path,
    );
  }
}
