/**
 * The scenarios against every real server @x/test-servers runs (S3 on
 * versitygw, Azure on Azurite, GCS on fake-gcs-server). The crash-at-every-
 * write loop runs a bounded sample of n here (every n runs on MemoryStore and
 * FsStore): n = 0, 1, 2, 4, 7, 11, … and then a run with no limit.
 */
import { testServers } from '@x/test-servers';
import { describe, expect, it } from 'vitest';
import { realStoreCases } from './helpers/real-stores.ts';
import { retentionScenario } from './helpers/retention-scenario.ts';
import { crashAt } from './helpers/scenario.ts';

const cases = realStoreCases();
const missing = testServers().missing;

describe('real servers', () => {
  it('lists the servers that are not running', () => {
    // Informational: a missing server's suites are skipped (pnpm servers:install).
    for (const server of missing)
      console.info(`backup-worker: ${server.name} not running: ${server.reason}`);
    expect(Array.isArray(missing)).toBe(true);
  });
});

for (const storeCase of cases) {
  describe(`crash at sampled writes (${storeCase.name})`, () => {
    it('leaves a verifying bucket after a kill at sampled writes, and a new worker completes', async () => {
      const sample = [0, 1, 2, 4, 7, 11, 16, 22, 29, 37];
      let crashed = 0;
      for (const n of sample) {
        const outcome = await crashAt(storeCase, n);
        if (outcome === 'completed') break;
        crashed += 1;
      }
      expect(crashed).toBeGreaterThan(5);
      expect(await crashAt(storeCase, Number.MAX_SAFE_INTEGER)).toBe('completed');
    });
  });

  describe(`retention (${storeCase.name})`, () => {
    it('keeps exactly N manifests and deletes exactly the unnamed objects, with bounded LISTs', async () => {
      await retentionScenario(storeCase, 8);
    });
  });
}
