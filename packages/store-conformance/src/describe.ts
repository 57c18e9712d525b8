/**
 * `describeStoreConformance`: the cases as a vitest suite, each test running
 * the case function `runConformanceCases` runs. Tests are registered from the
 * capabilities passed in, before the store exists; when a test runs, a case
 * the store's own declaration rules out is reported skipped with the reason,
 * never passed. Groups without an applicable case are not declared (vitest
 * fails an empty suite). Entry `@x/store-conformance/vitest`, the only one that
 * imports vitest: the main entry loads without it.
 */
import type { ObjectStore, StoreCapabilities } from '@x/store';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { randomSuffix } from './assertions.ts';
import {
  CASE_GROUPS,
  type CaseGroup,
  type ConformanceCase,
  conformanceCases,
  executeCase,
  notApplicableReason,
  resolveCapabilities,
} from './cases.ts';

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
 * grouped by `CaseGroup`. Call it at the top level of a test file (vitest
 * itself refuses a `describe` outside a run).
 */
export function describeStoreConformance(name: string, options: StoreConformanceOptions): void {
  const capabilities = resolveCapabilities(undefined, options.capabilities);
  const runPrefix = `${options.prefix ? `${options.prefix.replace(/\/+$/, '')}/` : ''}conformance-${randomSuffix()}`;
  const timeout = options.timeoutMs ?? 60_000;

  // Groups are declared only when a case of theirs applies: vitest fails a
  // run on a suite with no test in it, and a capability declared off can
  // leave a whole group (replace, races) with none.
  const selected = CASE_GROUPS.filter((group) => !options.groups || options.groups.includes(group))
    .map((group) => ({
      group,
      cases: conformanceCases.filter(
        (testCase) =>
          testCase.group === group &&
          // A case the declared capabilities rule out is not registered at
          // all: a skipped test would read like a server that was missing.
          // `runConformanceCases` still reports it as not applicable.
          notApplicableReason(testCase, capabilities) === undefined,
      ),
    }))
    .filter((entry) => entry.cases.length > 0);

  describe(`store conformance: ${name}`, () => {
    let store: ObjectStore | undefined;
    beforeAll(async () => {
      store = await options.createStore();
    });
    afterAll(async () => {
      if (store && options.disposeStore) await options.disposeStore(store);
    });
    if (selected.length === 0) {
      // A suite that checks nothing must not look like one that passed.
      it('has a case to run', () => {
        throw new Error(
          `no conformance case applies to groups ${(options.groups ?? CASE_GROUPS).join(', ')} with capabilities ${JSON.stringify(capabilities)}`,
        );
      });
      return;
    }
    for (const { group, cases } of selected) {
      describe(group, () => {
        for (const testCase of cases) {
          it(
            testCase.name,
            async (context) => {
              if (!store) throw new Error('createStore did not provide a store');
              const result = await executeCase(testCase, { store, runPrefix, capabilities });
              if (result.outcome === 'failed') throw result.error;
              if (result.outcome === 'passed') return;
              // Not applicable once the store's own declaration is known.
              // Passing here without a check is what must never happen.
              switch (runTimeNotApplicable(testCase, capabilities, store.capabilities)) {
                case 'disclosed':
                  // Content-derived versions: the store's disclosure is what
                  // this test checks (it passes while the store declares it).
                  return;
                case 'declared-by-store':
                  // Told the capability is off while the store declares it
                  // on: the refusal this case checks cannot be asked of it,
                  // and nothing else checks the capability. Shown as skipped,
                  // with the reason, never as passed.
                  context.skip(result.detail);
                  return;
                default:
                  throw new Error(result.detail);
              }
            },
            timeout,
          );
        }
      });
    }
  });
}

/**
 * Why a case registered for `capabilities` is not applicable to the store
 * that was created: only two reasons are expected, both from its declaration.
 */
function runTimeNotApplicable(
  testCase: ConformanceCase,
  capabilities: StoreCapabilities,
  declared: StoreCapabilities,
): 'disclosed' | 'declared-by-store' | 'unexpected' {
  const requirements = testCase.requires ?? [];
  const unmet = requirements.filter(
    (requirement) =>
      notApplicableReason({ ...testCase, requires: [requirement] }, capabilities, declared) !==
      undefined,
  );
  if (unmet.length === 0) return 'unexpected';
  if (
    unmet.every(
      (requirement) =>
        requirement.capability === 'distinctVersions' &&
        requirement.value &&
        declared.distinctVersions === false,
    )
  )
    return 'disclosed';
  if (
    unmet.every(
      (requirement) =>
        !requirement.value &&
        !capabilities[requirement.capability] &&
        declared[requirement.capability],
    )
  )
    return 'declared-by-store';
  return 'unexpected';
}
