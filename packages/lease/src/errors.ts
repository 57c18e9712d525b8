/**
 * Typed errors of the bucket lease, one class per failure a caller can act on.
 *
 * Like `@x/store`'s errors, every class carries a `Symbol.for` marker and a
 * `static isInstance`, so a check still works when two copies of this package
 * are installed. `instanceof` works within one copy.
 */
import { errorMarker, hasErrorMarker, markError } from '@x/store';
import type { LeaseRecord } from './lease-record.ts';

const MARKER_NAMESPACE = 'x.lease.error';

/** The codes a {@link LeaseError} can carry, one per class. */
export type LeaseErrorCode =
  | 'LEASE_ERROR'
  | 'FOREIGN_ACTIVE'
  | 'LEASE_LOST'
  | 'FENCED'
  | 'PRECONDITIONS_IGNORED'
  | 'LEASE_RECORD_INVALID'
  | 'LEASE_OPTIONS_INVALID'
  | 'WRITE_DEADLINE_PASSED'
  | 'LEASE_WAIT_TIMEOUT';

/** Describes a holder for messages: id, host, pid, generation. Never credentials. */
export function describeHolder(record: LeaseRecord): string {
  const term = record.term === undefined ? '' : `, term ${record.term}`;
  return `instance ${record.instanceId} (host ${JSON.stringify(record.host)}, pid ${record.pid}, generation ${record.generation}${term})`;
}

const LEASE_ERROR_MARKER = errorMarker(MARKER_NAMESPACE, 'LeaseError');

/** Base class of every lease failure. */
export class LeaseError extends Error {
  /** Whether the same call, made again later, may succeed with nothing else changed. */
  get retryable(): boolean {
    return false;
  }

  readonly code: LeaseErrorCode;

  constructor(
    message: string,
    options: { cause?: unknown } = {},
    code: LeaseErrorCode = 'LEASE_ERROR',
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'LeaseError';
    this.code = code;
    markError(this, LEASE_ERROR_MARKER);
  }

  static isInstance(value: unknown): value is LeaseError {
    return hasErrorMarker(value, LEASE_ERROR_MARKER);
  }
}

const FOREIGN_ACTIVE_MARKER = errorMarker(MARKER_NAMESPACE, 'ForeignActiveError');

/**
 * Another instance holds the lease and renewed it less than its TTL ago (by
 * this instance's wall clock), or its record is suspect and has not yet been
 * watched unchanged for one TTL. Nothing was written. Try again after
 * `mayExpireAt` (wall-clock ms since the epoch, by this instance's clock).
 */
export class ForeignActiveError extends LeaseError {
  override get retryable(): boolean {
    return true;
  }

  readonly holder: LeaseRecord;
  readonly mayExpireAt: number;

  constructor(key: string, holder: LeaseRecord, mayExpireAt: number, detail?: string) {
    super(
      `lease ${key} is held by ${describeHolder(holder)}; it may expire at ${isoOrNumber(mayExpireAt)}${detail ? ` (${detail})` : ''}`,
      {},
      'FOREIGN_ACTIVE',
    );
    this.name = 'ForeignActiveError';
    this.holder = holder;
    this.mayExpireAt = mayExpireAt;
    markError(this, FOREIGN_ACTIVE_MARKER);
  }

  static override isInstance(value: unknown): value is ForeignActiveError {
    return hasErrorMarker(value, FOREIGN_ACTIVE_MARKER);
  }
}

const LEASE_LOST_MARKER = errorMarker(MARKER_NAMESPACE, 'LeaseLostError');

/**
 * The lease is no longer ours: another instance took it over (`holder` names
 * it), the record vanished, or it was released. Final: a lost lease is never
 * renewed back into a held one; acquire again for a new tenure.
 */
export class LeaseLostError extends LeaseError {
  readonly holder: LeaseRecord | undefined;

  constructor(
    key: string,
    holder: LeaseRecord | undefined,
    detail: string,
    options: { cause?: unknown } = {},
  ) {
    super(
      `lease ${key} lost: ${detail}${holder ? `; it is now held by ${describeHolder(holder)}${holder.released ? ' (released)' : ''}` : ''}`,
      options,
      'LEASE_LOST',
    );
    this.name = 'LeaseLostError';
    this.holder = holder;
    markError(this, LEASE_LOST_MARKER);
  }

  static override isInstance(value: unknown): value is LeaseLostError {
    return hasErrorMarker(value, LEASE_LOST_MARKER);
  }
}

const FENCED_MARKER = errorMarker(MARKER_NAMESPACE, 'FencedError');

/**
 * Term fencing: the published lease carries a term ahead of ours (at
 * acquire, even when that lease has expired or was released), or the
 * cluster's current term is ahead of the term we hold (at renewal, refused
 * before any request). Adopt the newer term before trying again.
 */
export class FencedError extends LeaseError {
  readonly ourTerm: number | undefined;
  readonly newerTerm: number;

  constructor(key: string, ourTerm: number | undefined, newerTerm: number, where: string) {
    super(
      `lease ${key} fenced: ${where} term ${newerTerm} is ahead of our term ${ourTerm ?? '(none)'}`,
      {},
      'FENCED',
    );
    this.name = 'FencedError';
    this.ourTerm = ourTerm;
    this.newerTerm = newerTerm;
    markError(this, FENCED_MARKER);
  }

  static override isInstance(value: unknown): value is FencedError {
    return hasErrorMarker(value, FENCED_MARKER);
  }
}

