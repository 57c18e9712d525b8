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
export { describeStoreConformance, type StoreConformanceOptions } from './describe.ts';
export {
  type ProbeOptions,
  type ProbeReport,
  probeConditionalWrites,
  type Verdict,
  type VerdictOutcome,
} from './probe.ts';
