export {
  downloadFileObject,
  downloadSnapshotObject,
  isFileObject,
  isSnapshotObject,
} from './file-object-read.ts';
export { type FineRunOptions, fineRunOf } from './fine-run.ts';
export {
  type GenerationEncryption,
  generationEncryption,
  type ObjectOpenOptions,
  storedEncryption,
} from './generation-encryption.ts';
export {
  type GranularityRun,
  granularityRuns,
  listRestorePoints,
  type RestorePointInfo,
} from './list-restore-points.ts';
export type { RestoreProgress, VerifyProgress } from './progress.ts';
export { type ChainEnd, type RestoreResult, restore } from './restore.ts';
export {
  type IdentityGiven,
  type LockedObject,
  NoRestorePointError,
  ObjectCorruptError,
  ObjectEncodingError,
  ObjectKeyError,
  ObjectMissingError,
  type RestorableRange,
  RestoredStateError,
  type RestoredStateFinding,
  RestoreError,
  type RestoreErrorCode,
  RestoreIncompleteError,
  RestoreOptionsError,
  RestorePointRejectedError,
  RestoreTargetNotEmptyError,
  RestoreTargetUnsafeError,
} from './restore-errors.ts';
export {
  type CommitTarget,
  type LatestTarget,
  type PlannedObject,
  planRestore,
  type RestoreChoice,
  type RestoreOptions,
  type RestorePlan,
  type RestorePointTarget,
  type RestoreTarget,
  type RestoreTargetKind,
  type RolledForward,
} from './restore-plan.ts';
export { fileNameProblem } from './restore-point-checks.ts';
export {
  type LatestFallback,
  type LatestReading,
  MAX_LATEST_FOLLOWS,
  readLatest,
} from './restore-points.ts';
export {
  findRollForward,
  MAX_ROLL_FORWARD_OBJECT_BYTES,
  type RollForward,
  type RollForwardOptions,
  rolledForwardManifest,
} from './roll-forward.ts';
export {
  checkLinkAfterCompacted,
  type DecodedSegmentEntry,
  decodedSize,
  decodeSegmentEntry,
  decodeSegmentEntryLinks,
  expectedPreviousCrc32,
  isSegmentObject,
} from './segment-object-read.ts';
export {
  type SupersededTenure,
  supersededMessage,
  supersededTenures,
  type TenureStamp,
} from './superseded-tenures.ts';
export {
  type FindUnnamedNewerDataOptions,
  findUnnamedNewerData,
  findUnnamedNewerDataAfter,
  holdsUnnamedNewerData,
  type UnnamedNewerData,
} from './unnamed-newer-data.ts';
export {
  type ManifestVerification,
  type VerifyOptions,
  type VerifyProblem,
  type VerifyProblemKind,
  type VerifyRebuild,
  type VerifyReport,
  verify,
} from './verify.ts';
export { FramedWalCutter, type FrameWeight } from './wal-frame-cutter.ts';
