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
export { listFromKeys } from './list-helpers.ts';
