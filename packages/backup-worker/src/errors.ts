/**
 * Typed errors of the backup worker: one family, {@link BackupError}, whose
 * `code` says what failed. Each code keeps the `name` its class had before
 * the codes, since logs and operators match on it; a class remains only
 * where callers branch on it. Same marker shape as `@x/store`'s, so checks
 * survive two copies of the package.
 */
import { errorMarker, hasErrorMarker, markError } from '@x/store';

const marker = (name: string): symbol => errorMarker('x.backup-worker.error', name);

/** Each code's `name`. */
const NAMES = {
  BACKUP_ERROR: 'BackupError',
  LINEAGE_REFUSED: 'LineageRefusedError',
  WRITER_CONFLICT: 'WriterConflictError',
  OPERATION_TIMEOUT: 'OperationTimeoutError',
  WRITE_FENCED: 'WriteFencedError',
  BUCKET_STATE: 'BucketStateError',
  COMPACTION_INPUT: 'CompactionInputError',
  RESTORE_POINT_READ: 'RestorePointReadError',
  SIMULATED_CRASH: 'SimulatedCrashError',
  SHUTDOWN: 'ShutdownAbandonedError',
} as const;

export type BackupErrorCode = keyof typeof NAMES;

/** A timeout passes, and a fenced write goes through once the lease is renewed. */
const RETRYABLE: ReadonlySet<BackupErrorCode> = new Set(['OPERATION_TIMEOUT', 'WRITE_FENCED']);

const BACKUP_ERROR_MARKER = marker('BackupError');

export interface BackupErrorOptions {
  readonly code?: BackupErrorCode;
  readonly cause?: unknown;
  /** `LINEAGE_REFUSED`: why the prefix is refused and what to do (the message). */
  readonly reason?: string;
  /** `WRITER_CONFLICT`: the key whose conditional write was refused, when one was. */
  readonly key?: string | undefined;
  /** `OPERATION_TIMEOUT`: the request aborted, and the deadline it missed. */
  readonly operation?: string;
  readonly timeoutMs?: number;
}

/**
 * A backup step failed; the step is retried with back-off. `code`:
 * `LINEAGE_REFUSED` (the prefix is another lineage's or was rewound: refused
 * for the worker's life), `WRITER_CONFLICT` (a conditional write was refused:
 * another writer, the lease is dropped), `OPERATION_TIMEOUT`, `WRITE_FENCED`
 * (the lease stopped allowing writes), `BUCKET_STATE` (the bucket holds
 * something the worker cannot use), `COMPACTION_INPUT` (an input does not
 * hold what its entry says: the run stays), and the subclasses' codes.
 */
export class BackupError extends Error {
  readonly code: BackupErrorCode;
  declare readonly reason?: string;
  declare readonly key?: string;
  declare readonly operation?: string;
  declare readonly timeoutMs?: number;

  constructor(message: string, options: BackupErrorOptions = {}) {
    const { code = 'BACKUP_ERROR', cause, ...facts } = options;
    super(message, cause === undefined ? undefined : { cause });
    this.name = NAMES[code];
    this.code = code;
    Object.assign(this, facts);
    markError(this, BACKUP_ERROR_MARKER);
    // The former class's marker: an older copy's `isInstance` still answers.
    markError(this, marker(this.name));
  }

  /** Whether the same call, made again later, may succeed with nothing else changed. */
  get retryable(): boolean {
    return RETRYABLE.has(this.code);
  }

  static timeout(operation: string, timeoutMs: number): BackupError {
    return new BackupError(`${operation} did not finish within ${timeoutMs} ms`, {
      code: 'OPERATION_TIMEOUT',
      operation,
      timeoutMs,
    });
  }

  static compactionInput(key: string, problem: string): BackupError {
    return new BackupError(`cannot compact ${key}: ${problem}`, { code: 'COMPACTION_INPUT' });
  }

  static isInstance(value: unknown): value is BackupError {
    return hasErrorMarker(value, BACKUP_ERROR_MARKER);
  }

  /** A `BackupError` of `code`, whichever copy of the package made it. */
  static hasCode(value: unknown, code: BackupErrorCode): value is BackupError {
    return BackupError.isInstance(value) && value.code === code;
  }
}

/** Test hook (`TestHooks.failAfterWrites`): the write budget is spent, as if the process had been killed. */
export class SimulatedCrashError extends BackupError {
  constructor() {
    super('test hook: the process is gone (write budget spent)', { code: 'SIMULATED_CRASH' });
  }

  static override isInstance(value: unknown): value is SimulatedCrashError {
    return hasErrorMarker(value, marker('SimulatedCrashError'));
  }
}

/** A request was abandoned because the worker is shutting down (the grace period ended). */
export class ShutdownAbandonedError extends BackupError {
  constructor(message = 'abandoned: the worker is shutting down') {
    super(message, { code: 'SHUTDOWN' });
  }

  static override isInstance(value: unknown): value is ShutdownAbandonedError {
    return hasErrorMarker(value, marker('ShutdownAbandonedError'));
  }
}

/**
 * The restore point a restart reads back to prove its state does not hold
 * what its manifest says (an object missing, of the wrong size or CRC-32, or
 * not decoding): the restart uploads a new snapshot, as without the proof.
 */
export class RestorePointReadError extends BackupError {
  constructor(key: string, problem: string) {
    super(`cannot read ${key} back: ${problem}`, { code: 'RESTORE_POINT_READ' });
  }

  static override isInstance(value: unknown): value is RestorePointReadError {
    return hasErrorMarker(value, marker('RestorePointReadError'));
  }
}

const PANIC_MARKER = marker('WorkerPanicError');

/**
 * Test hook (`TestHooks.panicOnNextStep`): models a programming error. Not a
 * `BackupError` and not a failed step: it ends the worker, and health
 * reports it for good.
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
