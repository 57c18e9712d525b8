/**
 * The SQLite engine's proof that a restore point restores (`RestoreCheck` of
 * `@x/restore`, for `verify` with `rebuild`): the staged snapshot and log
 * are rebuilt as a restore rebuilds them, then patched pages must hash as
 * recorded, `integrity_check` must answer `ok`, and every page must hash as
 * the log merged over the snapshot says (restore-point-page-hashes.ts; skipped
 * past `MAX_MERGED_PAGE_BYTES` of distinct pages). A finding throws
 * `RestoredStateError`; otherwise the target gets `restored.db` alone.
 */

import { createReadStream } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import type { RestoreCheck, StagedRestore } from '@x/engine';
import type { Manifest } from '@x/manifest';
import { RestoredStateError, type RestoredStateFinding } from '@x/restore';
import { PAGE_HASH_BYTES, wholeFrames } from './commit-record.ts';
import { restoreSqliteDatabase } from './rebuild-database.ts';
import { type RestorePointPages, restorePointPageHashes } from './restore-point-page-hashes.ts';
import { imageDigest } from './resume-record.ts';
import { SqliteBackupError, SqliteRestoreCorruptError } from './sqlite-errors.ts';
import { sqliteMaterializer } from './sqlite-materializer.ts';
import { SQLITE_SNAPSHOT_NAME } from './sqlite-source.ts';

/** Lines of `PRAGMA integrity_check` asked for and reported. */
const INTEGRITY_LINES = 5;
/** The file name the rebuilt database gets in the scratch directory. */
const CHECK_DATABASE_NAME = 'restored.db';

/**
 * The check `backupd verify --deep` runs on SQLite restore points: a
 * restore point whose files include the SQLite snapshot is rebuilt and
 * proved (see the module comment).
 */
export function sqliteRestoreCheck(): RestoreCheck {
  const base = sqliteMaterializer({ databaseName: CHECK_DATABASE_NAME });
  return {
    name: 'sqlite',
    recognizes: (manifest: Manifest) =>
      manifest.files.some((file) => file.name === SQLITE_SNAPSHOT_NAME),
    materializer: {
      ...base,
      name: 'sqlite-check',
      async finish(staged, options) {
        await checkStaged(staged, options.signal);
        return [CHECK_DATABASE_NAME];
      },
    },
  };
}

async function checkStaged(staged: StagedRestore, signal: AbortSignal | undefined): Promise<void> {
  const where = `commit ${staged.commitSeq}`;
  const snapshotPath = join(staged.directory, `${CHECK_DATABASE_NAME}-backupd.snapshot`);
  const logPath = join(staged.directory, `${CHECK_DATABASE_NAME}-backupd.log`);
  const checkedPath = join(staged.directory, CHECK_DATABASE_NAME);
  if (!staged.names.includes(`${CHECK_DATABASE_NAME}-backupd.snapshot`))
    throw new RestoredStateError(where, [
      { check: 'rebuild', message: 'the restore point has no snapshot' },
    ]);
  let pageSize: number;
  try {
    const rebuilt = await restoreSqliteDatabase({
      targetPath: checkedPath,
      snapshot: createReadStream(snapshotPath),
      log: createReadStream(logPath),
      force: true,
      verify: false,
      ...(signal === undefined ? {} : { signal }),
    });
    pageSize = rebuilt.pageSize;
  } catch (error) {
    if (SqliteRestoreCorruptError.isInstance(error) && error.pageHash !== undefined) {
      const { page, expected, found, commit } = error.pageHash;
      const message = `page ${page} of the rebuilt database hashes ${found}, and commit ${commit} of the log recorded ${expected} for it when backupd captured it`;
      throw new RestoredStateError(where, [{ check: 'page-hash', page, expected, found, message }]);
    }
    if (!SqliteBackupError.isInstance(error)) throw error;
    throw new RestoredStateError(where, [
      { check: 'rebuild', message: `the database does not rebuild: ${error.message}` },
    ]);
  }
  const expected = await restorePointPageHashes(
    {
      image: () => createReadStream(snapshotPath),
      logBodies: () => wholeFrames(createReadStream(logPath, { highWaterMark: 1024 * 1024 })),
    },
    pageSize,
  );
  // The inputs are not needed any more: the disk holds the rebuilt file alone.
  await rm(snapshotPath, { force: true });
  await rm(logPath, { force: true });
  const findings: RestoredStateFinding[] = [];
  const integrity = integrityLines(checkedPath);
  if (integrity !== null)
    findings.push({
      check: 'integrity-check',
      message: `PRAGMA integrity_check of the rebuilt database answers: ${integrity.join('; ')}`,
    });
  if (expected !== null) {
    const found = await imageDigest(createReadStream(checkedPath), pageSize);
    const mismatch = pageHashMismatch(expected, found, pageSize);
    if (mismatch !== null) findings.push(mismatch);
  }
  if (findings.length > 0) throw new RestoredStateError(where, findings);
}

/** `null` when `PRAGMA integrity_check` answers `ok`; else its first lines (or why SQLite cannot read the file). */
export function integrityLines(path: string): string[] | null {
  let database: DatabaseSync | undefined;
  try {
    database = new DatabaseSync(path);
    const rows = database.prepare(`PRAGMA integrity_check(${INTEGRITY_LINES})`).all() as {
      integrity_check: string;
    }[];
    const lines = rows.flatMap((row) => row.integrity_check.split('\n'));
    return lines.length === 1 && lines[0] === 'ok' ? null : lines.slice(0, INTEGRITY_LINES);
  } catch (error) {
    return [`SQLite cannot read the database: ${(error as Error).message}`];
  } finally {
    database?.close();
  }
}

/**
 * The first difference between the page hashes the objects give and the
 * rebuilt file's, as a finding; `null` when they agree page for page.
 */
export function pageHashMismatch(
  expected: Pick<RestorePointPages, 'bytes' | 'pageHashes'>,
  found: { readonly bytes: number; readonly pageHashes: string },
  pageSize: number,
): RestoredStateFinding | null {
  const want = Buffer.from(expected.pageHashes, 'base64');
  const have = Buffer.from(found.pageHashes, 'base64');
  const pages = Math.max(want.length, have.length) / PAGE_HASH_BYTES;
  for (let index = 0; index < pages; index += 1) {
    const at = index * PAGE_HASH_BYTES;
    const a = want.subarray(at, at + PAGE_HASH_BYTES);
    const b = have.subarray(at, at + PAGE_HASH_BYTES);
    if (a.equals(b)) continue;
    const hex = (hash: Buffer) => (hash.length === 0 ? '(no such page)' : hash.toString('hex'));
    return {
      check: 'page-hash',
      page: index + 1,
      expected: hex(a),
      found: hex(b),
      message: `page ${index + 1} of the rebuilt database hashes ${hex(b)}, its objects say ${hex(a)} (${pageSize}-byte pages; the database is ${found.bytes} bytes, its objects say ${expected.bytes})`,
    };
  }
  return null;
}