const PRECONDITIONS_IGNORED_MARKER = errorMarker(MARKER_NAMESPACE, 'PreconditionsIgnoredError');

/**
 * The store accepted a conditional write it should have refused (or cannot
 * send one at all), so the lease cannot exclude a second writer. The acquire
 * failed closed: the lease was released. `ignored` names each precondition
 * the store ignored. Set `conditional: false` to run with best-effort
 * exclusion instead, knowing two writers may overlap.
 */
export class PreconditionsIgnoredError extends LeaseError {
  readonly ignored: string[];

  constructor(storeDescription: string, ignored: string[], options: { cause?: unknown } = {}) {
    super(
      `${storeDescription} does not enforce conditional writes (${ignored.join('; ')}), so the lease cannot exclude a second writer; the lease was not kept. Set \`conditional: false\` to run with best-effort exclusion (two instances may both write)`,
      options,
      'PRECONDITIONS_IGNORED',
    );
    this.name = 'PreconditionsIgnoredError';
    this.ignored = ignored;
    markError(this, PRECONDITIONS_IGNORED_MARKER);
  }

  static override isInstance(value: unknown): value is PreconditionsIgnoredError {
    return hasErrorMarker(value, PRECONDITIONS_IGNORED_MARKER);
  }
}

const LEASE_RECORD_MARKER = errorMarker(MARKER_NAMESPACE, 'LeaseRecordError');

/**
 * The object at `{prefix}/LEASE` is not a valid lease record. It is treated
 * as held by an unknown instance, never as absent: inspect it, and delete it
 * by hand once sure no instance uses the prefix.
 */
export class LeaseRecordError extends LeaseError {
  readonly key: string;
  readonly problem: string;

  constructor(key: string, problem: string) {
    super(
      `invalid lease record at ${key}: ${problem}. It is treated as held by an unknown instance; inspect it and delete it by hand once sure no instance uses this prefix`,
      {},
      'LEASE_RECORD_INVALID',
    );
    this.name = 'LeaseRecordError';
    this.key = key;
    this.problem = problem;
    markError(this, LEASE_RECORD_MARKER);
  }

  static override isInstance(value: unknown): value is LeaseRecordError {
    return hasErrorMarker(value, LEASE_RECORD_MARKER);
  }
}

const LEASE_OPTIONS_MARKER = errorMarker(MARKER_NAMESPACE, 'LeaseOptionsError');

/** An option is out of range or missing; `option` names it. Nothing was sent. */
export class LeaseOptionsError extends LeaseError {
  readonly option: string;

  constructor(option: string, problem: string) {
    super(`invalid lease option \`${option}\`: ${problem}`, {}, 'LEASE_OPTIONS_INVALID');
    this.name = 'LeaseOptionsError';
    this.option = option;
    markError(this, LEASE_OPTIONS_MARKER);
  }

  static override isInstance(value: unknown): value is LeaseOptionsError {
    return hasErrorMarker(value, LEASE_OPTIONS_MARKER);
  }
}

const WRITE_DEADLINE_MARKER = errorMarker(MARKER_NAMESPACE, 'WriteDeadlineError');

/**
 * The reason the fence signal aborts with when the holder was not renewed in
 * time: its right to write ran out (two thirds of a TTL after the last
 * successful renewal was sent). The lease may still be renewed; a renewal
 * that succeeds opens a new fence signal.
 */
export class WriteDeadlineError extends LeaseError {
  override get retryable(): boolean {
    return true;
  }

  constructor(key: string) {
    super(
      `lease ${key}: the right to write ran out (not renewed within two thirds of a TTL); stop writing`,
      {},
      'WRITE_DEADLINE_PASSED',
    );
    this.name = 'WriteDeadlineError';
    markError(this, WRITE_DEADLINE_MARKER);
  }

  static override isInstance(value: unknown): value is WriteDeadlineError {
    return hasErrorMarker(value, WRITE_DEADLINE_MARKER);
  }
}

const LEASE_WAIT_TIMEOUT_MARKER = errorMarker(MARKER_NAMESPACE, 'LeaseWaitTimeoutError');

/**
 * `waitForLease` gave up: the lease was not free within `timeoutMs`. Nothing
 * is held. `holder` is the last holder seen, when one was (its record may
 * have been suspect, or the store kept refusing: `cause` says).
 */
export class LeaseWaitTimeoutError extends LeaseError {
  override get retryable(): boolean {
    return true;
  }

  readonly timeoutMs: number;
  readonly holder: LeaseRecord | undefined;

  constructor(
    key: string,
    timeoutMs: number,
    holder: LeaseRecord | undefined,
    options: { cause?: unknown } = {},
  ) {
    super(
      `lease ${key}: not free within ${timeoutMs} ms${holder ? `; last held by ${describeHolder(holder)}` : ''}`,
      options,
      'LEASE_WAIT_TIMEOUT',
    );
    this.name = 'LeaseWaitTimeoutError';
    this.timeoutMs = timeoutMs;
    this.holder = holder;
    markError(this, LEASE_WAIT_TIMEOUT_MARKER);
  }

  static override isInstance(value: unknown): value is LeaseWaitTimeoutError {
    return hasErrorMarker(value, LEASE_WAIT_TIMEOUT_MARKER);
  }
}

function isoOrNumber(ms: number): string {
  const date = new Date(ms);
  return Number.isNaN(date.getTime()) ? String(ms) : date.toISOString();
}
