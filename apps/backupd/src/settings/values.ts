/**
 * The kinds of value a setting takes: how a YAML value (after `${VAR}`) is
 * checked against the setting's bounds, how its variable is read in the
 * one-database mode, and how the README writes both.
 */
import { compactionLevelsProblem } from '@x/backup-worker';
import { CPU_PRIORITIES, type CpuPriority, isCpuPriority } from '@x/cpu-priority';
import {
  bareNumberProblem,
  describe,
  formatDuration,
  isBareNumber,
  parseDuration,
} from '../duration.ts';
import type { Retention } from './parsed-config.ts';

export interface Value<T, B> {
  readonly bounds: B;
  /** `value` as T; undefined once `at: problem` is in `problems`. */
  parse(value: unknown, at: string, problems: string[]): T | undefined;
  readonly reading: Reading;
  /** A value as YAML writes it, for the README. */
  show(value: T): string;
  /** What it accepts, for the README. */
  readonly accepted: string;
}

/** How a setting's variable is read in the one-database mode. */
export interface Reading {
  /** The variable's text as the YAML value it stands for; undefined leaves the setting out. */
  read(text: string, variable: string, problems: string[]): unknown;
  /** Written after the variable's name by `--help`. */
  readonly helpSuffix?: string;
  /** Written after it by the README. */
  readonly note?: string;
}

function refuse(problems: string[], at: string, problem: string): undefined {
  problems.push(`${at}: ${problem}`);
  return undefined;
}

// A bare number is named by its variable: the operator set BACKUPD_LEASE_TTL, not databases[0].leaseTtl.
const DURATION: Reading = {
  read(text, variable, problems) {
    if (!isBareNumber(text)) return text === '' ? undefined : text;
    problems.push(`${variable}: ${bareNumberProblem(text.trim())}`);
    return undefined;
  },
};

const DURATIONS: Reading = {
  note: '`30s,5m,1h` or `off`',
  read(text, variable, problems) {
    if (text.trim() === '') return undefined;
    if (text.trim() === 'off') return 'off';
    const items = text.split(',').map((item) => item.trim());
    const bare = items.filter((item) => isBareNumber(item));
    for (const item of bare) problems.push(`${variable}: ${bareNumberProblem(item)}`);
    return bare.length > 0 ? undefined : items;
  },
};

// Validation names what is not a number.
const NUMBER: Reading = { read: (text) => (text === '' ? undefined : Number(text)) };

// All digits is a count (as it was before durations were accepted); anything else a window.
const DIGITS: Reading = {
  read: (text) => (text === '' ? undefined : /^\d+$/.test(text) ? Number(text) : text),
};

const SWITCH: Reading = {
  helpSuffix: '=off',
  note: '`off` or `false`',
  read: (text) => text !== 'off' && text !== 'false',
};

/** A duration of `min` ms to a day. */
export function duration(bounds: { readonly min: number }): Value<number, typeof bounds> {
  return {
    bounds,
    parse(value, at, problems) {
      const ms = parseDuration(value);
      if (typeof ms === 'string') return refuse(problems, at, ms);
      return ms < bounds.min ? refuse(problems, at, `must be at least ${bounds.min}ms`) : ms;
    },
    reading: DURATION,
    show: formatDuration,
    accepted: `${formatDuration(bounds.min)} … 24h`,
  };
}

/** A duration kept in whole seconds (the lease counts seconds), from `min` to `max` seconds. */
export function seconds(bounds: {
  readonly min: number;
  readonly max: number;
}): Value<number, typeof bounds> {
  const [minMs, maxMs] = [bounds.min * 1000, bounds.max * 1000];
  return {
    bounds,
    parse(value, at, problems) {
      const ms = parseDuration(value);
      if (typeof ms === 'string') return refuse(problems, at, ms);
      if (ms < minMs) return refuse(problems, at, `must be at least ${minMs}ms`);
      if (ms > maxMs) return refuse(problems, at, `must be at most ${formatDuration(maxMs)}`);
      return Math.round(ms / 1000);
    },
    reading: DURATION,
    show: (value) => formatDuration(value * 1000),
    accepted: `${formatDuration(minMs)} … ${formatDuration(maxMs)}`,
  };
}

/** A duration of at least `min` ms, units up to days, or `0s`, which turns off what `zero` says. */
export function durationOrZero(
  bounds: { readonly min: number },
  zero: string,
): Value<number, typeof bounds> {
  return {
    bounds,
    parse(value, at, problems) {
      const ms = parseDuration(value, { days: true });
      if (typeof ms === 'string') return refuse(problems, at, ms);
      if (ms !== 0 && ms < bounds.min)
        return refuse(
          problems,
          at,
          `must be at least ${formatDuration(bounds.min)}, or 0s to ${zero}`,
        );
      return ms;
    },
    reading: DURATION,
    show: formatDuration,
    accepted: `${formatDuration(bounds.min)} or more (units up to days), or \`0s\` to ${zero}`,
  };
}

/** A number from `min` to `max`, or 0, which turns off what `zero` says. */
export function numberOrZero(
  bounds: { readonly min: number; readonly max: number },
  zero: string,
): Value<number, typeof bounds> {
  const { min, max } = bounds;
  return {
    bounds,
    parse(value, at, problems) {
      if (typeof value === 'number' && Number.isFinite(value))
        if (value === 0 || (value >= min && value <= max)) return value;
      return refuse(
        problems,
        at,
        `must be a number from ${min} to ${max}, or 0 to ${zero}, got ${describe(value)}`,
      );
    },
    reading: NUMBER,
    show: String,
    accepted: `${min} … ${max}, or \`0\` to ${zero}`,
  };
}

