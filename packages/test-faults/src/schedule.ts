/**
 * The seeded fault schedule shared by the proxy and the store wrapper.
 *
 * Determinism. Each rule keeps its own count of the requests (or calls) it
 * matched. Whether a rule fires on its k-th match, and how long its latency,
 * stall or partition is, come from a hash of (seed, rule index, k) — not from
 * one random stream consumed by every request. So given the seed, the
 * schedule and the order in which requests arrive, the faults are fixed; and
 * a rule aimed at PUTs makes the same decisions for the same PUTs even when
 * the number of unrelated GETs in between changes.
 *
 * Combination. Every `latency` rule that fires adds its delay. Of the other
 * kinds, the first rule (in schedule order) that fires decides the request's
 * fate; later rules still count the match but do not fire.
 */

/** Every fault kind both tools inject. */
export const FAULT_KINDS = [
  'latency',
  'reset',
  'error500',
  'error503',
  'conflict',
  'lostResponse',
  'stall',
  'partition',
] as const;

export type FaultKind = (typeof FAULT_KINDS)[number];

/** Faults injected so far, by kind (every kind present, zero when none). */
export type FaultCounts = Record<FaultKind, number>;

export interface FaultRule {
  readonly kind: FaultKind;
  /**
   * Which requests the rule applies to. Proxy: HTTP methods (`PUT`, `GET`…,
   * case-insensitive). Store wrapper: operation names (`get`, `getStream`,
   * `head`, `put`, `delete`, `list`, `upload`). Default: all.
   */
  readonly methods?: readonly string[];
  /**
   * Proxy: tested against the request path (without the query). Store
   * wrapper: tested against the key (the prefix, for `list`). A string
   * matches when the path contains it; a RegExp is tested as is. Default: all.
   */
  readonly path?: string | RegExp;
  /**
   * Proxy only: tested against the query string (without `?`), like `path`
   * — e.g. `/uploadId=/` for S3's CompleteMultipartUpload. The store wrapper
   * ignores it. Default: all.
   */
  readonly query?: string | RegExp;
  /** Chance, 0 to 1, that the rule fires on a matching request. Default 1. */
  readonly probability?: number;
  /** The first `skip` matches never fire. Default 0. */
  readonly skip?: number;
  /** The rule fires at most this many times. Default unlimited. */
  readonly limit?: number;
  /** `latency`: added delay in ms, fixed or drawn from [min, max]. Default 100. */
  readonly latencyMs?: number | readonly [number, number];
  /** `stall`: how long the body stops, in ms. Default 1000. */
  readonly stallMs?: number;
  /** `stall`: body bytes delivered before the stall. Default 0. */
  readonly stallAfterBytes?: number;
  /** `partition`: how long the partition this rule starts lasts, in ms. Default 1000. */
  readonly durationMs?: number;
}

export interface FaultSchedule {
  readonly rules: readonly FaultRule[];
}

/** What the schedule decided for one request. */
export interface FaultDecision {
  /** Sum of the delays of the latency rules that fired (0 when none). */
  readonly latencyMs: number;
  /** Each latency rule that fired, with its delay (each counts as one `latency` fault). */
  readonly latencies: readonly { readonly rule: number; readonly ms: number }[];
  /** The terminal fault, if one fired. */
  readonly fault?: TerminalFault;
}

export type TerminalFault =
  | {
      readonly kind: 'reset' | 'error500' | 'error503' | 'conflict' | 'lostResponse';
      readonly rule: number;
    }
  | {
      readonly kind: 'stall';
      readonly rule: number;
      readonly stallMs: number;
      readonly stallAfterBytes: number;
    }
  | { readonly kind: 'partition'; readonly rule: number; readonly durationMs: number };

/** One injected fault, as `faults()` and the log file record it. */
export interface FaultEvent {
  /** Order of the request among all requests the tool saw (from 1). */
  readonly request: number;
  /** When it was injected (ms since epoch). */
  readonly time: number;
  readonly kind: FaultKind;
  /** HTTP method (proxy) or operation name (wrapper). */
  readonly method: string;
  /** Request path (proxy) or key (wrapper). */
  readonly path: string;
  /** The rule (index in the schedule) that fired. */
  readonly rule: number;
  /** Delay, stall or partition length in ms, when the kind has one. */
  readonly ms?: number;
}

