export { chunksOf, isAbortError, throwIfAborted } from './abort.ts';
export { deleteKeys } from './delete-keys.ts';
export { errorMarker, hasErrorMarker, markError } from './error-marker.ts';
export {
  AlreadyExistsError,
  ConflictError,
  InvalidKeyError,
  NotFoundError,
  NotImplementedError,
  PreconditionFailedError,
  StoreError,
  type StoreErrorCode,
  type StoreErrorOptions,
} from './errors.ts';
export { FsStore, type FsStoreOptions } from './fs-store.ts';
export { getCapped, isTooLarge, type TooLarge } from './get-capped.ts';
export {
  compareKeys,
  isValidKey,
  joinKey,
  MAX_KEY_BYTES,
  normalizePrefix,
  validateKey,
} from './keys.ts';
export { listPages } from './list-pages.ts';
export { MemoryStore, type MemoryStoreOptions } from './memory-store.ts';
export {
  type CallOptions,
  type DeleteFailure,
  type DeleteManyResult,
  type DeleteOptions,
  type GetResult,
  type GetStreamResult,
  type ListOptions,
  type ListPage,
  type ListPagesOptions,
  type ListResult,
  type ObjectInfo,
  type ObjectStore,
  type ObjectVersion,
  type PutMode,
  type PutOptions,
  type StoreCapabilities,
  sameVersion,
  type UploadOptions,
  type UploadSource,
} from './object-store.ts';
export { PrefixedStore } from './prefixed-store.ts';
