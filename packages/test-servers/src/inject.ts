/** What tests call: the servers the global setup started, and a fresh prefix per test. */
import { randomBytes } from 'node:crypto';
import { inject } from 'vitest';
import './provided-context.ts';
import type { TestServers } from './types.ts';

/**
 * The running test servers. Call inside a test file (it reads vitest's
 * provided context).
 * @throws Error when the global setup did not run (the root vitest config
 * must list `packages/test-servers/src/global-setup.ts` in `test.globalSetup`).
 */
export function testServers(): TestServers {
  const servers = inject('testServers');
  if (!servers) {
    throw new Error(
      'testServers were not provided: run the tests from the repository root (the root vitest.config.ts starts them in its globalSetup)',
    );
  }
  return servers;
}

/**
 * A fresh prefix for one test, a valid key (letters, digits and `-`), unique
 * across runs and processes: `t-<label>-<time>-<random>`. The servers are
 * shared by every test of the run; writing under your own prefix keeps tests
 * apart.
 */
export function randomPrefix(label = 'test'): string {
  const clean =
    label
      .toLowerCase()
      .replace(/[^a-z0-9-]+/g, '-')
      .replace(/^-+|-+$/g, '')
      .slice(0, 40) || 'test';
  return `t-${clean}-${Date.now().toString(36)}-${randomBytes(6).toString('hex')}`;
}
