/**
 * Typed errors of the SQLite source and restore. Same shape as `@x/store`'s:
 * a `code`, a `cause`, a `Symbol.for` marker and `static isInstance`, so a
 * check survives two copies of the package.
 */
import { errorMarker, hasErrorMarker, markError } from '@x/store';
import type { PageHashMismatch } from './recorded-page-hashes.ts';
import { sqliteSidecarFiles } from './sidecar-files.ts';

const MARKER_NAMESPACE = 'x.backup-worker.sqlite.error';

export type SqliteBackupErrorCode =
  | 'SQLITE_BACKUP_ERROR'
  | 'SQLITE_NOT_WAL'
  | 'SQLITE_DATABASE_MISSING'
  | 'SQLITE_NOT_A_FILE'
  | 'SQLITE_NOT_A_DATABASE'
  | 'SQLITE_DATABASE_UNREADABLE'
  | 'SQLITE_READ_ONLY_LOCATION'
  | 'SQLITE_DATABASE_REPLACED'
  | 'SQLITE_DATABASE_UNAVAILABLE'
  | 'SQLITE_DATABASE_TRUNCATED'
  | 'SQLITE_CORRUPT_WAL_FRAME'
  | 'SQLITE_WAL_RESTARTED_UNDERNEATH'
  | 'SQLITE_RESTORE_TARGET_EXISTS'
  | 'SQLITE_RESTORE_POINT_UNAVAILABLE'
  | 'SQLITE_RESTORE_CORRUPT';

const BASE_MARKER = errorMarker(MARKER_NAMESPACE, 'SqliteBackupError');

/** Base class of every SQLite source and restore error. */
export class SqliteBackupError extends Error {
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
    this.name = 'SqliteBackupError';
    this.code = code;
    this.path = path;
    markError(this, BASE_MARKER);
  }

  static isInstance(value: unknown): value is SqliteBackupError {
    return hasErrorMarker(value, BASE_MARKER);
  }
}

const NOT_WAL_MARKER = errorMarker(MARKER_NAMESPACE, 'SqliteNotWalError');

/**
 * The database is not in WAL mode. backupd never switches it: switching
 * needs every other connection closed and changes how the application runs.
 */
export class SqliteNotWalError extends SqliteBackupError {
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
    this.name = 'SqliteNotWalError';
    this.journalMode = journalMode;
    markError(this, NOT_WAL_MARKER);
  }

  static override isInstance(value: unknown): value is SqliteNotWalError {
    return hasErrorMarker(value, NOT_WAL_MARKER);
  }
}

const MISSING_MARKER = errorMarker(MARKER_NAMESPACE, 'SqliteDatabaseMissingError');

/**
 * No file at the database path. backupd never creates one: an empty database
 * it made would be backed up in place of the application's.
 */
export class SqliteDatabaseMissingError extends SqliteBackupError {
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
    this.name = 'SqliteDatabaseMissingError';
    markError(this, MISSING_MARKER);
  }

  static override isInstance(value: unknown): value is SqliteDatabaseMissingError {
    return hasErrorMarker(value, MISSING_MARKER);
  }
}

const NOT_A_FILE_MARKER = errorMarker(MARKER_NAMESPACE, 'SqliteNotAFileError');

/** The database path names something other than a regular file (a directory, a socket...). */
export class SqliteNotAFileError extends SqliteBackupError {
  /** What is there instead (`directory`, `socket`, ...). */
  readonly kind: string;

  constructor(path: string, kind: string) {
    super(
      `${path} is a ${kind}, not a database file; give the path of the SQLite database file itself`,
      path,
      {},
      'SQLITE_NOT_A_FILE',
    );
    this.name = 'SqliteNotAFileError';
    this.kind = kind;
    markError(this, NOT_A_FILE_MARKER);
  }

  static override isInstance(value: unknown): value is SqliteNotAFileError {
    return hasErrorMarker(value, NOT_A_FILE_MARKER);
  }
}

const NOT_A_DATABASE_MARKER = errorMarker(MARKER_NAMESPACE, 'SqliteNotADatabaseError');

/**
 * The file does not start with SQLite's header magic (`SQLite format 3\0`):
 * it is some other file (text, random bytes, an empty file), not a database.
 */
export class SqliteNotADatabaseError extends SqliteBackupError {
  constructor(path: string, detail: string) {
    super(
      `${path} is not a SQLite database (${detail}); check the path`,
      path,
      {},
      'SQLITE_NOT_A_DATABASE',
    );
    this.name = 'SqliteNotADatabaseError';
    markError(this, NOT_A_DATABASE_MARKER);
  }

  static override isInstance(value: unknown): value is SqliteNotADatabaseError {
    return hasErrorMarker(value, NOT_A_DATABASE_MARKER);
  }
}

const UNREADABLE_MARKER = errorMarker(MARKER_NAMESPACE, 'SqliteDatabaseUnreadableError');

/**
 * The file carries SQLite's magic but SQLite cannot read it (its header or
 * schema is corrupt: `SQLITE_NOTADB`, `SQLITE_CORRUPT`). Nothing is shipped;
 * restore the database from a backup or repair it first.
 */
