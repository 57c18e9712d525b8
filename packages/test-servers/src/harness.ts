/**
 * `@x/test-servers/harness`: what starts and stops the servers, for code that
 * runs them outside a vitest global setup (`scripts/compat.ts`, the
 * benchmarks, the soak). Tests read the running servers through the main
 * entry (`testServers()`, vitest's `inject`) instead. Re-exports only.
 */
export { type StartedTestServers, type StartOptions, startTestServers } from './servers.ts';
