/**
 * The conformance cases, run by `runConformanceCases` (plain async, for
 * reports and scripts) and by `describeStoreConformance` (a thin vitest
 * wrapper). Each case writes only under its own sub-prefix of the run's
 * prefix and deletes what is there when it ends. A case needing a capability
 * passed `false` is `not-applicable`; a store that declares it `false` too is
 * checked to refuse with `NotImplementedError`. `distinctVersions` is a
 * disclosure, not a precondition: the same-bytes cases apply only when it is
 * tested and declared. Rules and reasons: package README. Cases: one module per
 * group (cases-*.ts), types in case-types.ts, helpers in case-helpers.ts.
 */
import { normalizePrefix, type ObjectStore, type StoreCapabilities } from '@x/store';
import { ConformanceFailure, describeError } from './assertions.ts';
import type {
  CapabilityRequirement,
  CaseContext,
  CaseGroup,
  CaseResult,
  ConformanceCase,
} from './case-types.ts';
import { abort } from './cases-abort.ts';
import { basics } from './cases-basics.ts';
import { create } from './cases-create.ts';
import { deleteCases } from './cases-delete.ts';
import { keyCases } from './cases-keys.ts';
import { multipart } from './cases-multipart.ts';
import { races } from './cases-races.ts';
import { replace } from './cases-replace.ts';
import { uploadMemoryCases } from './cases-upload-memory.ts';
import {
  type CleanupFailure,
  cleanUpPrefix,
  describeCleanupFailure,
  KeyRecordingStore,
} from './cleanup.ts';

export {
  CASE_GROUPS,
  type CapabilityRequirement,
  type CaseContext,
  type CaseGroup,
  type CaseOutcome,
  type CaseResult,
  type ConformanceCase,
} from './case-types.ts';

/** Every case, in run order. */
export const conformanceCases: readonly ConformanceCase[] = [
  ...basics,
  ...keyCases,
  ...uploadMemoryCases,
  ...create,
  ...replace,
  ...deleteCases,
  ...multipart,
  ...races,
  ...abort,
];

/**
 * Why `testCase` does not apply, or `undefined` when it does. `declared` is
 * the store's own `capabilities` (known only once the store exists).
 */
export function notApplicableReason(
  testCase: ConformanceCase,
  capabilities: StoreCapabilities,
  declared?: StoreCapabilities,
): string | undefined {
  for (const requirement of testCase.requires ?? []) {
    const reason = requirementUnmet(requirement, capabilities, declared);
    if (reason !== undefined) return reason;
  }
  return undefined;
}

function requirementUnmet(
  requirement: CapabilityRequirement,
  capabilities: StoreCapabilities,
  declared: StoreCapabilities | undefined,
): string | undefined {
  const { capability } = requirement;
  const tested = capabilities[capability];
  if (requirement.value) {
    // A disclosure, not a precondition: a store that says its versions are
    // content hashes is not held to distinct versions of identical bytes.
    if (capability === 'distinctVersions' && declared?.distinctVersions === false)
      return 'the store declares distinctVersions: false (e.g. S3 ETags are content hashes): a rewrite of identical bytes may keep its version';
    return tested ? undefined : `${capability} is not claimed`;
  }
  if (tested) return `${capability} is claimed`;
  if (declared?.[capability])
    return `${capability} is declared by the store but not tested; run probeConditionalWrites`;
  return undefined;
}

/** The methods every `ObjectStore` has (`listPages` is optional: its own case checks it). */
const REQUIRED_METHODS = ['get', 'getStream', 'head', 'put', 'delete', 'list', 'upload'] as const;

function missingMethods(store: ObjectStore): string[] {
  return REQUIRED_METHODS.filter(
    (name) => typeof (store as unknown as Record<string, unknown>)[name] !== 'function',
  );
}

/** A stable, path-safe id for a case, used in its sub-prefix. */
export function caseId(testCase: ConformanceCase): string {
  const index = conformanceCases.indexOf(testCase);
  return `${String(index).padStart(2, '0')}-${testCase.group}`;
}

/**
 * Runs one case under `runPrefix/<case id>` and deletes what it wrote there.
 * Never throws: the outcome says what happened.
 */
