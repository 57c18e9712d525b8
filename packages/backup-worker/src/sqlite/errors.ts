/**
 * Typed errors of the SQLite source and restore. Same shape as `@x/store`'s:
 * a `code`, a `cause`, a `Symbol.for` marker and `static isInstance`, so a
 * check survives two copies of the package.
 */

const MARKER_PREFIX = 'x.backup-worker.sqlite.error';

function markerOf(name: string): symbol {
  return Symbol.for(`${MARKER_PREFIX}.${name}`);
}

function hasMarker(value: unknown, marker: symbol): boolean {
  return (
    typeof value === 'object' &&
    value !== null &&
    (value as Record<symbol, unknown>)[marker] === true
  );
}

function mark(target: object, marker: symbol): void {
  (target as Record<symbol, boolean>)[marker] = true;
}

export type SqliteBackupErrorCode =
  | 'SQLITE_BACKUP_ERROR'
  | 'SQLITE_NOT_WAL'
  | 'SQLITE_DATABASE_REPLACED'
  | 'SQLITE_DATABASE_TRUNCATED'
  | 'SQLITE_CORRUPT_WAL_FRAME'
  | 'SQLITE_WAL_RESTARTED_UNDERNEATH'
  | 'SQLITE_RESTORE_TARGET_EXISTS'
  | 'SQLITE_RESTORE_POINT_UNAVAILABLE'
  | 'SQLITE_RESTORE_CORRUPT';

const BASE_MARKER = markerOf('SqliteBackupError');

/** Base class of every SQLite source and restore error. */
export class SqliteBackupError extends Error {
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
    mark(this, BASE_MARKER);
  }

  static isInstance(value: unknown): value is SqliteBackupError {
    return hasMarker(value, BASE_MARKER);
  }
}

const NOT_WAL_MARKER = markerOf('SqliteNotWalError');

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
    mark(this, NOT_WAL_MARKER);
  }

  static override isInstance(value: unknown): value is SqliteNotWalError {
    return hasMarker(value, NOT_WAL_MARKER);
  }
}

const REPLACED_MARKER = markerOf('SqliteDatabaseReplacedError');

/**
 * The file at the database path is not the one backupd opened (another inode):
 * it was replaced, e.g. by a restore or a copy. backupd's connections still
 * see the old file; it must reopen and start a new generation.
 */
export class SqliteDatabaseReplacedError extends SqliteBackupError {
  constructor(path: string, detail: string) {
    super(
      `${path} was replaced underneath backupd (${detail}); reopen it to start a new generation`,
      path,
      {},
      'SQLITE_DATABASE_REPLACED',
    );
    this.name = 'SqliteDatabaseReplacedError';
    mark(this, REPLACED_MARKER);
  }

  static override isInstance(value: unknown): value is SqliteDatabaseReplacedError {
    return hasMarker(value, REPLACED_MARKER);
  }
}

const TRUNCATED_MARKER = markerOf('SqliteDatabaseTruncatedError');

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
    mark(this, TRUNCATED_MARKER);
  }

  static override isInstance(value: unknown): value is SqliteDatabaseTruncatedError {
    return hasMarker(value, TRUNCATED_MARKER);
  }
}

const CORRUPT_MARKER = markerOf('SqliteCorruptWalFrameError');

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
    mark(this, CORRUPT_MARKER);
  }

  static override isInstance(value: unknown): value is SqliteCorruptWalFrameError {
    return hasMarker(value, CORRUPT_MARKER);
  }
}

const RESTARTED_MARKER = markerOf('SqliteWalRestartedUnderneathError');

/**
 * The WAL was restarted in a way SQLite's own restart cannot explain (its
 * header's checkpoint sequence and salt did not advance together, e.g. the
 * `-wal` file was deleted or copied over), so frames may have been lost
 * before they were captured. The generation ends; a new one starts from a
 * fresh snapshot.
 */
export class SqliteWalRestartedUnderneathError extends SqliteBackupError {
  constructor(path: string, detail: string) {
    super(
      `${path}-wal was restarted underneath backupd (${detail}); starting a new generation`,
      path,
      {},
      'SQLITE_WAL_RESTARTED_UNDERNEATH',
    );
    this.name = 'SqliteWalRestartedUnderneathError';
    mark(this, RESTARTED_MARKER);
  }

  static override isInstance(value: unknown): value is SqliteWalRestartedUnderneathError {
    return hasMarker(value, RESTARTED_MARKER);
  }
}

const TARGET_EXISTS_MARKER = markerOf('SqliteRestoreTargetExistsError');

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
    mark(this, TARGET_EXISTS_MARKER);
  }

  static override isInstance(value: unknown): value is SqliteRestoreTargetExistsError {
    return hasMarker(value, TARGET_EXISTS_MARKER);
  }
}

const UNAVAILABLE_MARKER = markerOf('SqliteRestorePointUnavailableError');

/** The requested commit or time is not covered by the restore point given. */
export class SqliteRestorePointUnavailableError extends SqliteBackupError {
  constructor(path: string, detail: string) {
    super(`cannot restore ${path}: ${detail}`, path, {}, 'SQLITE_RESTORE_POINT_UNAVAILABLE');
    this.name = 'SqliteRestorePointUnavailableError';
    mark(this, UNAVAILABLE_MARKER);
  }

  static override isInstance(value: unknown): value is SqliteRestorePointUnavailableError {
    return hasMarker(value, UNAVAILABLE_MARKER);
  }
}

const RESTORE_CORRUPT_MARKER = markerOf('SqliteRestoreCorruptError');

/** The restored image fails a check (record framing, page size, `PRAGMA integrity_check`). Nothing is left at the target. */
export class SqliteRestoreCorruptError extends SqliteBackupError {
  constructor(path: string, detail: string, options: { cause?: unknown } = {}) {
    super(
      `restore of ${path} failed verification: ${detail}`,
      path,
      options,
      'SQLITE_RESTORE_CORRUPT',
    );
    this.name = 'SqliteRestoreCorruptError';
    mark(this, RESTORE_CORRUPT_MARKER);
  }

  static override isInstance(value: unknown): value is SqliteRestoreCorruptError {
    return hasMarker(value, RESTORE_CORRUPT_MARKER);
  }
}
