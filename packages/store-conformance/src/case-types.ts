/**
 * The shapes of the conformance suite: a case, what it runs with, what it
 * needs of the store, and what it reports. Imports nothing at run time.
 */
import type { ObjectStore, StoreCapabilities } from '@x/store';
import type { CleanupFailure } from './cleanup.ts';

/** The groups cases belong to, in the order they run. */
export const CASE_GROUPS = [
  'basics',
  'create',
  'replace',
  'delete',
  'multipart-create',
  'races',
  'abort',
] as const;
export type CaseGroup = (typeof CASE_GROUPS)[number];

/** What a case gets to work with. */
export interface CaseContext {
  readonly store: ObjectStore;
  /** The case's own prefix (no trailing `/`); every key the case writes is under it. */
  readonly prefix: string;
  readonly capabilities: StoreCapabilities;
  readonly signal?: AbortSignal;
}

/** A capability a case needs (`value: true`), or needs declared absent (`value: false`). */
export interface CapabilityRequirement {
  readonly capability: keyof StoreCapabilities;
  readonly value: boolean;
}

export interface ConformanceCase {
  readonly group: CaseGroup;
  readonly name: string;
  /** What the case needs; it applies only when every requirement is met. */
  readonly requires?: readonly CapabilityRequirement[];
  /** Resolves when the store behaved; throws (usually a `ConformanceFailure`) when not. */
  run(context: CaseContext): Promise<void>;
}

export type CaseOutcome = 'passed' | 'failed' | 'not-applicable';

export interface CaseResult {
  readonly group: CaseGroup;
  readonly name: string;
  readonly outcome: CaseOutcome;
  /** Why it failed or does not apply; empty when it passed. */
  readonly detail: string;
  readonly durationMs: number;
  /** The error a failed case threw. */
  readonly error?: unknown;
  /**
   * Set when the case's cleanup left objects or met errors (the case is then
   * failed too, unless it had already failed for its own reason).
   */
  readonly cleanup?: CleanupFailure;
}
