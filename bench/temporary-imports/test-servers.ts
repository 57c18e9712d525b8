/**
 * TEMPORARY relative import (see the root README, "How dependencies are
 * checked"): `@x/test-servers` exports only what tests read through vitest's
 * `inject`, not the harness that starts the servers. Remove this file once
 * `@x/test-servers` exports `startTestServers` and `StartedTestServers`, and
 * import them by package name. `.dependency-cruiser.cjs` allows this file to
 * reach into packages/test-servers/src.
 */
export {
  type StartedTestServers,
  startTestServers,
} from '../../packages/test-servers/src/servers.ts';
