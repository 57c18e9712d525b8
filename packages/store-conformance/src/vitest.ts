/**
 * `@x/store-conformance/vitest`: the conformance cases as a vitest suite
 * (`describeStoreConformance`). The only entry point of the package that
 * imports vitest; import it from test files only. Re-exports only.
 */
export { describeStoreConformance, type StoreConformanceOptions } from './describe.ts';
