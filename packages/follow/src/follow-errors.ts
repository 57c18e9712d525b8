/**
 * The typed error of a follow, in the shape of `@x/store`'s: a `code`, a
 * `cause`, a `Symbol.for` marker and `static isInstance`, so a check
 * survives two copies of the package.
 */
import { errorMarker, hasErrorMarker, markError } from '@x/store';

export type FollowErrorCode =
  | 'FOLLOW_LOCKED'
  | 'FOLLOW_TARGET_FOREIGN'
  | 'FOLLOW_TARGET_CHANGED'
  | 'FOLLOW_TARGET_INVALID'
  | 'FOLLOW_UNTIL_BEFORE_BACKUP';

const MARKER = errorMarker('x.follow.error', 'FollowError');

/**
 * A follow could not publish a state to its target: readers kept the lock
 * past the busy timeout (`FOLLOW_LOCKED`, retryable: the next poll tries
 * again), the target is a database this follow did not create
 * (`FOLLOW_TARGET_FOREIGN`), someone else wrote to it
 * (`FOLLOW_TARGET_CHANGED`), it is not a SQLite database
 * (`FOLLOW_TARGET_INVALID`), or nothing in the backup is as old as the time
 * asked for (`FOLLOW_UNTIL_BEFORE_BACKUP`). The target is as it was.
 */
export class FollowError extends Error {
  static isInstance(value: unknown): value is FollowError {
    return hasErrorMarker(value, MARKER);
  }

  /** Whether the same call, made again later, may succeed with nothing else changed. */
  get retryable(): boolean {
    return this.code === 'FOLLOW_LOCKED';
  }

  readonly code: FollowErrorCode;
  /** The target database file. */
  readonly path: string;

  constructor(
    message: string,
    path: string,
    code: FollowErrorCode,
    options: { cause?: unknown } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'FollowError';
    this.code = code;
    this.path = path;
    markError(this, MARKER);
  }
}
