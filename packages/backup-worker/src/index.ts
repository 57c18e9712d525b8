export { BackupWorker } from './backup-worker.ts';
export { compactionLevelsProblem, MAX_COMPACTION_LEVELS } from './compaction-plan.ts';
export {
  BackupError,
  type BackupErrorCode,
  type BackupErrorOptions,
  RestorePointReadError,
  ShutdownAbandonedError,
  WorkerPanicError,
} from './errors.ts';
export type {
  BackupHealth,
  LatestRestorePoint,
  OldestRestorePoint,
  PermanentRefusal,
} from './health.ts';
export { LatestUnusableError } from './latest-repair.ts';
export { unchangedBetween } from './unchanged-between.ts';
export {
  type BackupHandle,
  type BackupLogger,
  type BackupWorkerOptions,
  DEFAULT_COMPACTION_LEVELS_MS,
  DEFAULT_EXACT_WINDOW_MS,
  DEFAULT_MANIFEST_INTERVAL_MS,
  DEFAULT_MAX_SEGMENT_BYTES,
  DEFAULT_OPERATION_TIMEOUT_MS,
  DEFAULT_RETAIN_FOR_MS,
  DEFAULT_SHUTDOWN_GRACE_MS,
  DEFAULT_SNAPSHOT_INTERVAL_MS,
  DEFAULT_SNAPSHOT_LOG_FACTOR,
  DEFAULT_WAL_INTERVAL_MS,
  type EncryptionOptions,
  MAX_ENCRYPTION_RECIPIENTS,
  type OpenSource,
  RECOMMENDED_COMPACTION_LEVELS_MS,
  type ShutdownReport,
  type ShutdownShortfall,
  type WorkerHooks,
} from './worker-options.ts';
