/**
 * Restoring a SQLite database file from a backup prefix: the restore point is
 * downloaded and checked into a staging directory beside the target, the
 * database is rebuilt to the chosen commit, checked with
 * `PRAGMA integrity_check`, and moved into place atomically.
 *
 * The restore library works on a directory; this module speaks of the
 * database file, so its refusal to overwrite names the file (see
 * {@link DatabaseTargetExistsError}).
 */

import { basename, dirname, join } from 'node:path';
import type { AgeIdentity } from '@x/age-envelope';
import {
  type LatestFallback,
  NoRestorePointError,
  ObjectMissingError,
  type RestoreOptions,
  type RestorePointTarget,
  type RestoreTarget,
  RestoreTargetNotEmptyError,
  type RolledForward,
  restore,
} from '@x/restore';
import { sqliteCommitAtTime, sqliteMaterializer } from '@x/source-sqlite';
import type { ObjectStore } from '@x/store';
import type { ProgressState } from './progress-bar.ts';

/** The newest commit at or before `time` (Unix milliseconds): SQLite's commit records date them. */
export interface TimeTarget {
  readonly kind: 'time';
  readonly time: number;
}

/** Which state of a database to restore: one of `@x/restore`'s targets, or a time. */
export type DatabaseRestoreTarget = RestoreTarget | TimeTarget;

export interface DatabaseRestoreOptions {
  /** Default the latest state. */
  readonly target?: DatabaseRestoreTarget;
  readonly force: boolean;
  readonly onProgress?: (state: ProgressState) => void;
  /** `@x/restore`'s: the restore point chosen, before anything is downloaded. */
  readonly onChosen?: RestoreOptions['onChosen'];
  readonly signal?: AbortSignal;
  /** What opens encrypted objects; none: an encrypted restore point is refused, naming its recipients. */
  readonly identities?: readonly AgeIdentity[];
}

/**
 * The database file (or its -wal/-shm, or backupd's files beside it) already
 * exists and `force` was not given; nothing was written. Keeps the library's
 * code, `RESTORE_TARGET_NOT_EMPTY`, so callers that act on it (exit code 3)
 * still do; the message names the file, not the directory it is in.
 */
export class DatabaseTargetExistsError extends Error {
  /** Whether the same call, made again later, may succeed with nothing else changed. */
  get retryable(): boolean {
    return false;
  }

  readonly code = 'RESTORE_TARGET_NOT_EMPTY';
  /** The database file asked for. */
  readonly target: string;
  /** The names found in its directory that the restore would write. */
  readonly entries: readonly string[];

  constructor(target: string, entries: readonly string[], cause: unknown) {
    const name = basename(target);
    const others = entries.filter((entry) => entry !== name);
    super(
      entries.includes(name)
        ? `the database file ${target} already exists${others.length > 0 ? ` (with ${others.join(', ')} beside it)` : ''}; nothing was restored`
        : `${target} does not exist, but files of it do (${others.map((entry) => join(dirname(target), entry)).join(', ')}); nothing was restored`,
      { cause },
    );
    this.name = 'DatabaseTargetExistsError';
    this.target = target;
    this.entries = entries;
  }
}

export interface DatabaseRestoreResult {
  readonly commitSeq: number;
  readonly manifestKey: string;
  /**
   * The recorded commit time (ISO 8601, UTC) of the state restored: its last
   * commit's, or its snapshot's when it holds no commit past it; `null` when
   * the backup does not record it (a version 1 restore point at its snapshot).
   */
  readonly commitTime: string | null;
  /** Objects downloaded and checked, and their stored bytes (a compressed snapshot counts compressed). */
  readonly objects: number;
  readonly bytes: number;
  /** Set when LATEST was unusable and the newest restore point that passes restore's checks was used. */
  readonly fellBackFrom?: LatestFallback;
  /** A restore of the latest state: what it applied beyond its restore point (`@x/restore`). */
  readonly rolledForward?: RolledForward;
}

