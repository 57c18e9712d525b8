/**
 * `@x/store/adapter`: helpers for authors of `ObjectStore` implementations —
 * the cloud adapters and anyone writing another store or a wrapper. Callers
 * that only use a store need nothing from here; they import `@x/store`.
 * Re-exports only.
 */
export {
  abortReasonOr,
  credentialFreeCause,
  jitteredBackoffMs,
  newWriteId,
  refusedWriteError,
  requireCapability,
  sleepUnlessAborted,
  sortedListResult,
} from './adapter-support.ts';
export { deleteOneByOne, failuresInKeyOrder } from './delete-keys.ts';
export {
  ForwardingStore,
  type ForwardingStoreOptions,
  STORE_OPERATIONS,
  type StoreOperation,
} from './forwarding-store.ts';
export { listFromKeys } from './list-helpers.ts';
export {
  collectListPages,
  DEFAULT_LIST_PAGE_SIZE,
  orderedListPages,
  pageSizeOf,
  pagesOf,
  type RawListPage,
} from './list-pages.ts';
