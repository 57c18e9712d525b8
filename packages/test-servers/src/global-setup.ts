/**
 * Vitest global setup (named in the root vitest.config.ts `test.globalSetup`):
 * starts the test servers once for the whole run and provides them as
 * `testServers`. Vitest merges the root project's provided values into every
 * project's, so tests in any package read them with `testServers()`.
 *
 * Under `CI=true` a missing required server (versitygw, s3rver, Azurite,
 * fake-gcs-server) fails the setup; MinIO is optional. On a developer machine
 * each missing server is reported in one line naming `pnpm servers:install`,
 * and the suites that need it skip themselves.
 */
import type { TestProject } from 'vitest/node';
import './provided-context.ts';
import { INSTALL_HINT, startTestServers } from './servers.ts';

export async function setup(project: TestProject): Promise<() => Promise<void>> {
  const started = await startTestServers();
  for (const entry of started.servers.missing) {
    const firstLine = entry.reason.split('\n')[0];
    console.warn(
      `test-servers: ${entry.name} not running (${firstLine}); its suites are skipped — ${INSTALL_HINT}`,
    );
  }
  project.provide('testServers', started.servers);
  return () => started.stop();
}