const FAULT_SCHEDULE_ERROR_MARKER = Symbol.for('x.test-faults.error.FaultScheduleError');

/** A schedule or tool option is invalid; the message names the field. */
export class FaultScheduleError extends Error {
  readonly code = 'FAULT_SCHEDULE_INVALID';

  constructor(message: string) {
    super(message);
    this.name = 'FaultScheduleError';
    (this as unknown as Record<symbol, boolean>)[FAULT_SCHEDULE_ERROR_MARKER] = true;
  }

  static isInstance(value: unknown): value is FaultScheduleError {
    return (
      typeof value === 'object' &&
      value !== null &&
      (value as Record<symbol, unknown>)[FAULT_SCHEDULE_ERROR_MARKER] === true
    );
  }
}

export function emptyCounts(): FaultCounts {
  return Object.fromEntries(FAULT_KINDS.map((kind) => [kind, 0])) as FaultCounts;
}

function checkNonNegative(value: number | undefined, field: string): void {
  if (value !== undefined && !(Number.isFinite(value) && value >= 0)) {
    throw new FaultScheduleError(`${field} must be a finite number >= 0, got ${String(value)}`);
  }
}

/** Throws `FaultScheduleError` for a schedule the tools cannot run exactly. */
export function validateSchedule(schedule: FaultSchedule): void {
  if (typeof schedule !== 'object' || schedule === null || !Array.isArray(schedule.rules)) {
    throw new FaultScheduleError('schedule must be an object with a rules array');
  }
  schedule.rules.forEach((rule, index) => {
    const field = `rules[${index}]`;
    if (!(FAULT_KINDS as readonly string[]).includes(rule.kind)) {
      throw new FaultScheduleError(
        `${field}.kind must be one of ${FAULT_KINDS.join(', ')}, got ${String(rule.kind)}`,
      );
    }
    if (
      rule.probability !== undefined &&
      !(Number.isFinite(rule.probability) && rule.probability >= 0 && rule.probability <= 1)
    ) {
      throw new FaultScheduleError(`${field}.probability must be within [0, 1]`);
    }
    checkNonNegative(rule.skip, `${field}.skip`);
    checkNonNegative(rule.limit, `${field}.limit`);
    checkNonNegative(rule.stallMs, `${field}.stallMs`);
    checkNonNegative(rule.stallAfterBytes, `${field}.stallAfterBytes`);
    checkNonNegative(rule.durationMs, `${field}.durationMs`);
    if (Array.isArray(rule.latencyMs)) {
      const [low, high] = rule.latencyMs as readonly [number, number];
      checkNonNegative(low, `${field}.latencyMs[0]`);
      checkNonNegative(high, `${field}.latencyMs[1]`);
      if (high < low) throw new FaultScheduleError(`${field}.latencyMs must be [min, max]`);
    } else {
      checkNonNegative(rule.latencyMs as number | undefined, `${field}.latencyMs`);
    }
    if (rule.methods !== undefined && !Array.isArray(rule.methods)) {
      throw new FaultScheduleError(`${field}.methods must be an array of names`);
    }
  });
}

/** A 32-bit mix (murmur3's finaliser over a running hash): cheap, well spread, stable. */
function mix(hash: number, value: number): number {
  let h = (hash ^ Math.imul(value | 0, 0x9e3779b1)) >>> 0;
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b) >>> 0;
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35) >>> 0;
  return (h ^ (h >>> 16)) >>> 0;
}

/** A number in [0, 1) fixed by its inputs. */
export function uniform(seed: number, rule: number, match: number, salt: number): number {
  let h = mix(0x811c9dc5, seed);
  h = mix(h, Math.floor(seed / 0x1_0000_0000));
  h = mix(h, rule);
  h = mix(h, match);
  h = mix(h, Math.floor(match / 0x1_0000_0000));
  h = mix(h, salt);
  return h / 0x1_0000_0000;
}

