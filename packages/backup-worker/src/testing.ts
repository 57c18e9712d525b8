/**
 * `@x/backup-worker/testing`: what tests and benchmarks reach for and an
 * application does not need: fault hooks (`TestHooks`, whose crashes throw
 * `SimulatedCrashError`), and the worker's tuning constants and compaction
 * planner, to assert against.
 */
export { COMPACTION_INPUT_CACHE_BYTES, COMPACTION_RETRY_MS } from './compaction.ts';
export {
  type ChainEntryInfo,
  type CompactionRun,
  planCompaction,
  UPPER_LEVEL_BYTES_FACTOR,
} from './compaction-plan.ts';
export { SimulatedCrashError } from './errors.ts';
export {
  FIRST_BACKOFF_MS,
  MAX_BACKOFF_MS,
  MIN_UNHEALTHY_LAG_MS,
  UNHEALTHY_AFTER_FAILURES,
} from './health.ts';
export { IN_MEMORY_ENVELOPE_BYTES } from './requests.ts';
export {
  SNAPSHOT_FORCE_AFTER_STEPS,
  SNAPSHOT_FORCE_MAX_BACKLOG_BYTES,
  SNAPSHOT_FORCE_MIN_AGE_MS,
  SNAPSHOT_LOG_FLOOR_BYTES,
} from './snapshot-schedule.ts';
export { TestHooks } from './test-hooks.ts';
