/**
 * backupd's own files for one database, kept in one hidden directory beside
 * it: `<dir>/.<name>-backupd/`. Releases up to 0.2 kept them as six files
 * named after the database (`<db>-backupd.lineage` and so on); the first
 * start of a later release moves them in ({@link adoptLegacySidecars}).
 *
 * The files, by who writes them:
 * - `lineage`, `state`, `resume`: the SQLite source (its lineage id, its
 *   commit count, the record a graceful stop leaves for the next start);
 * - `parent`: restore (the restore point the database came from);
 * - `lock`, `holder.json`: the `backupd replicate` command (one replicate
 *   per database, and the lease instance id it keeps), and `backupd follow`;
 * - `follow`: `@x/follow`, marking a database file a follower created.
 */
import { existsSync, linkSync, mkdirSync, statSync, unlinkSync } from 'node:fs';
import { rename, writeFile } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';

/** The paths of a database's sidecar files. */
export interface SqliteSidecarFiles {
  /** The hidden directory holding them all. */
  readonly directory: string;
  readonly lineage: string;
  readonly state: string;
  readonly resume: string;
  readonly parent: string;
  readonly lock: string;
  readonly holder: string;
}

/** File names inside the sidecar directory. */
export const SQLITE_SIDECAR_NAMES = {
  lineage: 'lineage',
  state: 'state',
  resume: 'resume',
  parent: 'parent',
  lock: 'lock',
  holder: 'holder.json',
} as const;

export type SqliteSidecarKind = keyof typeof SQLITE_SIDECAR_NAMES;

/** The suffix each file had, after the database's own name, up to release 0.2. */
export const SQLITE_LEGACY_SIDECAR_SUFFIXES: Readonly<Record<SqliteSidecarKind, string>> = {
  lineage: '-backupd.lineage',
  state: '-backupd.state',
  resume: '-backupd.resume',
  parent: '-backupd.parent',
  lock: '-backupd.lock',
  holder: '-backupd.json',
};

/** The sidecar directory's name for a database file named `databaseName`. */
export function sqliteSidecarDirectoryName(databaseName: string): string {
  return `.${databaseName}-backupd`;
}

/** Where the sidecar files of the database at `databasePath` live. */
export function sqliteSidecarFiles(databasePath: string): SqliteSidecarFiles {
  const directory = join(dirname(databasePath), sqliteSidecarDirectoryName(basename(databasePath)));
  const at = (kind: SqliteSidecarKind) => join(directory, SQLITE_SIDECAR_NAMES[kind]);
  return {
    directory,
    lineage: at('lineage'),
    state: at('state'),
    resume: at('resume'),
    parent: at('parent'),
    lock: at('lock'),
    holder: at('holder'),
  };
}

/**
 * Creates the sidecar directory when missing (owner-only: it names the
 * buckets), and the database's directory too when that is missing.
 */
export function ensureSidecarDirectory(databasePath: string): string {
  const { directory } = sqliteSidecarFiles(databasePath);
  mkdirSync(dirname(directory), { recursive: true });
  try {
    mkdirSync(directory, { mode: 0o700 });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    if (!statSync(directory).isDirectory())
      throw Object.assign(
        new Error(
          `${directory} is not a directory: backupd keeps its files for ${databasePath} there; move that file away`,
        ),
        { code: 'ENOTDIR' },
      );
  }
  return directory;
}

/** One file moved by {@link adoptLegacySidecars}. */
export interface AdoptedSidecar {
  readonly kind: SqliteSidecarKind;
  readonly from: string;
  readonly to: string;
}

/**
 * Moves the files of `kinds` that an earlier release left beside the
 * database into the sidecar directory, keeping each file (its inode: a lock
 * held on the old name stays held). A file already in the directory stands:
 * the old one is removed when older, and moved over it when newer (a
 * release downgraded and upgraded again). The lock file is never replaced
 * or removed, since a process of an earlier release may hold it. Two
 * processes moving at once both succeed: a move is a hard link that never
 * replaces, then the removal of the old name.
 */
export function adoptLegacySidecars(
  databasePath: string,
  kinds: readonly SqliteSidecarKind[],
): AdoptedSidecar[] {
  const files = sqliteSidecarFiles(databasePath);
  const adopted: AdoptedSidecar[] = [];
  for (const kind of kinds) {
    const from = `${databasePath}${SQLITE_LEGACY_SIDECAR_SUFFIXES[kind]}`;
    if (!existsSync(from)) continue;
    const to = files[kind];
    ensureSidecarDirectory(databasePath);
    if (moveUnlessPresent(from, to)) {
      adopted.push({ kind, from, to });
      continue;
    }
    if (kind === 'lock') continue;
    if (mtimeOf(from) > mtimeOf(to)) {
      unlinkIfPresent(to);
      if (moveUnlessPresent(from, to)) adopted.push({ kind, from, to });
    } else {
      unlinkIfPresent(from);
    }
  }
  return adopted;
}

/** Moves `from` to `to` unless something is at `to`; `true` when it moved (or another process did). */
function moveUnlessPresent(from: string, to: string): boolean {
  try {
    linkSync(from, to);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'EEXIST') return false;
    throw error;
  }
  unlinkIfPresent(from);
  return true;
}

function mtimeOf(path: string): number {
  try {
    return statSync(path).mtimeMs;
  } catch {
    return 0;
  }
}

function unlinkIfPresent(path: string): void {
  try {
    unlinkSync(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
}

/** Writes `text` at `path` through a temporary file and a rename: a reader sees the old file or the new one. */
export async function writeAtomically(path: string, text: string): Promise<void> {
  const temporary = `${path}.tmp-${process.pid}`;
  await writeFile(temporary, text);
  await rename(temporary, path);
}
