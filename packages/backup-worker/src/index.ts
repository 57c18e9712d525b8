export { RENEW_RETRY_MS } from '@x/lease';
export { BackupWorker } from './backup-worker.ts';
export { COMPACTION_INPUT_CACHE_BYTES, COMPACTION_RETRY_MS } from './compaction.ts';
export {
  type ChainEntryInfo,
  type CompactionRun,
  compactionLevelsProblem,
  MAX_COMPACTION_LEVELS,
  planCompaction,
  UPPER_LEVEL_BYTES_FACTOR,
} from './compaction-plan.ts';
export {
  BackupError,
  type BackupErrorCode,
  BucketStateError,
  CompactionInputError,
  LineageRefusedError,
  OperationTimeoutError,
  RestorePointReadError,
  ShutdownAbandonedError,
  SimulatedCrashError,
  WorkerPanicError,
  WriteFencedError,
  WriterConflictError,
} from './errors.ts';
export {
  type BackupHealth,
  FIRST_BACKOFF_MS,
  type LatestRestorePoint,
  MAX_BACKOFF_MS,
  MIN_UNHEALTHY_LAG_MS,
  type OldestRestorePoint,
  type PermanentRefusal,
  UNHEALTHY_AFTER_FAILURES,
} from './health.ts';
export { LatestUnusableError } from './latest-repair.ts';
export { IN_MEMORY_ENVELOPE_BYTES } from './requests.ts';
export {
  SNAPSHOT_FORCE_AFTER_STEPS,
  SNAPSHOT_FORCE_MAX_BACKLOG_BYTES,
  SNAPSHOT_FORCE_MIN_AGE_MS,
  SNAPSHOT_LOG_FLOOR_BYTES,
} from './snapshot-schedule.ts';
export type {
  BackupSource,
  DurablePosition,
  EngineFiles,
  FileIdentity,
  FileObservation,
  FrameCounting,
  GenerationCandidate,
  LogCompactor,
  OpenedArchive,
  OpenedFile,
  OpenedRestorePoint,
  OpenSource,
  ParentRecord,
  RestorePointContent,
  ShippedProgress,
  SideFileRead,
  SmallFile,
  SourceCallOptions,
  WalRange,
} from './source.ts';
export { unchangedBetween } from './source.ts';
export { TestHooks } from './test-hooks.ts';
export {
  type BackupHandle,
  type BackupLogger,
  type BackupWorkerOptions,
  DEFAULT_COMPACTION_LEVELS_MS,
  DEFAULT_MANIFEST_INTERVAL_MS,
  DEFAULT_MAX_SEGMENT_BYTES,
  DEFAULT_OPERATION_TIMEOUT_MS,
  DEFAULT_RETAIN_FOR_MS,
  DEFAULT_SHUTDOWN_GRACE_MS,
  DEFAULT_SNAPSHOT_INTERVAL_MS,
  DEFAULT_SNAPSHOT_LOG_FACTOR,
  DEFAULT_WAL_INTERVAL_MS,
  RECOMMENDED_COMPACTION_LEVELS_MS,
  type ShutdownReport,
  type ShutdownShortfall,
  type WorkerHooks,
} from './worker-options.ts';