export async function executeCase(
  testCase: ConformanceCase,
  options: {
    store: ObjectStore;
    runPrefix: string;
    capabilities: StoreCapabilities;
    signal?: AbortSignal;
  },
): Promise<CaseResult> {
  const started = performance.now();
  const base = { group: testCase.group, name: testCase.name };
  const reason = notApplicableReason(testCase, options.capabilities, options.store.capabilities);
  if (reason !== undefined)
    return { ...base, outcome: 'not-applicable', detail: reason, durationMs: 0 };
  const missing = missingMethods(options.store);
  if (missing.length > 0) {
    const error = new ConformanceFailure(
      `the store has no ${missing.map((name) => `\`${name}\``).join(', ')} method${missing.length > 1 ? 's' : ''}: an ObjectStore must have ${REQUIRED_METHODS.join(', ')}`,
    );
    return { ...base, outcome: 'failed', detail: describeError(error), durationMs: 0, error };
  }
  const prefix = `${normalizePrefix(options.runPrefix)}/${caseId(testCase)}`;
  // Every key the case writes is remembered, so cleanup does not depend on
  // the store's listing being right (a broken one would leave them behind).
  const recording = new KeyRecordingStore(options.store);
  const context: CaseContext = {
    store: recording,
    prefix,
    capabilities: options.capabilities,
    ...(options.signal ? { signal: options.signal } : {}),
  };
  let failure: unknown;
  try {
    await testCase.run(context);
  } catch (error) {
    failure = error;
  }
  let cleanup: CleanupFailure | undefined;
  try {
    cleanup = await cleanUpPrefix(options.store, prefix, recording.written(), options.signal);
  } catch (error) {
    // Only an abort gets here (cleanUpPrefix reports every other failure).
    cleanup = { prefix, left: 0, sample: [], listed: false, errors: [describeError(error)] };
  }
  if (cleanup) failure ??= new ConformanceFailure(`cleanup: ${describeCleanupFailure(cleanup)}`);
  const durationMs = performance.now() - started;
  const cleanupField = cleanup ? { cleanup } : {};
  if (failure !== undefined)
    return {
      ...base,
      outcome: 'failed',
      detail: describeError(failure),
      durationMs,
      error: failure,
      ...cleanupField,
    };
  return { ...base, outcome: 'passed', detail: '', durationMs };
}

export interface RunConformanceOptions {
  /** Where the run writes (a fresh random prefix is best); only keys under it are written and deleted. */
  readonly prefix: string;
  /** What to test; defaults to what the store declares. */
  readonly capabilities?: Partial<StoreCapabilities>;
  /** Only these groups (default: all). */
  readonly groups?: readonly CaseGroup[];
  readonly signal?: AbortSignal;
}

/** Resolves the capabilities a run tests: the given ones, the store's declaration for the rest. */
export function resolveCapabilities(
  store: ObjectStore | undefined,
  given: Partial<StoreCapabilities> | undefined,
): StoreCapabilities {
  const declared: StoreCapabilities = store?.capabilities ?? {
    conditionalPut: true,
    conditionalDelete: true,
    multipartCreate: true,
    distinctVersions: true,
  };
  return {
    conditionalPut: given?.conditionalPut ?? declared.conditionalPut,
    conditionalDelete: given?.conditionalDelete ?? declared.conditionalDelete,
    multipartCreate: given?.multipartCreate ?? declared.multipartCreate,
    distinctVersions: given?.distinctVersions ?? declared.distinctVersions,
  };
}

/**
 * Runs every case (or the chosen groups) one after another against `store`
 * and returns one result per case. Never throws for a failing case.
 */
export async function runConformanceCases(
  store: ObjectStore,
  options: RunConformanceOptions,
): Promise<CaseResult[]> {
  const runPrefix = normalizePrefix(options.prefix);
  if (runPrefix === '') throw new TypeError('runConformanceCases needs a non-empty prefix');
  const capabilities = resolveCapabilities(store, options.capabilities);
  const results: CaseResult[] = [];
  for (const testCase of conformanceCases) {
    if (options.groups && !options.groups.includes(testCase.group)) continue;
    options.signal?.throwIfAborted();
    results.push(
      await executeCase(testCase, {
        store,
        runPrefix,
        capabilities,
        ...(options.signal ? { signal: options.signal } : {}),
      }),
    );
  }
  return results;
}
