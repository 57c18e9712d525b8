export {
  ENGINE_CASES,
  type EngineCase,
  type EngineCaseName,
  runEngineConformance,
} from './cases.ts';
export type { EngineFixture, EngineUnderTest } from './engine-under-test.ts';