export class SqliteDatabaseUnreadableError extends SqliteBackupError {
  constructor(path: string, detail: string, options: { cause?: unknown } = {}) {
    super(
      `${path} looks like a SQLite database but SQLite cannot read it (${detail}): ` +
        'its header or schema is corrupt; nothing is backed up until it is repaired or restored',
      path,
      options,
      'SQLITE_DATABASE_UNREADABLE',
    );
    this.name = 'SqliteDatabaseUnreadableError';
    markError(this, UNREADABLE_MARKER);
  }

  static override isInstance(value: unknown): value is SqliteDatabaseUnreadableError {
    return hasErrorMarker(value, UNREADABLE_MARKER);
  }
}

const READ_ONLY_MARKER = errorMarker(MARKER_NAMESPACE, 'SqliteReadOnlyLocationError');

/**
 * backupd cannot write the files it keeps beside the database (its sidecar
 * directory `.<db>-backupd/`, and SQLite's own `-shm`):
 * the directory or the file is on a read-only filesystem or not writable.
 */
export class SqliteReadOnlyLocationError extends SqliteBackupError {
  /** The file or directory that is not writable. */
  readonly location: string;

  constructor(path: string, location: string, options: { cause?: unknown } = {}) {
    const code = (options.cause as NodeJS.ErrnoException | undefined)?.code;
    super(
      `${path}: cannot write ${location}${code === undefined ? '' : ` (${code})`}; backupd keeps ` +
        `its directory ${sqliteSidecarFiles(path).directory} and SQLite's ${path}-shm beside the ` +
        'database and needs that directory writable (not a read-only filesystem or mount)',
      path,
      options,
      'SQLITE_READ_ONLY_LOCATION',
    );
    this.name = 'SqliteReadOnlyLocationError';
    this.location = location;
    markError(this, READ_ONLY_MARKER);
  }

  static override isInstance(value: unknown): value is SqliteReadOnlyLocationError {
    return hasErrorMarker(value, READ_ONLY_MARKER);
  }
}

const REPLACED_MARKER = errorMarker(MARKER_NAMESPACE, 'SqliteDatabaseReplacedError');

/**
 * The file at the database path is not the one backupd opened (another inode):
 * it was replaced, e.g. by a restore or a copy. backupd's connections still
 * see the old file; it must reopen and start a new generation.
 */
export class SqliteDatabaseReplacedError extends SqliteBackupError {
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
    this.name = 'SqliteDatabaseReplacedError';
    markError(this, REPLACED_MARKER);
  }

  static override isInstance(value: unknown): value is SqliteDatabaseReplacedError {
    return hasErrorMarker(value, REPLACED_MARKER);
  }
}

const UNAVAILABLE_AFTER_REPLACE_MARKER = errorMarker(
  MARKER_NAMESPACE,
  'SqliteDatabaseUnavailableError',
);

/**
 * The database file was replaced, and what is at the path now cannot be
 * opened (`cause`: missing, not a SQLite database, not in WAL mode, ...).
 * The source closed the tap of the old file and captures nothing until a
 * SQLite database in WAL mode is back at the path; it tries again at each
 * call of the worker's, and the first that opens starts a new generation.
 */
export class SqliteDatabaseUnavailableError extends SqliteBackupError {
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
    this.name = 'SqliteDatabaseUnavailableError';
    markError(this, UNAVAILABLE_AFTER_REPLACE_MARKER);
  }

  static override isInstance(value: unknown): value is SqliteDatabaseUnavailableError {
    return hasErrorMarker(value, UNAVAILABLE_AFTER_REPLACE_MARKER);
  }
}

const TRUNCATED_MARKER = errorMarker(MARKER_NAMESPACE, 'SqliteDatabaseTruncatedError');

/**
 * The database file is shorter than the pages the database says it has
 * (someone truncated it). Nothing more is captured: shipping a damaged
 * database would put a damaged restore point in the bucket.
 */
export class SqliteDatabaseTruncatedError extends SqliteBackupError {
  readonly fileBytes: number;
  readonly expectedBytes: number;

  constructor(path: string, fileBytes: number, expectedBytes: number) {
    super(
      `${path} is ${fileBytes} bytes but the database needs ${expectedBytes}: it was truncated underneath backupd; nothing more is shipped`,
      path,
      {},
      'SQLITE_DATABASE_TRUNCATED',
    );
    this.name = 'SqliteDatabaseTruncatedError';
    this.fileBytes = fileBytes;
    this.expectedBytes = expectedBytes;
    markError(this, TRUNCATED_MARKER);
  }

  static override isInstance(value: unknown): value is SqliteDatabaseTruncatedError {
    return hasErrorMarker(value, TRUNCATED_MARKER);
  }
}

const CORRUPT_MARKER = errorMarker(MARKER_NAMESPACE, 'SqliteCorruptWalFrameError');

/**
 * A committed frame of the WAL fails its checksum. Everything up to the last
 * valid commit before it was captured; nothing after it is.
 */
