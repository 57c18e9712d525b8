/**
 * Typed errors of the backup worker. Same shape as `@x/store`'s: a `code`, a
 * `cause`, a `Symbol.for` marker and `static isInstance`, so checks survive
 * two copies of the package.
 */
import { errorMarker, hasErrorMarker, markError } from '@x/store';

const MARKER_NAMESPACE = 'x.backup-worker.error';

export type BackupErrorCode =
  | 'BACKUP_ERROR'
  | 'LINEAGE_REFUSED'
  | 'WRITER_CONFLICT'
  | 'OPERATION_TIMEOUT'
  | 'WRITE_FENCED'
  | 'BUCKET_STATE'
  | 'COMPACTION_INPUT'
  | 'RESTORE_POINT_READ'
  | 'SIMULATED_CRASH'
  | 'SHUTDOWN';

const BACKUP_ERROR_MARKER = errorMarker(MARKER_NAMESPACE, 'BackupError');

/** Base class: a backup step failed. The step is retried with back-off. */
export class BackupError extends Error {
  /** Whether the same call, made again later, may succeed with nothing else changed. */
  get retryable(): boolean {
    return false;
  }

  readonly code: BackupErrorCode;

  constructor(
    message: string,
    options: { cause?: unknown } = {},
    code: BackupErrorCode = 'BACKUP_ERROR',
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'BackupError';
    this.code = code;
    markError(this, BACKUP_ERROR_MARKER);
  }

  static isInstance(value: unknown): value is BackupError {
    return hasErrorMarker(value, BACKUP_ERROR_MARKER);
  }
}

const LINEAGE_MARKER = errorMarker(MARKER_NAMESPACE, 'LineageRefusedError');

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
    markError(this, LINEAGE_MARKER);
  }

  static override isInstance(value: unknown): value is LineageRefusedError {
    return hasErrorMarker(value, LINEAGE_MARKER);
  }
}

const CONFLICT_MARKER = errorMarker(MARKER_NAMESPACE, 'WriterConflictError');

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
    markError(this, CONFLICT_MARKER);
  }

  static override isInstance(value: unknown): value is WriterConflictError {
    return hasErrorMarker(value, CONFLICT_MARKER);
  }
}

const TIMEOUT_MARKER = errorMarker(MARKER_NAMESPACE, 'OperationTimeoutError');

/** A request did not finish within the operation deadline; it was aborted. */
export class OperationTimeoutError extends BackupError {
  override get retryable(): boolean {
    return true;
  }

  readonly operation: string;
  readonly timeoutMs: number;

  constructor(operation: string, timeoutMs: number) {
    super(`${operation} did not finish within ${timeoutMs} ms`, {}, 'OPERATION_TIMEOUT');
    this.name = 'OperationTimeoutError';
    this.operation = operation;
    this.timeoutMs = timeoutMs;
    markError(this, TIMEOUT_MARKER);
  }

  static override isInstance(value: unknown): value is OperationTimeoutError {
    return hasErrorMarker(value, TIMEOUT_MARKER);
  }
}

const FENCED_MARKER = errorMarker(MARKER_NAMESPACE, 'WriteFencedError');

/** The lease stopped allowing writes (lost, dropped, or not renewed in time); the write was not sent or was aborted. */
export class WriteFencedError extends BackupError {
  override get retryable(): boolean {
    return true;
  }

  constructor(message: string, options: { cause?: unknown } = {}) {
    super(message, options, 'WRITE_FENCED');
    this.name = 'WriteFencedError';
    markError(this, FENCED_MARKER);
  }

  static override isInstance(value: unknown): value is WriteFencedError {
    return hasErrorMarker(value, FENCED_MARKER);
  }
}

const BUCKET_STATE_MARKER = errorMarker(MARKER_NAMESPACE, 'BucketStateError');

