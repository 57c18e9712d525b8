/**
 * Durations in config and flags: `250ms`, `1s`, `1.5s`, `2m`, `1h`, or a bare
 * number of seconds. Returns milliseconds; refuses anything else, negative
 * values, and values beyond a day (no setting here needs more).
 */
const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
const PATTERN = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/;
const MAX_MS = 24 * 3_600_000;

export function parseDuration(value: unknown): number | string {
  if (typeof value === 'number') {
    if (!Number.isFinite(value) || value < 0)
      return `must be a non-negative duration, got ${value}`;
    return checkRange(value * 1000);
  }
  if (typeof value !== 'string')
    return `must be a duration such as "1s" or "500ms", got ${describe(value)}`;
  const match = PATTERN.exec(value.trim());
  if (!match) return `must be a duration such as "1s" or "500ms", got ${JSON.stringify(value)}`;
  const amount = Number(match[1]);
  const unit = UNITS[match[2] ?? 's'] ?? 1000;
  return checkRange(amount * unit);
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
