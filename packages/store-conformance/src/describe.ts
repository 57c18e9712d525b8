/**
 * `describeStoreConformance`: the conformance cases as a vitest suite. A thin
 * wrapper: each test runs the same case function `runConformanceCases` runs.
 *
 * vitest is loaded only when this module runs inside vitest (`VITEST` is set
 * in its workers), so importing the package at run time (for the probe)
 * needs no vitest installed.
 */
import type { ObjectStore, StoreCapabilities } from '@x/store';
import { randomSuffix } from './assertions.ts';
import {
  CASE_GROUPS,
  type CaseGroup,
  conformanceCases,
  executeCase,
  notApplicableReason,
  resolveCapabilities,
} from './cases.ts';

const vitest = process.env.VITEST ? await import('vitest') : undefined;

export interface StoreConformanceOptions {
  /** Returns the store to test: a fresh one or a shared one (each run writes under its own random prefix). */
  readonly createStore: () => ObjectStore | Promise<ObjectStore>;
  /**
   * What the store is tested for. Unset fields default to `true`, so a store
   * is held to every case unless told otherwise; a `false` makes the cases
   * that need it not applicable (skipped). `distinctVersions` is also taken
   * from the store's own declaration: a store declaring it `false` skips the
   * same-bytes cases, with the reason, whatever is passed here.
   */
  readonly capabilities?: Partial<StoreCapabilities>;
  /** Called once after the suite, e.g. to remove a temp directory. */
  readonly disposeStore?: (store: ObjectStore) => void | Promise<void>;
  /** A prefix under which the run's random prefix is made (default: none). */
  readonly prefix?: string;
  /** Only these groups (default: all). */
  readonly groups?: readonly CaseGroup[];
  /** Per-case timeout (default 60 000 ms). */
  readonly timeoutMs?: number;
}

/**
 * Declares a vitest suite `store conformance: <name>` with one test per case,
 * grouped by `CaseGroup`. Call it at the top level of a test file.
 * @throws Error when called outside vitest.
 */
export function describeStoreConformance(name: string, options: StoreConformanceOptions): void {
  if (!vitest) throw new Error('describeStoreConformance must be called inside a vitest run');
  const { describe, it, beforeAll, afterAll } = vitest;
  const capabilities = resolveCapabilities(undefined, options.capabilities);
  const runPrefix = `${options.prefix ? `${options.prefix.replace(/\/+$/, '')}/` : ''}conformance-${randomSuffix()}`;
  const timeout = options.timeoutMs ?? 60_000;

  describe(`store conformance: ${name}`, () => {
    let store: ObjectStore | undefined;
    beforeAll(async () => {
      store = await options.createStore();
    });
    afterAll(async () => {
      if (store && options.disposeStore) await options.disposeStore(store);
    });
    for (const group of CASE_GROUPS) {
      if (options.groups && !options.groups.includes(group)) continue;
      describe(group, () => {
        for (const testCase of conformanceCases) {
          if (testCase.group !== group) continue;
          // A case the declared capabilities rule out is not registered at
          // all: a skipped test would read like a server that was missing.
          // `runConformanceCases` still reports it as not applicable.
          if (notApplicableReason(testCase, capabilities) !== undefined) continue;
          it(
            testCase.name,
            async () => {
              if (!store) throw new Error('createStore did not provide a store');
              const result = await executeCase(testCase, { store, runPrefix, capabilities });
              // Not applicable only by the store's own disclosure (content-derived
              // versions): then the disclosure itself is what this test checks.
              if (result.outcome === 'not-applicable') {
                if (store.capabilities.distinctVersions !== false) throw new Error(result.detail);
                return;
              }
              if (result.outcome === 'failed') throw result.error;
            },
            timeout,
          );
        }
      });
    }
  });
}
