/**
 * Durations in config and flags: `250ms`, `1s`, `1.5s`, `2m`, `1h`. Returns
 * milliseconds; refuses anything else, negative values, and values beyond a
 * day (only the retention window needs more: it asks for days, `7d`, too,
 * and bounds the value itself). A bare number is refused too, with the
 * unit to add: `leaseTtl: 5` once meant seconds silently, and read as
 * milliseconds or minutes it is off by a factor of a thousand or sixty.
 */
const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const PATTERN = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/;
const BARE_NUMBER = /^\d+(?:\.\d+)?$/;
const MAX_MS = 24 * 3_600_000;

/** The problem with a duration written as a bare number (`5`), suggesting `5s`. */
export function bareNumberProblem(number: string): string {
  return `a bare number (${number}) is not a duration: write "${number}s" for seconds (units: ms, s, m, h)`;
}

/** Whether `text` is a bare number, which {@link parseDuration} refuses. */
export function isBareNumber(text: string): boolean {
  return BARE_NUMBER.test(text.trim());
}

/**
 * `long`: the setting needs more than a day (the retention window): `d`
 * (days) is a unit too, and the caller checks the range itself.
 */
export function parseDuration(value: unknown, long?: { readonly days: true }): number | string {
  if (typeof value === 'number') {
    if (!Number.isFinite(value) || value < 0)
      return `must be a non-negative duration, got ${value}`;
    return bareNumberProblem(String(value));
  }
  if (typeof value !== 'string')
    return `must be a duration such as "1s" or "500ms", got ${describe(value)}`;
  const text = value.trim();
  if (isBareNumber(text)) return bareNumberProblem(text);
  const match = PATTERN.exec(text);
  if (!match || (match[2] === 'd' && long === undefined))
    return `must be a duration such as "1s" or "500ms", got ${JSON.stringify(value)}`;
  const amount = Number(match[1]);
  const unit = UNITS[match[2]!] ?? 1000;
  return long === undefined ? checkRange(amount * unit) : Math.round(amount * unit);
}

function checkRange(milliseconds: number): number | string {
  if (milliseconds > MAX_MS) return 'must be at most 24h';
  return Math.round(milliseconds);
}

export function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'object') return 'a mapping';
  return `${typeof value} ${JSON.stringify(value)}`;
}

/** Milliseconds as the largest unit that holds them whole: `1h`, `90s`, `250ms`. */
export function formatDuration(milliseconds: number): string {
  for (const [unit, size] of [
    ['h', 3_600_000],
    ['m', 60_000],
    ['s', 1000],
  ] as const)
    if (milliseconds >= size && milliseconds % size === 0) return `${milliseconds / size}${unit}`;
  return `${milliseconds}ms`;
}
