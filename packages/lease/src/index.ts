export { BucketLease, releaseOwnRecord } from './bucket-lease.ts';
export { type Clock, FakeClock, systemClock } from './clock.ts';
export {
  FencedError,
  ForeignActiveError,
  LeaseError,
  type LeaseErrorCode,
  LeaseLostError,
  LeaseOptionsError,
  LeaseRecordError,
  LeaseWaitTimeoutError,
  PreconditionsIgnoredError,
  WriteDeadlineError,
} from './errors.ts';
export {
  type HoldLeaseOptions,
  holdLease,
  type LeaseEvent,
  LeaseKeeper,
  RENEW_RETRY_MS,
} from './keeper.ts';
export {
  type AcquireOptions,
  type Exclusion,
  type LeaseLogger,
  type OwnRecord,
  stderrLeaseLogger,
} from './lease-options.ts';
export {
  DEFAULT_TTL_S,
  type LeaseRecord,
  leaseKey,
  MAX_RECORD_BYTES,
  MAX_SANE_TTL_S,
  MIN_TTL_S,
  newInstanceId,
  parseLeaseRecord,
  readLease,
  serializeLeaseRecord,
  type VersionedLeaseRecord,
} from './record.ts';
export { WAIT_POLL_MS, type WaitForLeaseOptions, waitForLease } from './wait.ts';
export { LeaseWatch } from './watch.ts';
