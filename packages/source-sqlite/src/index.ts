export {
  CommitLogMergeError,
  CommitLogMerger,
  type CommitLogMergerOptions,
  DEFAULT_MAX_MERGE_PAGE_BYTES,
} from './commit-log-merge.ts';
export {
  BATCH_RECORD_MAGIC,
  COMMIT_RECORD_HEADER_BYTES,
  COMMIT_RECORD_MAGIC,
  type CommitRecord,
  decodeCommitRecord,
  encodeCommitFrame,
  HASHED_PATCH_RECORD_MAGIC,
  lastCommitTimeOf,
  PAGE_HASH_BYTES,
  PATCHED_RECORD_MAGIC,
  pageHash,
  splitLogFrames,
} from './commit-record.ts';
export { sqliteContentHash } from './content-hash.ts';
export type { PatchRun } from './page-patch.ts';
export {
  type AppliedInPlace,
  applyCommitsInPlace,
  type ByteSource,
  integrityCheck,
  restoreSqliteDatabase,
  type SqliteRestoreOptions,
  type SqliteRestoreResult,
} from './rebuild-database.ts';
export type { PageHashMismatch } from './recorded-page-hashes.ts';
export { sqliteRestoreCheck } from './restore-check.ts';
export {
  type SqliteCommitAtTime,
  type SqliteCommitAtTimeOptions,
  sqliteCommitAtTime,
} from './restore-point-at-time.ts';
export {
  type AdoptedSidecar,
  adoptLegacySidecars,
  ensureSidecarDirectory,
  SQLITE_LEGACY_SIDECAR_SUFFIXES,
  SQLITE_SIDECAR_NAMES,
  type SqliteSidecarFiles,
  type SqliteSidecarKind,
  sqliteSidecarDirectoryName,
  sqliteSidecarFiles,
  writeAtomically,
} from './sidecar-files.ts';
export {
  SqliteBackupError,
  type SqliteBackupErrorCode,
  SqliteCaptureStoppedError,
  SqliteDatabaseMissingError,
  SqliteDatabaseReplacedError,
  SqliteDatabaseUnavailableError,
  SqliteNotWalError,
  SqliteOpenRefusedError,
  SqliteReaderLostError,
  SqliteRestoreCorruptError,
  SqliteRestoreRefusedError,
  SqliteWalRestartedUnderneathError,
} from './sqlite-errors.ts';
export {
  commitLogCutter,
  type SqliteMaterializerOptions,
  sqliteMaterializer,
} from './sqlite-materializer.ts';
export {
  DEFAULT_CAPTURE_INTERVAL_MS,
  SQLITE_SNAPSHOT_NAME,
  SqliteSource,
  type SqliteSourceOptions,
} from './sqlite-source.ts';
export {
  type CheckpointReport,
  DEFAULT_PASSIVE_CHECKPOINT_PAGES,
  DEFAULT_TRUNCATE_CHECKPOINT_PAGES,
  type SqliteSnapshot,
  SqliteTap,
  type SqliteTapOptions,
} from './tap.ts';
export { DEFAULT_MAX_PAGE_BASE_BYTES } from './tap-options.ts';