export class SqliteCorruptWalFrameError extends SqliteBackupError {
  /** 1-based index of the bad frame in its WAL cycle. */
  readonly frame: number;
  /** Byte offset of the bad frame in the WAL file. */
  readonly walOffset: number;
  /** Commits captured in this generation up to and including the last valid one. */
  readonly lastValidCommit: number;

  constructor(path: string, frame: number, walOffset: number, lastValidCommit: number) {
    super(
      `${path}-wal: committed frame ${frame} (offset ${walOffset}) fails its checksum; ` +
        `capture stopped at the last valid commit (${lastValidCommit} in this generation)`,
      path,
      {},
      'SQLITE_CORRUPT_WAL_FRAME',
    );
    this.name = 'SqliteCorruptWalFrameError';
    this.frame = frame;
    this.walOffset = walOffset;
    this.lastValidCommit = lastValidCommit;
    markError(this, CORRUPT_MARKER);
  }

  static override isInstance(value: unknown): value is SqliteCorruptWalFrameError {
    return hasErrorMarker(value, CORRUPT_MARKER);
  }
}

const RESTARTED_MARKER = errorMarker(MARKER_NAMESPACE, 'SqliteWalRestartedUnderneathError');

/**
 * The WAL was restarted in a way SQLite's own restart cannot explain (its
 * header's checkpoint sequence and salt did not advance together, e.g. the
 * `-wal` file was deleted or copied over), so frames may have been lost
 * before they were captured. The generation ends; a new one starts from a
 * fresh snapshot.
 */
export class SqliteWalRestartedUnderneathError extends SqliteBackupError {
  override get retryable(): boolean {
    return true;
  }

  constructor(path: string, detail: string, options: { cause?: unknown; message?: string } = {}) {
    super(
      options.message ??
        `${path}-wal was restarted underneath backupd (${detail}); starting a new generation`,
      path,
      options.cause === undefined ? {} : { cause: options.cause },
      'SQLITE_WAL_RESTARTED_UNDERNEATH',
    );
    this.name = 'SqliteWalRestartedUnderneathError';
    markError(this, RESTARTED_MARKER);
  }

  static override isInstance(value: unknown): value is SqliteWalRestartedUnderneathError {
    return hasErrorMarker(value, RESTARTED_MARKER);
  }
}

const READER_LOST_MARKER = errorMarker(MARKER_NAMESPACE, 'SqliteReaderLostError');

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
  constructor(path: string, options: { cause?: unknown } = {}) {
    const why = options.cause instanceof Error ? `: ${options.cause.message}` : '';
    super(path, 'the read transaction could not be begun again', {
      ...options,
      message:
        `backupd's read transaction on ${path} could not be begun again after a WAL restart${why}; ` +
        'the write lock was released; starting a new generation',
    });
    this.name = 'SqliteReaderLostError';
    markError(this, READER_LOST_MARKER);
  }

  static override isInstance(value: unknown): value is SqliteReaderLostError {
    return hasErrorMarker(value, READER_LOST_MARKER);
  }
}

const TARGET_EXISTS_MARKER = errorMarker(MARKER_NAMESPACE, 'SqliteRestoreTargetExistsError');

/** Restore refuses to overwrite an existing database (or its `-wal`) without `force`. */
export class SqliteRestoreTargetExistsError extends SqliteBackupError {
  constructor(path: string) {
    super(
      `${path} (or its -wal/-shm) already exists; restore refuses to overwrite it unless forced`,
      path,
      {},
      'SQLITE_RESTORE_TARGET_EXISTS',
    );
    this.name = 'SqliteRestoreTargetExistsError';
    markError(this, TARGET_EXISTS_MARKER);
  }

  static override isInstance(value: unknown): value is SqliteRestoreTargetExistsError {
    return hasErrorMarker(value, TARGET_EXISTS_MARKER);
  }
}

const UNAVAILABLE_MARKER = errorMarker(MARKER_NAMESPACE, 'SqliteRestorePointUnavailableError');

/** The requested commit or time is not covered by the restore point given. */
export class SqliteRestorePointUnavailableError extends SqliteBackupError {
  constructor(path: string, detail: string) {
    super(`cannot restore ${path}: ${detail}`, path, {}, 'SQLITE_RESTORE_POINT_UNAVAILABLE');
    this.name = 'SqliteRestorePointUnavailableError';
    markError(this, UNAVAILABLE_MARKER);
  }

  static override isInstance(value: unknown): value is SqliteRestorePointUnavailableError {
    return hasErrorMarker(value, UNAVAILABLE_MARKER);
  }
}

const RESTORE_CORRUPT_MARKER = errorMarker(MARKER_NAMESPACE, 'SqliteRestoreCorruptError');

/** The restored image fails a check (record framing, page size, `PRAGMA integrity_check`). Nothing is left at the target. */
export class SqliteRestoreCorruptError extends SqliteBackupError {
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
    this.name = 'SqliteRestoreCorruptError';
    this.pageHash = options.pageHash;
    markError(this, RESTORE_CORRUPT_MARKER);
  }

  static override isInstance(value: unknown): value is SqliteRestoreCorruptError {
    return hasErrorMarker(value, RESTORE_CORRUPT_MARKER);
  }
}
