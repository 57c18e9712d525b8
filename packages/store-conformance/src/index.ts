export { ConformanceFailure } from './assertions.ts';
export { brokenStore, type StoreFlaw } from './broken-store.ts';
export {
  CASE_GROUPS,
  type CapabilityRequirement,
  type CaseContext,
  type CaseGroup,
  type CaseOutcome,
  type CaseResult,
  type ConformanceCase,
  conformanceCases,
  executeCase,
  notApplicableReason,
  type RunConformanceOptions,
  runConformanceCases,
} from './cases.ts';
export { UPLOAD_MEMORY_BOUND } from './cases-upload-memory.ts';
export {
  type CleanupFailure,
  cleanUpPrefix,
  describeCleanupFailure,
  KeyRecordingStore,
} from './cleanup.ts';
export {
  PROBE_UPLOAD_PART_SIZE,
  type ProbeOptions,
  type ProbeReport,
  probeConditionalWrites,
  type Verdict,
  type VerdictOutcome,
} from './probe.ts';
