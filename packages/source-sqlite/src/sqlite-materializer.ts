/**
 * The SQLite materializer for the package's `restore`: a restore point of a
 * {@link SqliteSource} becomes one database file. The staged snapshot and
 * commit log (`<name>-backupd.snapshot`, `.log`) are rebuilt into the
 * database by {@link restoreSqliteDatabase} (with `integrity_check`); the
 * commit count goes to `state` and restore's parent record to `parent`, both
 * in the sidecar directory `.<name>-backupd/`. A forced restore removes the
 * old `-wal` (SQLite would replay it onto the restored file), `-shm`,
 * `lineage` and `state`, under today's names and release 0.2's; the replicate
 * command's `lock` and `holder.json` stay.
 */

import { createReadStream } from 'node:fs';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { RestoreMaterializer } from '@x/engine';
import { stateTimes } from '@x/manifest';
import { FramedWalCutter, RestorePointRejectedError } from '@x/restore';
import { COMMIT_RECORD_HEADER_BYTES, commitsOfRecordHeader } from './commit-record.ts';
import { restoreSqliteDatabase } from './rebuild-database.ts';
import {
  SQLITE_LEGACY_SIDECAR_SUFFIXES,
  SQLITE_SIDECAR_NAMES,
  sqliteSidecarDirectoryName,
} from './sidecar-files.ts';
import { SQLITE_SNAPSHOT_NAME } from './sqlite-source.ts';

export interface SqliteMaterializerOptions {
  /** File name of the restored database in the target directory, e.g. `app.db`. */
  readonly databaseName: string;
  /**
   * Called once the database is rebuilt (before restore moves it into place)
   * with the recorded time of the state it holds, ms: the last applied
   * commit record's, or with none applied the restore point's snapshot time
   * (manifest version 2); `null` when unknown (a version 1 restore point
   * restored to its snapshot).
   */
  readonly onRebuilt?: (rebuilt: { readonly commitTime: number | null }) => void;
}

/** Cuts the commit log after `commits`: one framed-log frame per commit, or per batch (its header says how many). */
export function commitLogCutter(commits: number): FramedWalCutter {
  return new FramedWalCutter(commits, {
    headerBytes: COMMIT_RECORD_HEADER_BYTES,
    commitsOf: commitsOfRecordHeader,
  });
}

export function sqliteMaterializer(options: SqliteMaterializerOptions): RestoreMaterializer {
  const name = options.databaseName;
  const snapshotName = `${name}-backupd.snapshot`;
  const logName = `${name}-backupd.log`;
  const sidecars = sqliteSidecarDirectoryName(name);
  const stateName = `${sidecars}/${SQLITE_SIDECAR_NAMES.state}`;
  // Not `resume`: a stale record is never trusted (its digest must match the image).
  const restorable = ['lineage', 'state', 'parent'] as const;
  const owned = new Set([
    name,
    `${name}-wal`,
    `${name}-shm`,
    `${name}-journal`,
    snapshotName,
    logName,
    ...restorable.map((kind) => `${sidecars}/${SQLITE_SIDECAR_NAMES[kind]}`),
    ...restorable.map((kind) => `${name}${SQLITE_LEGACY_SIDECAR_SUFFIXES[kind]}`),
  ]);
  return {
    name: 'sqlite',
    // A database file lives in the application's directory, beside its other files.
    sharesDirectory: true,
    companionDirectory: sidecars,
    walFileName: logName,
    parentRecordName: `${sidecars}/${SQLITE_SIDECAR_NAMES.parent}`,
    targetName(entry, manifest) {
      if (entry.name === SQLITE_SNAPSHOT_NAME) return snapshotName;
      throw new RestorePointRejectedError(`commit ${manifest.commitSeq}`, [
        `the manifest names a file ${JSON.stringify(entry.name)}, which a SQLite restore point never carries`,
      ]);
    },
    createWalCutter: commitLogCutter,
    ownsName(candidate) {
      return owned.has(candidate);
    },
    async finish(staged, finishOptions) {
      if (!staged.names.includes(snapshotName))
        throw new RestorePointRejectedError(`commit ${staged.commitSeq}`, [
          'the restore point has no snapshot',
        ]);
      const directory = staged.directory;
      const rebuilt = await restoreSqliteDatabase({
        targetPath: join(directory, name),
        snapshot: createReadStream(join(directory, snapshotName)),
        log: createReadStream(join(directory, logName)),
        force: true,
        ...(finishOptions.signal === undefined ? {} : { signal: finishOptions.signal }),
      });
      options.onRebuilt?.({
        commitTime:
          rebuilt.commitsApplied > 0 ? rebuilt.lastCommitTime : stateTimes(staged.manifest).from,
      });
      await rm(join(directory, snapshotName), { force: true });
      await rm(join(directory, logName), { force: true });
      await mkdir(join(directory, sidecars), { recursive: true });
      await writeFile(
        join(directory, stateName),
        `${JSON.stringify({ commitCount: staged.commitSeq })}\n`,
      );
      return [name, stateName];
    },
  };
}
