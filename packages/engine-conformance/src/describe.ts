/** `describeEngineConformance`: the engine cases as a vitest suite, one test per case. */
import { describe, it } from 'vitest';
import { ENGINE_CASES } from './cases.ts';
import type { EngineUnderTest } from './engine-under-test.ts';

/** Declares `engine conformance: <name>`; call it at the top level of a test file. */
export function describeEngineConformance(
  name: string,
  engine: EngineUnderTest,
  options: { readonly timeoutMs?: number } = {},
): void {
  describe(`engine conformance: ${name}`, () => {
    for (const engineCase of ENGINE_CASES)
      it(engineCase.name, () => engineCase.run(engine), options.timeoutMs ?? 120_000);
  });
}
