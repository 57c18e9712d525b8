/**
 * Restoring a SQLite database file from a backup prefix: the restore point is
 * downloaded and checked into a staging directory beside the target, the
 * database is rebuilt to the chosen commit, checked with
 * `PRAGMA integrity_check`, and moved into place atomically.
 */
import { basename, dirname } from 'node:path';
import {
  NoRestorePointError,
  restore,
  sqliteCommitAtTime,
  sqliteMaterializer,
} from '@x/backup-worker';
import type { ObjectStore } from '@x/store';
import type { ProgressState } from './progress-bar.ts';

export interface DatabaseRestoreOptions {
  readonly manifestKey?: string;
  readonly commitSeq?: number;
  /** Unix milliseconds: the newest commit at or before it. */
  readonly time?: number;
  readonly force: boolean;
  readonly onProgress?: (state: ProgressState) => void;
  readonly signal?: AbortSignal;
}

export interface DatabaseRestoreResult {
  readonly commitSeq: number;
  readonly manifestKey: string;
}

export async function restoreDatabase(
  store: ObjectStore,
  prefix: string,
  target: string,
  options: DatabaseRestoreOptions,
): Promise<DatabaseRestoreResult> {
  let { manifestKey, commitSeq } = options;
  if (options.time !== undefined) {
    // Commit times live in the shipped commit records: find the newest commit at or before it.
    const found = await sqliteCommitAtTime(
      store,
      prefix,
      options.time,
      options.signal ? { signal: options.signal } : {},
    );
    if (found === null) {
      throw new NoRestorePointError(
        prefix,
        `no restore point holds a commit at or before ${new Date(options.time).toISOString()}`,
      );
    }
    manifestKey = found.manifestKey;
    commitSeq = found.commitSeq;
  }
  const result = await restore(store, prefix, dirname(target), {
    materializer: sqliteMaterializer({ databaseName: basename(target) }),
    force: options.force,
    ...(manifestKey ? { manifestKey } : {}),
    ...(commitSeq !== undefined ? { commitSeq } : {}),
    ...(options.onProgress ? { onProgress: options.onProgress } : {}),
    ...(options.signal ? { signal: options.signal } : {}),
  });
  return { commitSeq: result.commitSeq, manifestKey: result.manifestKey };
}
