/**
 * `@x/backup-worker/testing`: what tests reach for and an application does
 * not need: fault hooks (`TestHooks`, whose crashes throw
 * `SimulatedCrashError`), and the snapshot schedule's constants tests assert
 * against.
 */
export { SimulatedCrashError } from './errors.ts';
export { SNAPSHOT_FORCE_MIN_AGE_MS, SNAPSHOT_LOG_FLOOR_BYTES } from './snapshot-schedule.ts';
export { TestHooks } from './test-hooks.ts';
