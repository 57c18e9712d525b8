/**
 * Which files of a watched directory are databases, and the prefix each one
 * is backed up under (directory-layout.ts), named by its path relative to
 * the directory with `/` between directories. A name that would not be a safe key, or that
 * would share a prefix with another database's on a store that folds case,
 * is refused with a {@link DatabaseNameError} and never backed up; the
 * others are.
 */
import { type Dirent, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { keyProblem } from '@x/store/keys';
import type { StoreLocation } from '../store-url.ts';
import { type DirectoryLayout, locationIdentity } from './directory-layout.ts';

/** A database of the directory, by its path relative to the directory. */
export interface DirectoryDatabaseName {
  /** `/`-separated, relative to the directory. */
  readonly relative: string;
  /** Absolute. */
  readonly path: string;
  /** Where its backup is written. */
  readonly location: StoreLocation;
}

/** A file that matches the pattern but cannot be backed up under a prefix of its own. */
export class DatabaseNameError extends Error {
  /** Whether the same call, made again later, may succeed with nothing else changed. */
  get retryable(): boolean {
    return false;
  }

  override readonly name = 'DatabaseNameError';
  readonly code = 'DATABASE_NAME_REFUSED';
  /** Relative to the directory. */
  readonly relative: string;

  constructor(relative: string, why: string) {
    super(`${JSON.stringify(relative)} is not backed up: ${why}`);
    this.relative = relative;
  }
}

/** What a scan found: the databases, and the names it refused with why. */
export interface DirectoryScan {
  readonly databases: readonly DirectoryDatabaseName[];
  readonly refused: readonly DatabaseNameError[];
}

export interface ScanOptions {
  /** A glob on the file name alone: `*`, `?` and `[…]` (`[!…]` negates). */
  readonly pattern: string;
  /** Also look in subdirectories (never through a symbolic link). */
  readonly recursive: boolean;
  /** Where a database's backup goes, or why it has none (directory-layout.ts). */
  readonly locationOf: DirectoryLayout['locationOf'];
}

/** The SQLite companions of a database: never databases themselves. */
const COMPANION_SUFFIXES = ['-wal', '-shm', '-journal'];

/**
 * The regular files under `directory` whose names match the pattern,
 * skipping hidden names (sidecar directories among them), symbolic links
 * and SQLite's companion files.
 */
export function scanDirectory(directory: string, options: ScanOptions): DirectoryScan {
  const matches = globMatcher(options.pattern);
  const databases: DirectoryDatabaseName[] = [];
  const refused: DatabaseNameError[] = [];
  const byFoldedPrefix = new Map<string, string>();
  const visit = (relativeDirectory: string): void => {
    let entries: Dirent[];
    try {
      entries = readdirSync(join(directory, relativeDirectory), { withFileTypes: true });
    } catch (error) {
      // A subdirectory removed while it is read holds nothing to back up.
      if (relativeDirectory !== '' && isGone(error)) return;
      throw error;
    }
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const entry of entries) {
      if (entry.name.startsWith('.')) continue;
      const relative = relativeDirectory === '' ? entry.name : `${relativeDirectory}/${entry.name}`;
      if (entry.isDirectory()) {
        if (options.recursive) visit(relative);
        continue;
      }
      if (!entry.isFile() || !matches(entry.name)) continue;
      if (COMPANION_SUFFIXES.some((suffix) => entry.name.endsWith(suffix))) continue;
      const named = nameOf(directory, relative, options.locationOf, byFoldedPrefix);
      if (named instanceof DatabaseNameError) refused.push(named);
      else databases.push(named);
    }
  };
  visit('');
  return { databases, refused };
}

function nameOf(
  directory: string,
  relative: string,
  locationOf: ScanOptions['locationOf'],
  byFoldedPrefix: Map<string, string>,
): DirectoryDatabaseName | DatabaseNameError {
  const problem = keyProblem(relative);
  if (problem !== undefined)
    return new DatabaseNameError(relative, `its path is not a valid object key (${problem})`);
  const placed = locationOf(relative);
  if ('problem' in placed) return new DatabaseNameError(relative, placed.problem);
  const { location } = placed;
  const prefixProblem = location.prefix === '' ? undefined : keyProblem(location.prefix);
  if (prefixProblem !== undefined)
    return new DatabaseNameError(
      relative,
      `its prefix ${location.prefix} is not valid (${prefixProblem})`,
    );
  // A store on a case-insensitive file system (or a service that folds
  // case) would put both in one place: the first by name order keeps it.
  const folded = locationIdentity(location).toLowerCase();
  const other = byFoldedPrefix.get(folded);
  if (other !== undefined)
    return new DatabaseNameError(
      relative,
      `its prefix differs from ${JSON.stringify(other)}'s only by case; rename one of them`,
    );
  byFoldedPrefix.set(folded, relative);
  return { relative, path: join(directory, ...relative.split('/')), location };
}

function isGone(error: unknown): boolean {
  const code = (error as { code?: unknown }).code;
  return code === 'ENOENT' || code === 'ENOTDIR';
}

/** A glob on one file name: `*` any run, `?` one character, `[…]` a class (`[!…]` negated). */
export function globMatcher(pattern: string): (name: string) => boolean {
  if (pattern === '' || pattern.includes('/'))
    throw new Error(`the pattern ${JSON.stringify(pattern)} must be a file name glob, without "/"`);
  let source = '';
  for (let i = 0; i < pattern.length; i++) {
    const char = pattern[i]!;
    if (char === '*') source += '.*';
    else if (char === '?') source += '.';
    else if (char === '[') {
      const close = pattern.indexOf(']', i + 2);
      if (close === -1) source += '\\[';
      else {
        let body = pattern.slice(i + 1, close);
        const negated = body.startsWith('!');
        if (negated) body = body.slice(1);
        source += `[${negated ? '^' : ''}${body.replace(/[\\^\]]/g, '\\$&')}]`;
        i = close;
      }
    } else source += char.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  }
  const expression = new RegExp(`^${source}$`, 'u');
  return (name) => expression.test(name);
}