/** The bucket holds something the worker cannot use (LATEST names a missing or unparseable manifest). */
export class BucketStateError extends BackupError {
  constructor(message: string, options: { cause?: unknown } = {}) {
    super(message, options, 'BUCKET_STATE');
    this.name = 'BucketStateError';
    markError(this, BUCKET_STATE_MARKER);
  }

  static override isInstance(value: unknown): value is BucketStateError {
    return hasErrorMarker(value, BUCKET_STATE_MARKER);
  }
}

const COMPACTION_INPUT_MARKER = errorMarker(MARKER_NAMESPACE, 'CompactionInputError');

/**
 * An input of a compaction does not hold what its manifest entry says (size,
 * CRC-32, header): the run is not compacted and stays as it is.
 */
export class CompactionInputError extends BackupError {
  constructor(key: string, problem: string) {
    super(`cannot compact ${key}: ${problem}`, {}, 'COMPACTION_INPUT');
    this.name = 'CompactionInputError';
    markError(this, COMPACTION_INPUT_MARKER);
  }

  static override isInstance(value: unknown): value is CompactionInputError {
    return hasErrorMarker(value, COMPACTION_INPUT_MARKER);
  }
}

const CRASH_MARKER = errorMarker(MARKER_NAMESPACE, 'SimulatedCrashError');

/** Test hook (`TestHooks.failAfterWrites`): the write budget is spent, as if the process had been killed. */
export class SimulatedCrashError extends BackupError {
  constructor() {
    super('test hook: the process is gone (write budget spent)', {}, 'SIMULATED_CRASH');
    this.name = 'SimulatedCrashError';
    markError(this, CRASH_MARKER);
  }

  static override isInstance(value: unknown): value is SimulatedCrashError {
    return hasErrorMarker(value, CRASH_MARKER);
  }
}

const SHUTDOWN_MARKER = errorMarker(MARKER_NAMESPACE, 'ShutdownAbandonedError');

/** A request was abandoned because the worker is shutting down (the grace period ended). */
export class ShutdownAbandonedError extends BackupError {
  constructor(message = 'abandoned: the worker is shutting down') {
    super(message, {}, 'SHUTDOWN');
    this.name = 'ShutdownAbandonedError';
    markError(this, SHUTDOWN_MARKER);
  }

  static override isInstance(value: unknown): value is ShutdownAbandonedError {
    return hasErrorMarker(value, SHUTDOWN_MARKER);
  }
}

const PANIC_MARKER = errorMarker(MARKER_NAMESPACE, 'WorkerPanicError');

/**
 * Test hook (`TestHooks.panicOnNextStep`): models a programming
 * error. Not counted as a failed step: it ends the worker, and health reports
 * it for good.
 */
export class WorkerPanicError extends Error {
  /** Whether the same call, made again later, may succeed with nothing else changed. */
  get retryable(): boolean {
    return false;
  }

  constructor(message = 'test hook: backup worker panics') {
    super(message);
    this.name = 'WorkerPanicError';
    markError(this, PANIC_MARKER);
  }

  static isInstance(value: unknown): value is WorkerPanicError {
    return hasErrorMarker(value, PANIC_MARKER);
  }
}

/** The message of a thrown value, for logs and error text (a non-Error is stringified). */
export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

const RESTORE_POINT_READ_MARKER = errorMarker(MARKER_NAMESPACE, 'RestorePointReadError');

/**
 * The restore point a restart reads back to prove its state
 * (restore-point-read.ts) does not hold what its manifest says: an object
 * missing, of the wrong size or CRC-32, or not decoding. The restart then
 * uploads a new snapshot, as without the proof.
 */
export class RestorePointReadError extends BackupError {
  constructor(key: string, problem: string) {
    super(`cannot read ${key} back: ${problem}`, {}, 'RESTORE_POINT_READ');
    this.name = 'RestorePointReadError';
    markError(this, RESTORE_POINT_READ_MARKER);
  }

  static override isInstance(value: unknown): value is RestorePointReadError {
    return hasErrorMarker(value, RESTORE_POINT_READ_MARKER);
  }
}
