/**
 * Typed errors of the object-store interface.
 *
 * Every class carries a `Symbol.for` marker and a `static isInstance`, so a
 * check still works when two copies of this package are installed (each has
 * its own class objects, but `Symbol.for` is global). `instanceof` works too
 * within one copy.
 *
 * The set is closed on purpose: a caller can act differently on each class,
 * and every adapter maps its service's answers onto exactly these.
 */
import { errorMarker, hasErrorMarker, markError } from './error-marker.ts';

const MARKER_NAMESPACE = 'x.store.error';

/** The codes a {@link StoreError} can carry, one per class. */
export type StoreErrorCode =
  | 'STORE_ERROR'
  | 'NOT_FOUND'
  | 'ALREADY_EXISTS'
  | 'PRECONDITION_FAILED'
  | 'NOT_IMPLEMENTED'
  | 'CONFLICT'
  | 'INVALID_KEY';

export interface StoreErrorOptions {
  /** The key the failed call was about, when there is one. */
  key?: string;
  /** The underlying error (SDK error, system error). */
  cause?: unknown;
}

const STORE_ERROR_MARKER = errorMarker(MARKER_NAMESPACE, 'StoreError');

/**
 * Base class: a store call failed for a reason that is none of the specific
 * ones below (transport failure, permission denied, unexpected answer).
 * Usually worth retrying with back-off; the message says what happened.
 */
export class StoreError extends Error {
  /** Whether the same call, made again later, may succeed with nothing else changed. */
  get retryable(): boolean {
    return true;
  }

  readonly code: StoreErrorCode;
  readonly key: string | undefined;

  constructor(
    message: string,
    options: StoreErrorOptions = {},
    code: StoreErrorCode = 'STORE_ERROR',
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'StoreError';
    this.code = code;
    this.key = options.key;
    markError(this, STORE_ERROR_MARKER);
  }

  static isInstance(value: unknown): value is StoreError {
    return hasErrorMarker(value, STORE_ERROR_MARKER);
  }
}

const NOT_FOUND_MARKER = errorMarker(MARKER_NAMESPACE, 'NotFoundError');

/** The object does not exist, where the call needs it to (e.g. a ranged read). */
export class NotFoundError extends StoreError {
  override get retryable(): boolean {
    return false;
  }

  constructor(key: string, options: Omit<StoreErrorOptions, 'key'> = {}) {
    super(`object not found: ${key}`, { ...options, key }, 'NOT_FOUND');
    this.name = 'NotFoundError';
    markError(this, NOT_FOUND_MARKER);
  }

  static override isInstance(value: unknown): value is NotFoundError {
    return hasErrorMarker(value, NOT_FOUND_MARKER);
  }
}

const ALREADY_EXISTS_MARKER = errorMarker(MARKER_NAMESPACE, 'AlreadyExistsError');

/** A create-if-absent write found the key already present; nothing was written. */
export class AlreadyExistsError extends StoreError {
  override get retryable(): boolean {
    return false;
  }

  constructor(key: string, options: Omit<StoreErrorOptions, 'key'> = {}) {
    super(
      `object already exists (create-if-absent refused): ${key}`,
      { ...options, key },
      'ALREADY_EXISTS',
    );
    this.name = 'AlreadyExistsError';
    markError(this, ALREADY_EXISTS_MARKER);
  }

  static override isInstance(value: unknown): value is AlreadyExistsError {
    return hasErrorMarker(value, ALREADY_EXISTS_MARKER);
  }
}

const PRECONDITION_FAILED_MARKER = errorMarker(MARKER_NAMESPACE, 'PreconditionFailedError');

/**
 * A replace-if-version or delete-if-version found another version (or no
 * object at all); nothing was changed. Someone else wrote the key since the
 * caller read it.
 */
export class PreconditionFailedError extends StoreError {
  override get retryable(): boolean {
    return false;
  }

  constructor(key: string, options: Omit<StoreErrorOptions, 'key'> & { detail?: string } = {}) {
    super(
      `precondition failed (the object changed or is gone): ${key}${options.detail ? ` (${options.detail})` : ''}`,
      { ...options, key },
      'PRECONDITION_FAILED',
    );
    this.name = 'PreconditionFailedError';
    markError(this, PRECONDITION_FAILED_MARKER);
  }

  static override isInstance(value: unknown): value is PreconditionFailedError {
    return hasErrorMarker(value, PRECONDITION_FAILED_MARKER);
  }
}

const NOT_IMPLEMENTED_MARKER = errorMarker(MARKER_NAMESPACE, 'NotImplementedError');

/**
 * The store (or the service behind it) cannot do what was asked, for example a
 * conditional write on a service without conditional headers. Retrying does
 * not help.
 */
export class NotImplementedError extends StoreError {
  override get retryable(): boolean {
    return false;
  }

  readonly operation: string;

  constructor(operation: string, options: StoreErrorOptions & { detail?: string } = {}) {
    super(
      `not implemented by this store: ${operation}${options.detail ? ` (${options.detail})` : ''}`,
      options,
      'NOT_IMPLEMENTED',
    );
    this.name = 'NotImplementedError';
    this.operation = operation;
    markError(this, NOT_IMPLEMENTED_MARKER);
  }

  static override isInstance(value: unknown): value is NotImplementedError {
    return hasErrorMarker(value, NOT_IMPLEMENTED_MARKER);
  }
}

const CONFLICT_MARKER = errorMarker(MARKER_NAMESPACE, 'ConflictError');

/**
 * A conditional write raced another write of the same key and the service
 * gave up on it (S3's 409 `ConditionalRequestConflict`). Nothing was written;
 * the caller may read again and retry.
 */
export class ConflictError extends StoreError {
  constructor(key: string, options: Omit<StoreErrorOptions, 'key'> = {}) {
    super(`conflicting concurrent write, retry: ${key}`, { ...options, key }, 'CONFLICT');
    this.name = 'ConflictError';
    markError(this, CONFLICT_MARKER);
  }

  static override isInstance(value: unknown): value is ConflictError {
    return hasErrorMarker(value, CONFLICT_MARKER);
  }
}

const INVALID_KEY_MARKER = errorMarker(MARKER_NAMESPACE, 'InvalidKeyError');

/** The key (or prefix) is not acceptable to any store; the reason says why. */
export class InvalidKeyError extends StoreError {
  override get retryable(): boolean {
    return false;
  }

  readonly reason: string;

  constructor(key: string, reason: string) {
    super(
      `invalid key ${JSON.stringify(truncateForMessage(key))}: ${reason}`,
      { key },
      'INVALID_KEY',
    );
    this.name = 'InvalidKeyError';
    this.reason = reason;
    markError(this, INVALID_KEY_MARKER);
  }

  static override isInstance(value: unknown): value is InvalidKeyError {
    return hasErrorMarker(value, INVALID_KEY_MARKER);
  }
}

function truncateForMessage(text: string): string {
  return text.length > 200 ? `${text.slice(0, 200)}…` : text;
}
