/**
 * Typed errors of the WAL formats. Each class carries a `Symbol.for` marker
 * and a `static isInstance`, so a check survives two installed copies.
 */

/** Whether `value` carries `marker`: an error class's check that survives two installed copies. */
export function hasMarker(value: unknown, marker: symbol): boolean {
  return (
    typeof value === 'object' &&
    value !== null &&
    (value as Record<symbol, unknown>)[marker] === true
  );
}

const SQLITE_WAL_HEADER_ERROR_MARKER = Symbol.for('x.wal-segment.error.SqliteWalHeaderError');

/**
 * The first 32 bytes are not a valid SQLite WAL header (too short, wrong
 * magic, unknown format version, invalid page size, or a header checksum
 * that does not match). SQLite itself treats such a WAL as empty.
 */
export class SqliteWalHeaderError extends Error {
  /** Whether the same call, made again later, may succeed with nothing else changed. */
  get retryable(): boolean {
    return false;
  }

  readonly code = 'SQLITE_WAL_HEADER_INVALID';
  readonly problem: string;

  constructor(problem: string) {
    super(`invalid SQLite WAL header: ${problem}`);
    this.name = 'SqliteWalHeaderError';
    this.problem = problem;
    (this as unknown as Record<symbol, boolean>)[SQLITE_WAL_HEADER_ERROR_MARKER] = true;
  }

  static isInstance(value: unknown): value is SqliteWalHeaderError {
    return hasMarker(value, SQLITE_WAL_HEADER_ERROR_MARKER);
  }
}

const FRAME_WRITER_ERROR_MARKER = Symbol.for('x.wal-segment.error.FrameWriterError');

/**
 * A {@link FrameWriter} cannot go on: a write or fsync failed (the file may
 * now end in a partial frame, which readers treat as a torn tail), or the
 * writer was closed. Reopen the file to recover: opening truncates a torn tail.
 */
export class FrameWriterError extends Error {
  /** Whether the same call, made again later, may succeed with nothing else changed. */
  get retryable(): boolean {
    return false;
  }

  readonly code = 'FRAME_WRITER_FAILED';
  readonly path: string;

  constructor(path: string, message: string, options: { cause?: unknown } = {}) {
    super(
      `${message}: ${path}`,
      options.cause === undefined ? undefined : { cause: options.cause },
    );
    this.name = 'FrameWriterError';
    this.path = path;
    (this as unknown as Record<symbol, boolean>)[FRAME_WRITER_ERROR_MARKER] = true;
  }

  static isInstance(value: unknown): value is FrameWriterError {
    return hasMarker(value, FRAME_WRITER_ERROR_MARKER);
  }
}