const SALT_FIRE = 1;
const SALT_AMOUNT = 2;

function pathMatches(pattern: string | RegExp | undefined, path: string): boolean {
  if (pattern === undefined) return true;
  if (typeof pattern === 'string') return path.includes(pattern);
  pattern.lastIndex = 0; // a global RegExp would otherwise remember its last match
  return pattern.test(path);
}

/**
 * Applies a schedule to a sequence of requests. One instance per tool; not
 * shared between tools, so each tool's decisions depend only on its own
 * traffic.
 */
export class ScheduleRunner {
  readonly #seed: number;
  #rules: readonly FaultRule[];
  #matches: number[];
  #fired: number[];
  readonly #caseInsensitiveMethods: boolean;

  constructor(schedule: FaultSchedule, seed: number, options: { caseInsensitiveMethods: boolean }) {
    if (!Number.isSafeInteger(seed)) {
      throw new FaultScheduleError(`seed must be a safe integer, got ${String(seed)}`);
    }
    validateSchedule(schedule);
    this.#seed = seed;
    this.#rules = [...schedule.rules];
    this.#matches = this.#rules.map(() => 0);
    this.#fired = this.#rules.map(() => 0);
    this.#caseInsensitiveMethods = options.caseInsensitiveMethods;
  }

  /** Replaces the rules; every rule's match count starts again from zero. */
  replace(schedule: FaultSchedule): void {
    validateSchedule(schedule);
    this.#rules = [...schedule.rules];
    this.#matches = this.#rules.map(() => 0);
    this.#fired = this.#rules.map(() => 0);
  }

  /** Decides the faults for the next request (call once per request, in arrival order). */
  decide(method: string, path: string, query?: string): FaultDecision {
    let latencyMs = 0;
    const latencies: { rule: number; ms: number }[] = [];
    let fault: TerminalFault | undefined;
    this.#rules.forEach((rule, index) => {
      if (!this.#methodMatches(rule.methods, method) || !pathMatches(rule.path, path)) return;
      if (query !== undefined && !pathMatches(rule.query, query)) return;
      const match = ++this.#matches[index]!;
      if (match <= (rule.skip ?? 0)) return;
      if (rule.limit !== undefined && this.#fired[index]! >= rule.limit) return;
      if (uniform(this.#seed, index, match, SALT_FIRE) >= (rule.probability ?? 1)) return;
      const amount = uniform(this.#seed, index, match, SALT_AMOUNT);
      if (rule.kind === 'latency') {
        this.#fired[index]! += 1;
        const ms = latencyOf(rule, amount);
        latencyMs += ms;
        latencies.push({ rule: index, ms });
        return;
      }
      if (fault !== undefined) return;
      this.#fired[index]! += 1;
      switch (rule.kind) {
        case 'stall':
          fault = {
            kind: 'stall',
            rule: index,
            stallMs: rule.stallMs ?? 1000,
            stallAfterBytes: rule.stallAfterBytes ?? 0,
          };
          break;
        case 'partition':
          fault = { kind: 'partition', rule: index, durationMs: rule.durationMs ?? 1000 };
          break;
        default:
          fault = { kind: rule.kind, rule: index };
      }
    });
    return fault === undefined ? { latencyMs, latencies } : { latencyMs, latencies, fault };
  }

  #methodMatches(methods: readonly string[] | undefined, method: string): boolean {
    if (methods === undefined) return true;
    if (this.#caseInsensitiveMethods) {
      const upper = method.toUpperCase();
      return methods.some((candidate) => candidate.toUpperCase() === upper);
    }
    return methods.includes(method);
  }
}

function latencyOf(rule: FaultRule, amount: number): number {
  const latency = rule.latencyMs ?? 100;
  if (typeof latency === 'number') return latency;
  const [low, high] = latency as readonly [number, number];
  return Math.round(low + (high - low) * amount);
}
