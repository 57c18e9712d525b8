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
  FramedLogConcatenation,
  FramedLogConcatenationError,
  MAX_FRAMED_COMPACTED_LOG_BYTES,
} from './framed-log-concatenation.ts';
export { framedStoreMaterializer } from './framed-materializer.ts';
export { type FramedRestoreOptions, restoreFramedStore } from './restore-framed-store.ts';
