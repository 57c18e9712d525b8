/** `@x/engine-conformance/vitest`: the suite for vitest; the only entry point that imports it. */
export { describeEngineConformance } from './describe.ts';
