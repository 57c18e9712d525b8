/**
 * The engine contract, version {@link ENGINE_CONTRACT_VERSION}: what a
 * database engine implements to be backed up by `@x/backup-worker`
 * (`BackupSource`) and rebuilt by `@x/restore` (`RestoreMaterializer`).
 * Types only, besides the version.
 */

/**
 * The contract's version. It changes when a member an engine implements
 * changes meaning or a required member is added; an engine may check it.
 */
export const ENGINE_CONTRACT_VERSION = 1;

export type {
  RestoreCheck,
  RestoreMaterializer,
  StagedRestore,
  WalCutter,
} from './materializer.ts';
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
  ParentRecord,
  RestorePointContent,
  ShippedProgress,
  SideFileRead,
  SmallFile,
  SourceCallOptions,
  WalRange,
} from './source.ts';
