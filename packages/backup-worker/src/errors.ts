/**
 * Typed errors of the backup worker. Same shape as `@x/store`'s: a `code`, a
 * `cause`, a `Symbol.for` marker and `static isInstance`, so checks survive
 * two copies of the package.
 */

const MARKER_PREFIX = 'x.backup-worker.error';

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

export type BackupErrorCode =
  | 'BACKUP_ERROR'
  | 'LINEAGE_REFUSED'
  | 'WRITER_CONFLICT'
  | 'OPERATION_TIMEOUT'
  | 'WRITE_FENCED'
  | 'BUCKET_STATE'
  | 'SIMULATED_CRASH'
  | 'SHUTDOWN';

const BACKUP_ERROR_MARKER = markerOf('BackupError');

/** Base class: a backup step failed. The step is retried with back-off. */
export class BackupError extends Error {
  readonly code: BackupErrorCode;

  constructor(
    message: string,
    options: { cause?: unknown } = {},
    code: BackupErrorCode = 'BACKUP_ERROR',
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'BackupError';
    this.code = code;
    (this as unknown as Record<symbol, boolean>)[BACKUP_ERROR_MARKER] = true;
  }

  static isInstance(value: unknown): value is BackupError {
    return hasMarker(value, BACKUP_ERROR_MARKER);
  }
}

const LINEAGE_MARKER = markerOf('LineageRefusedError');

/**
 * The prefix belongs to another lineage, or this store was rewound. The worker
 * refuses the prefix for its whole life: it uploads nothing and deletes
 * nothing. `reason` says why and what to do.
 */
export class LineageRefusedError extends BackupError {
  readonly reason: string;

  constructor(reason: string) {
    super(reason, {}, 'LINEAGE_REFUSED');
    this.name = 'LineageRefusedError';
    this.reason = reason;
    (this as unknown as Record<symbol, boolean>)[LINEAGE_MARKER] = true;
  }

  static override isInstance(value: unknown): value is LineageRefusedError {
    return hasMarker(value, LINEAGE_MARKER);
  }
}

const CONFLICT_MARKER = markerOf('WriterConflictError');

/**
 * The bucket refused a conditional write: another writer is using the prefix.
 * The worker drops its lease and starts over through it.
 */
export class WriterConflictError extends BackupError {
  readonly key: string | undefined;

  constructor(message: string, options: { key?: string; cause?: unknown } = {}) {
    super(message, { cause: options.cause }, 'WRITER_CONFLICT');
    this.name = 'WriterConflictError';
    this.key = options.key;
    (this as unknown as Record<symbol, boolean>)[CONFLICT_MARKER] = true;
  }

  static override isInstance(value: unknown): value is WriterConflictError {
    return hasMarker(value, CONFLICT_MARKER);
  }
}

const TIMEOUT_MARKER = markerOf('OperationTimeoutError');

/** A request did not finish within the operation deadline; it was aborted. */
export class OperationTimeoutError extends BackupError {
  readonly operation: string;
  readonly timeoutMs: number;

  constructor(operation: string, timeoutMs: number) {
    super(`${operation} did not finish within ${timeoutMs} ms`, {}, 'OPERATION_TIMEOUT');
    this.name = 'OperationTimeoutError';
    this.operation = operation;
    this.timeoutMs = timeoutMs;
    (this as unknown as Record<symbol, boolean>)[TIMEOUT_MARKER] = true;
  }

  static override isInstance(value: unknown): value is OperationTimeoutError {
    return hasMarker(value, TIMEOUT_MARKER);
  }
}

const FENCED_MARKER = markerOf('WriteFencedError');

/** The lease stopped allowing writes (lost, dropped, or not renewed in time); the write was not sent or was aborted. */
export class WriteFencedError extends BackupError {
  constructor(message: string, options: { cause?: unknown } = {}) {
    super(message, options, 'WRITE_FENCED');
    this.name = 'WriteFencedError';
    (this as unknown as Record<symbol, boolean>)[FENCED_MARKER] = true;
  }

  static override isInstance(value: unknown): value is WriteFencedError {
    return hasMarker(value, FENCED_MARKER);
  }
}

const BUCKET_STATE_MARKER = markerOf('BucketStateError');

/** The bucket holds something the worker cannot use (LATEST names a missing or unparseable manifest). */
export class BucketStateError extends BackupError {
  constructor(message: string, options: { cause?: unknown } = {}) {
    super(message, options, 'BUCKET_STATE');
    this.name = 'BucketStateError';
    (this as unknown as Record<symbol, boolean>)[BUCKET_STATE_MARKER] = true;
  }

  static override isInstance(value: unknown): value is BucketStateError {
    return hasMarker(value, BUCKET_STATE_MARKER);
  }
}

const CRASH_MARKER = markerOf('SimulatedCrashError');

/** Test hook ({@link BackupWorker.failAfterWrites}): the write budget is spent, as if the process had been killed. */
export class SimulatedCrashError extends BackupError {
  constructor() {
    super('test hook: the process is gone (write budget spent)', {}, 'SIMULATED_CRASH');
    this.name = 'SimulatedCrashError';
    (this as unknown as Record<symbol, boolean>)[CRASH_MARKER] = true;
  }

  static override isInstance(value: unknown): value is SimulatedCrashError {
    return hasMarker(value, CRASH_MARKER);
  }
}

const SHUTDOWN_MARKER = markerOf('ShutdownAbandonedError');

/** A request was abandoned because the worker is shutting down (the grace period ended). */
export class ShutdownAbandonedError extends BackupError {
  constructor(message = 'abandoned: the worker is shutting down') {
    super(message, {}, 'SHUTDOWN');
    this.name = 'ShutdownAbandonedError';
    (this as unknown as Record<symbol, boolean>)[SHUTDOWN_MARKER] = true;
  }

  static override isInstance(value: unknown): value is ShutdownAbandonedError {
    return hasMarker(value, SHUTDOWN_MARKER);
  }
}

const PANIC_MARKER = markerOf('WorkerPanicError');

/**
 * Test hook ({@link BackupWorker.panicOnNextStep}): models a programming
 * error. Not counted as a failed step: it ends the worker, and health reports
 * it for good.
 */
export class WorkerPanicError extends Error {
  constructor(message = 'test hook: backup worker panics') {
    super(message);
    this.name = 'WorkerPanicError';
    (this as unknown as Record<symbol, boolean>)[PANIC_MARKER] = true;
  }

  static isInstance(value: unknown): value is WorkerPanicError {
    return hasMarker(value, PANIC_MARKER);
  }
}
