/**
 * What a sleeping database is watched by: the identity, size and
 * modification time of the database file and of its WAL, from two `stat`
 * calls and no open descriptor. Every commit in WAL mode writes the WAL, and
 * a checkpoint writes the database file, so any change to what the database
 * holds changes its fingerprint. An empty WAL counts as none. A changed fingerprint is only a reason to
 * look: the wake compares the content itself.
 */
import { statSync } from 'node:fs';

export interface FileFingerprint {
  /** Equal for two fingerprints of unchanged files. */
  readonly key: string;
  /** The newer of the two files' modification times (ms); `null` when `stat` refused to look (the key says why). */
  readonly changedAtMs: number | null;
}

/**
 * `null`: the database file is gone (or is no longer a regular file). Never
 * throws: a file `stat` refuses gets a fingerprint that names why, so it
 * counts as changed and its wake reports the problem.
 */
export function fingerprintOf(path: string): FileFingerprint | null {
  try {
    return statFingerprint(path);
  } catch (error) {
    return {
      key: `unreadable: ${String((error as NodeJS.ErrnoException).code ?? error)}`,
      changedAtMs: null,
    };
  }
}

function statFingerprint(path: string): FileFingerprint | null {
  const database = statSync(path, { bigint: true, throwIfNoEntry: false });
  if (database === undefined || !database.isFile()) return null;
  const found = statSync(`${path}-wal`, { bigint: true, throwIfNoEntry: false });
  // An empty WAL holds nothing: SQLite creates one on open and removes it on the last close.
  const wal = found !== undefined && found.size > 0n ? found : undefined;
  const part = (stat: typeof database | undefined) =>
    stat === undefined
      ? '-'
      : `${stat.dev}:${stat.ino}:${stat.size}:${stat.mtimeNs}:${stat.ctimeNs}`;
  const newest =
    wal !== undefined && wal.mtimeNs > database.mtimeNs ? wal.mtimeNs : database.mtimeNs;
  return { key: `${part(database)}|${part(wal)}`, changedAtMs: Number(newest / 1_000_000n) };
}
