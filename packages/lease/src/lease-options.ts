/** Options of `BucketLease.acquireAs` and `holdLease`, and their validation. */
import type { Clock } from './clock.ts';
import { systemClock } from './clock.ts';
import { LeaseOptionsError } from './errors.ts';
import { refuseUnknownOptions } from './known-options.ts';
import {
  checkedPrefix,
  DEFAULT_TTL_S,
  instanceIdProblem,
  MAX_SANE_TTL_S,
  MIN_TTL_S,
} from './record.ts';
import { LeaseWatch } from './watch.ts';

/** How strongly the lease excludes a second writer on this store. */
export type Exclusion = 'conditional' | 'best-effort';

/** Structured log sink: one event name and key-value fields. Never given credentials. */
export interface LeaseLogger {
  info(event: string, fields?: object): void;
  warn(event: string, fields?: object): void;
}

/**
 * The default logger: warnings as one JSON line on stderr (so weakened
 * exclusion and takeovers of suspect records are never silent), info dropped.
 */
export const stderrLeaseLogger: LeaseLogger = {
  info() {},
  warn(event, fields) {
    process.stderr.write(`${JSON.stringify({ level: 'warn', event, ...fields })}\n`);
  },
};

export interface AcquireOptions {
  /** The prefix the lease guards; the record is `{prefix}/LEASE`. Must not be empty. */
  prefix: string;
  /** This instance's id, kept across attempts (see `newInstanceId`). */
  instanceId: string;
  /** Whole seconds, from 3 to `MAX_SANE_TTL_S`; default `DEFAULT_TTL_S` (30). */
  ttlSeconds?: number;
  /**
   * Default true: every write is conditional, and the store is probed at
   * every acquire. False: read then unconditional write (best-effort).
   */
  conditional?: boolean;
  /** Cluster term to acquire under (term fencing); a non-negative integer. */
  term?: number;
  /** Default `systemClock`. */
  clock?: Clock;
  /** Default: warnings to stderr as JSON lines. */
  logger?: LeaseLogger;
  /** Keep one per contender across attempts, so suspect records can be taken over. */
  watch?: LeaseWatch;
  /** Cancels the acquire (every store call gets it). */
  signal?: AbortSignal;
  /**
   * What an acquire does with a record naming this `instanceId` that is not
   * released. `'continue'` (default): it is an earlier attempt of this
   * instance whose answer was lost, kept as it is (same generation).
   * `'reclaim'`: it was left by an earlier run of this instance that is
   * known to be dead, and is taken over at once as a new tenure (generation
   * + 1, replace-if-version, the term rules of any takeover) instead of
   * being waited out for a TTL. Only sound when the caller proves that no
   * other live process uses this instance id (for example by a local lock
   * held while the id is in use): two live processes sharing an id would
   * take the lease from each other.
   */
  ownRecord?: OwnRecord;
}

/** See {@link AcquireOptions.ownRecord}. */
export type OwnRecord = 'continue' | 'reclaim';

/** @internal The option names of `BucketLease.acquireAs`. */
export const ACQUIRE_OPTION_NAMES = [
  'prefix',
  'instanceId',
  'ttlSeconds',
  'conditional',
  'term',
  'clock',
  'logger',
  'watch',
  'signal',
  'ownRecord',
] as const satisfies readonly (keyof AcquireOptions)[];

/** @internal Validated options. */
export interface AcquireSettings {
  readonly prefix: string;
  readonly key: string;
  readonly instanceId: string;
  readonly ttlSeconds: number;
  readonly conditional: boolean;
  readonly term: number | undefined;
  readonly clock: Clock;
  readonly logger: LeaseLogger;
  readonly watch: LeaseWatch;
  readonly signal: AbortSignal | undefined;
  readonly ownRecord: OwnRecord;
}

/**
 * @internal
 * @param known the option names the caller accepts (`holdLease` accepts more).
 * @throws LeaseOptionsError naming the first bad or unknown option.
 */
export function validateAcquireOptions(
  options: AcquireOptions,
  known: readonly string[] = ACQUIRE_OPTION_NAMES,
  where = 'BucketLease.acquireAs',
): AcquireSettings {
  if (typeof options !== 'object' || options === null)
    throw new LeaseOptionsError('options', 'must be an object');
  refuseUnknownOptions(options, known, where);
  const prefix = checkedPrefix(options.prefix);
  const idProblem = instanceIdProblem(options.instanceId);
  if (idProblem) throw new LeaseOptionsError('instanceId', idProblem);
  const ttlSeconds = options.ttlSeconds ?? DEFAULT_TTL_S;
  if (typeof ttlSeconds !== 'number' || !Number.isInteger(ttlSeconds))
    throw new LeaseOptionsError(
      'ttlSeconds',
      `must be a whole number of seconds, got ${String(ttlSeconds)}`,
    );
  if (ttlSeconds < MIN_TTL_S)
    throw new LeaseOptionsError(
      'ttlSeconds',
      `must be at least ${MIN_TTL_S} s (renewals run every TTL/3), got ${ttlSeconds}`,
    );
  if (ttlSeconds > MAX_SANE_TTL_S)
    throw new LeaseOptionsError(
      'ttlSeconds',
      `must be at most MAX_SANE_TTL_S (${MAX_SANE_TTL_S} s), got ${ttlSeconds}; other instances would treat a longer lease as suspect`,
    );
  if (options.conditional !== undefined && typeof options.conditional !== 'boolean')
    throw new LeaseOptionsError('conditional', 'must be true or false');
  if (
    options.term !== undefined &&
    (typeof options.term !== 'number' || !Number.isSafeInteger(options.term) || options.term < 0)
  )
    throw new LeaseOptionsError(
      'term',
      `must be a non-negative integer, got ${String(options.term)}`,
    );
  const clock = options.clock ?? systemClock;
  if (
    typeof clock.wallNow !== 'function' ||
    typeof clock.monotonicNow !== 'function' ||
    typeof clock.setTimer !== 'function'
  )
    throw new LeaseOptionsError('clock', 'must have wallNow, monotonicNow and setTimer');
  const ownRecord = options.ownRecord ?? 'continue';
  if (ownRecord !== 'continue' && ownRecord !== 'reclaim')
    throw new LeaseOptionsError(
      'ownRecord',
      `must be 'continue' or 'reclaim', got ${String(options.ownRecord)}`,
    );
  return {
    prefix,
    key: `${prefix}/LEASE`,
    instanceId: options.instanceId,
    ttlSeconds,
    conditional: options.conditional ?? true,
    term: options.term,
    clock,
    logger: options.logger ?? stderrLeaseLogger,
    watch: options.watch ?? new LeaseWatch(),
    signal: options.signal,
    ownRecord,
  };
}
