/** Types the value the global setup provides, so `inject('testServers')` is typed everywhere. */
import type { TestServers } from './types.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    testServers: TestServers;
  }
}
