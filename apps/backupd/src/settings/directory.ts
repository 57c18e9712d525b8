/**
 * A database entry that names a `directory` instead of a `path`: every
 * database of it, each woken only while it changes (directory/). Its keys
 * beside the per-database settings: `pattern`, `recursive`, `sleepAfter`,
 * `rescan`, each with the command line's default and bounds.
 */
import { isAbsolute, resolve } from 'node:path';
import { globMatcher } from '../directory/database-names.ts';
import { describe, formatDuration, parseDuration } from '../duration.ts';
import type { DirectoryOptions } from './parsed-config.ts';

export const DIRECTORY_DEFAULTS: DirectoryOptions = {
  pattern: '*.db',
  recursive: false,
  quietMs: 30_000,
  rescanMs: 10_000,
};

/** Bounds of `sleepAfter` and `rescan` (ms). */
export const SLEEP_AFTER_BOUNDS = { min: 1000, max: 86_400_000 } as const;
export const RESCAN_BOUNDS = { min: 1000, max: 3_600_000 } as const;

/** Why `text` is not a duration within `bounds`, or its milliseconds. */
export function boundedDuration(
  value: unknown,
  bounds: { readonly min: number; readonly max: number },
): number | string {
  const ms = parseDuration(value);
  if (typeof ms === 'string') return ms;
  if (ms < bounds.min || ms > bounds.max)
    return `must be between ${formatDuration(bounds.min)} and ${formatDuration(bounds.max)}, got ${describe(value)}`;
  return ms;
}

/** Why `pattern` is not a file-name glob, or `undefined`. */
export function patternProblem(pattern: unknown): string | undefined {
  if (typeof pattern !== 'string')
    return `must be a glob on the file name, got ${describe(pattern)}`;
  try {
    globMatcher(pattern);
    return undefined;
  } catch (error) {
    return (error as Error).message;
  }
}

/**
 * The entry's directory and its options; `undefined` for an entry without
 * `directory` (whose directory keys are then refused).
 */
export function validateDirectory(
  entry: Record<string, unknown>,
  at: string,
  baseDir: string,
  problems: string[],
): { readonly path: string; readonly directory: DirectoryOptions } | undefined {
  const given = ['pattern', 'recursive', 'sleepAfter', 'rescan'].filter(
    (key) => entry[key] !== undefined,
  );
  if (entry.directory === undefined) {
    for (const key of given) problems.push(`${at}.${key}: goes with "directory"`);
    return undefined;
  }
  if (entry.path !== undefined) problems.push(`${at}: give either "path" or "directory", not both`);
  if (entry.type !== undefined && entry.type !== 'sqlite')
    problems.push(`${at}.type: a directory's databases are SQLite databases`);
  const text = entry.directory;
  if (typeof text !== 'string' || text.trim() === '') {
    problems.push(`${at}.directory: must be a path, got ${describe(text)}`);
    return undefined;
  }
  const pattern = entry.pattern ?? DIRECTORY_DEFAULTS.pattern;
  const badPattern = patternProblem(pattern);
  if (badPattern !== undefined) problems.push(`${at}.pattern: ${badPattern}`);
  const recursive = entry.recursive ?? DIRECTORY_DEFAULTS.recursive;
  if (typeof recursive !== 'boolean')
    problems.push(`${at}.recursive: must be true or false, got ${describe(recursive)}`);
  const duration = (
    key: string,
    fallback: number,
    bounds: { readonly min: number; readonly max: number },
  ): number => {
    if (entry[key] === undefined) return fallback;
    const ms = boundedDuration(entry[key], bounds);
    if (typeof ms === 'string') {
      problems.push(`${at}.${key}: ${ms}`);
      return fallback;
    }
    return ms;
  };
  return {
    path: isAbsolute(text) ? text : resolve(baseDir, text),
    directory: {
      pattern: typeof pattern === 'string' ? pattern : DIRECTORY_DEFAULTS.pattern,
      recursive: recursive === true,
      quietMs: duration('sleepAfter', DIRECTORY_DEFAULTS.quietMs, SLEEP_AFTER_BOUNDS),
      rescanMs: duration('rescan', DIRECTORY_DEFAULTS.rescanMs, RESCAN_BOUNDS),
    },
  };
}