export function wholeNumber(bounds: { readonly min: number }): Value<number, typeof bounds> {
  return {
    bounds,
    parse(value, at, problems) {
      if (typeof value === 'number' && Number.isSafeInteger(value) && value >= bounds.min)
        return value;
      return refuse(
        problems,
        at,
        `must be a whole number of at least ${bounds.min}, got ${describe(value)}`,
      );
    },
    reading: NUMBER,
    show: String,
    accepted: `a whole number ≥ ${bounds.min}`,
  };
}

export const trueOrFalse: Value<boolean, undefined> = {
  bounds: undefined,
  parse(value, at, problems) {
    if (typeof value === 'boolean') return value;
    return refuse(problems, at, `must be true or false, got ${describe(value)}`);
  },
  reading: SWITCH,
  show: String,
  accepted: '`true`, `false`',
};

const DAY_MS = 86_400_000;

/**
 * A window (a duration, units up to days) or a count: a whole number, or
 * text of digits as `${VAR}` gives it (a bare integer was a count before
 * durations were accepted, and still is).
 */
export function retention(bounds: {
  readonly minCount: number;
  readonly minWindowMs: number;
  readonly maxWindowMs: number;
}): Value<Retention, typeof bounds> {
  const { minCount, minWindowMs, maxWindowMs } = bounds;
  const [shortest, longest] = [formatDuration(minWindowMs), `${maxWindowMs / DAY_MS}d`];
  const window = `${shortest} to ${longest}`;
  const forms = `a window such as "24h", "7d" or "90m" (${window}) or a count of restore points (a whole number, at least ${minCount})`;
  return {
    bounds,
    parse(value, at, problems) {
      const digits = typeof value === 'string' && /^\d+$/.test(value.trim());
      if (typeof value === 'number' || digits) {
        const count = Number(value);
        if (Number.isSafeInteger(count) && count >= minCount) return { count };
      } else if (typeof value === 'string' && !isBareNumber(value)) {
        const windowMs = parseDuration(value, { days: true });
        if (typeof windowMs === 'number') {
          if (windowMs >= minWindowMs && windowMs <= maxWindowMs) return { windowMs };
          return refuse(problems, at, `a window must be from ${window}, got ${describe(value)}`);
        }
      }
      return refuse(problems, at, `must be ${forms}, got ${describe(value)}`);
    },
    reading: DIGITS,
    show: (value) => ('count' in value ? String(value.count) : formatDuration(value.windowMs)),
    accepted: `a window of ${shortest} … ${longest} (\`retainFor\`), or a count ≥ ${minCount} (\`retain\`)`,
  };
}

const COMPACTION_FORMS =
  'a list of durations such as [30s, 5m, 1h] (ascending, each a whole multiple of the one before), or off';

/**
 * Compaction levels' windows: durations of at least `min` ms (a day at
 * most), each a whole multiple of the one before, so a window of one level
 * holds whole windows of the level below; the worker's own
 * `compactionLevelsProblem` checks the rest. `off` (or `[]`): none.
 */
export function compactionLevels(bounds: {
  readonly min: number;
  readonly maxLevels: number;
}): Value<readonly number[], typeof bounds> {
  return {
    bounds,
    parse(value, at, problems) {
      if (value === 'off') return [];
      if (!Array.isArray(value))
        return refuse(problems, at, `must be ${COMPACTION_FORMS}, got ${describe(value)}`);
      const before = problems.length;
      const levels: number[] = [];
      value.forEach((item, index) => {
        const ms = parseDuration(item);
        if (typeof ms === 'string') problems.push(`${at}[${index}]: ${ms}`);
        else if (ms < bounds.min)
          problems.push(
            `${at}[${index}]: must be at least ${formatDuration(bounds.min)}, got ${describe(item)}`,
          );
        else levels.push(ms);
      });
      if (problems.length > before) return undefined;
      // Named here with the item's path and durations; the worker's check
      // below refuses the same lists for its own callers.
      for (let index = 1; index < levels.length; index++) {
        const [previous, current] = [levels[index - 1]!, levels[index]!];
        if (current > previous && current % previous !== 0)
          problems.push(
            `${at}[${index}]: ${formatDuration(current)} is not a whole multiple of the level before it (${formatDuration(previous)})`,
          );
      }
      if (problems.length > before) return undefined;
      const problem = compactionLevelsProblem(levels);
      return problem === undefined ? levels : refuse(problems, at, problem);
    },
    reading: DURATIONS,
    show: (levels) => (levels.length === 0 ? 'off' : `[${levels.map(formatDuration).join(', ')}]`),
    accepted: `\`off\` (or \`[]\`), or up to ${bounds.maxLevels} durations of ${formatDuration(bounds.min)} … 24h, ascending, each a whole multiple of the one before`,
  };
}

/** `listen`: a "host:port" to serve on. */
export function listenAddress(value: unknown, at: string, problems: string[]): string | undefined {
  if (typeof value === 'string' && /^[^\s:]*:\d{1,5}$/.test(value)) return value;
  return refuse(
    problems,
    at,
    `must be "host:port" such as "127.0.0.1:9090", got ${describe(value)}`,
  );
}

/** `cpuPriority`, from the file or BACKUPD_CPU_PRIORITY. */
export function cpuPriority(
  value: unknown,
  at: string,
  problems: string[],
): CpuPriority | undefined {
  if (isCpuPriority(value)) return value;
  const names = CPU_PRIORITIES.map((name) => `"${name}"`).join(', ');
  return refuse(problems, at, `must be ${names}, got ${describe(value)}`);
}
