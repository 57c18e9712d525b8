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

const MARKER_PREFIX = 'x.store.error';

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

const STORE_ERROR_MARKER = markerOf('StoreError');

/**
 * Base class: a store call failed for a reason that is none of the specific
 * ones below (transport failure, permission denied, unexpected answer).
 * Usually worth retrying with back-off; the message says what happened.
 */
export class StoreError extends Error {
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
    (this as unknown as Record<symbol, boolean>)[STORE_ERROR_MARKER] = true;
  }

  static isInstance(value: unknown): value is StoreError {
    return hasMarker(value, STORE_ERROR_MARKER);
  }
}

const NOT_FOUND_MARKER = markerOf('NotFoundError');

/** The object does not exist, where the call needs it to (e.g. a ranged read). */
export class NotFoundError extends StoreError {
  constructor(key: string, options: Omit<StoreErrorOptions, 'key'> = {}) {
    super(`object not found: ${key}`, { ...options, key }, 'NOT_FOUND');
    this.name = 'NotFoundError';
    (this as unknown as Record<symbol, boolean>)[NOT_FOUND_MARKER] = true;
  }

  static override isInstance(value: unknown): value is NotFoundError {
    return hasMarker(value, NOT_FOUND_MARKER);
  }
}

const ALREADY_EXISTS_MARKER = markerOf('AlreadyExistsError');

/** A create-if-absent write found the key already present; nothing was written. */
export class AlreadyExistsError extends StoreError {
  constructor(key: string, options: Omit<StoreErrorOptions, 'key'> = {}) {
    super(
      `object already exists (create-if-absent refused): ${key}`,
      { ...options, key },
      'ALREADY_EXISTS',
    );
    this.name = 'AlreadyExistsError';
    (this as unknown as Record<symbol, boolean>)[ALREADY_EXISTS_MARKER] = true;
  }

  static override isInstance(value: unknown): value is AlreadyExistsError {
    return hasMarker(value, ALREADY_EXISTS_MARKER);
  }
}

const PRECONDITION_FAILED_MARKER = markerOf('PreconditionFailedError');

/**
 * A replace-if-version or delete-if-version found another version (or no
 * object at all); nothing was changed. Someone else wrote the key since the
 * caller read it.
 */
export class PreconditionFailedError extends StoreError {
  constructor(key: string, options: Omit<StoreErrorOptions, 'key'> & { detail?: string } = {}) {
    super(
      `precondition failed (the object changed or is gone): ${key}${options.detail ? ` (${options.detail})` : ''}`,
      { ...options, key },
      'PRECONDITION_FAILED',
    );
    this.name = 'PreconditionFailedError';
    (this as unknown as Record<symbol, boolean>)[PRECONDITION_FAILED_MARKER] = true;
  }

  static override isInstance(value: unknown): value is PreconditionFailedError {
    return hasMarker(value, PRECONDITION_FAILED_MARKER);
  }
}

const NOT_IMPLEMENTED_MARKER = markerOf('NotImplementedError');

/**
 * The store (or the service behind it) cannot do what was asked, for example a
 * conditional write on a service without conditional headers. Retrying does
 * not help.
 */
export class NotImplementedError extends StoreError {
  readonly operation: string;

  constructor(operation: string, options: StoreErrorOptions & { detail?: string } = {}) {
    super(
      `not implemented by this store: ${operation}${options.detail ? ` (${options.detail})` : ''}`,
      options,
      'NOT_IMPLEMENTED',
    );
    this.name = 'NotImplementedError';
    this.operation = operation;
    (this as unknown as Record<symbol, boolean>)[NOT_IMPLEMENTED_MARKER] = true;
  }

  static override isInstance(value: unknown): value is NotImplementedError {
    return hasMarker(value, NOT_IMPLEMENTED_MARKER);
  }
}

const CONFLICT_MARKER = markerOf('ConflictError');

/**
 * A conditional write raced another write of the same key and the service
 * gave up on it (S3's 409 `ConditionalRequestConflict`). Nothing was written;
 * the caller may read again and retry.
 */
export class ConflictError extends StoreError {
  constructor(key: string, options: Omit<StoreErrorOptions, 'key'> = {}) {
    super(`conflicting concurrent write, retry: ${key}`, { ...options, key }, 'CONFLICT');
    this.name = 'ConflictError';
    (this as unknown as Record<symbol, boolean>)[CONFLICT_MARKER] = true;
  }

  static override isInstance(value: unknown): value is ConflictError {
    return hasMarker(value, CONFLICT_MARKER);
  }
}

const INVALID_KEY_MARKER = markerOf('InvalidKeyError');

/** The key (or prefix) is not acceptable to any store; the reason says why. */
export class InvalidKeyError extends StoreError {
  readonly reason: string;

  constructor(key: string, reason: string) {
    super(
      `invalid key ${JSON.stringify(truncateForMessage(key))}: ${reason}`,
      { key },
      'INVALID_KEY',
    );
    this.name = 'InvalidKeyError';
    this.reason = reason;
    (this as unknown as Record<symbol, boolean>)[INVALID_KEY_MARKER] = true;
  }

  static override isInstance(value: unknown): value is InvalidKeyError {
    return hasMarker(value, INVALID_KEY_MARKER);
  }
}

function truncateForMessage(text: string): string {
  return text.length > 200 ? `${text.slice(0, 200)}…` : text;
}
