export { RENEW_RETRY_MS } from '@x/lease';
export { BackupWorker } from './backup-worker.ts';
export {
  BackupError,
  type BackupErrorCode,
  BucketStateError,
  LineageRefusedError,
  OperationTimeoutError,
  ShutdownAbandonedError,
  SimulatedCrashError,
  WorkerPanicError,
  WriteFencedError,
  WriterConflictError,
} from './errors.ts';
export {
  CHAIN_FILES,
  FLOOR_FILE,
  FramedDirSource,
  type FramedDirSourceOptions,
  type FramedEngineHandle,
  INTENT_FILE,
  identifyFramedFiles,
  LINEAGE_FILE,
  PARENT_FILE,
  SIDE_FILES,
  SNAPSHOT_FILE,
  WAL_FILE,
} from './framed-dir-source.ts';
export {
  type BackupHealth,
  FIRST_BACKOFF_MS,
  MAX_BACKOFF_MS,
  MIN_UNHEALTHY_LAG_MS,
  UNHEALTHY_AFTER_FAILURES,
} from './health.ts';
// Restore and verify. Names exported above (the file-name constants and
// `ParentRecord`, identical in both) take precedence over the star export.
export * from './restore/index.ts';
export type {
  BackupSource,
  DurablePosition,
  FileIdentity,
  FileObservation,
  FrameCounting,
  OpenedArchive,
  OpenedFile,
  OpenedRestorePoint,
  ParentRecord,
  ShippedProgress,
  SideFileRead,
  SmallFile,
  SourceCallOptions,
  WalRange,
} from './source.ts';
export { unchangedBetween } from './source.ts';
// The SQLite source.
export * from './sqlite/index.ts';
export { TestHooks } from './test-hooks.ts';
export {
  type BackupHandle,
  type BackupLogger,
  type BackupWorkerOptions,
  DEFAULT_MANIFEST_INTERVAL_MS,
  DEFAULT_MAX_SEGMENT_BYTES,
  DEFAULT_OPERATION_TIMEOUT_MS,
  DEFAULT_RETAIN,
  DEFAULT_SHUTDOWN_GRACE_MS,
  DEFAULT_WAL_INTERVAL_MS,
  type ShutdownReport,
  type WorkerHooks,
} from './worker-options.ts';