/** What a time search chose: the restore point and commit (rolled forward into, when past its own). */
export interface TimeChoice {
  readonly target: RestorePointTarget;
  /** The chosen commit's recorded time (ms). */
  readonly commitTime: number;
}

/** The newest commit at or before `time` (commit times live in the shipped commit records). */
export async function chooseByTime(
  store: ObjectStore,
  prefix: string,
  time: number,
  signal: AbortSignal | undefined,
  identities: readonly AgeIdentity[] = [],
): Promise<TimeChoice> {
  const found = await sqliteCommitAtTime(store, prefix, time, {
    ...(signal ? { signal } : {}),
    identities,
  });
  if (found === null) {
    throw new NoRestorePointError(
      prefix,
      `no restore point holds a commit at or before ${new Date(time).toISOString()}`,
    );
  }
  return { target: found.target, commitTime: found.commitTime };
}

/**
 * Attempts at a restore by time whose restore point retention retired while
 * it was read (a compaction superseded it): the time is searched again, and
 * when that names another restore point the restore starts over from it.
 * A restore by commit or of the latest state gets the same from `@x/restore`.
 */
const TIME_SEARCH_ATTEMPTS = 3;

/** Restores the state `options.target` names as the database file `databasePath`. */
export async function restoreDatabase(
  store: ObjectStore,
  prefix: string,
  databasePath: string,
  options: DatabaseRestoreOptions,
): Promise<DatabaseRestoreResult> {
  const { target } = options;
  if (target?.kind !== 'time') return restoreTarget(store, prefix, databasePath, options, target);
  let choice = await chooseByTime(store, prefix, target.time, options.signal, options.identities);
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await restoreTarget(store, prefix, databasePath, options, choice.target);
    } catch (error) {
      if (attempt >= TIME_SEARCH_ATTEMPTS || !ObjectMissingError.isInstance(error)) throw error;
      const again = await chooseByTime(
        store,
        prefix,
        target.time,
        options.signal,
        options.identities,
      ).catch(() => null);
      if (again === null || again.target.manifestKey === error.manifestKey) throw error;
      choice = again;
    }
  }
}

/** One restore of `target` (the latest state when undefined). */
async function restoreTarget(
  store: ObjectStore,
  prefix: string,
  databasePath: string,
  options: DatabaseRestoreOptions,
  target: RestoreTarget | undefined,
): Promise<DatabaseRestoreResult> {
  let result: Awaited<ReturnType<typeof restore>>;
  // What the rebuilt database holds, from the records applied (so it is
  // right for every way of choosing, a roll-forward included).
  let commitTime: number | null = null;
  try {
    result = await restore(store, prefix, dirname(databasePath), {
      materializer: sqliteMaterializer({
        databaseName: basename(databasePath),
        onRebuilt: (rebuilt) => {
          commitTime = rebuilt.commitTime;
        },
      }),
      force: options.force,
      identities: options.identities ?? [],
      ...(target === undefined ? {} : { target }),
      ...(options.onProgress ? { onProgress: options.onProgress } : {}),
      ...(options.onChosen ? { onChosen: options.onChosen } : {}),
      ...(options.signal ? { signal: options.signal } : {}),
    });
  } catch (error) {
    // The library speaks of the directory it restores into and of its own
    // `force` option; a person restoring a database file needs that file named.
    if (RestoreTargetNotEmptyError.isInstance(error))
      throw new DatabaseTargetExistsError(databasePath, error.entries, error);
    throw error;
  }
  return {
    commitSeq: result.commitSeq,
    manifestKey: result.manifestKey,
    commitTime: commitTime === null ? null : new Date(commitTime).toISOString(),
    objects: result.objects,
    bytes: result.bytes,
    ...(result.fellBackFrom ? { fellBackFrom: result.fellBackFrom } : {}),
    ...(result.rolledForward ? { rolledForward: result.rolledForward } : {}),
  };
}
