/**
 * Retention keeps exactly N manifests of this lineage and deletes exactly the
 * objects no kept manifest names; its LIST requests are bounded (one for the
 * manifests, one each for snapshots and archives, one per retired
 * generation), and `wal/` is never listed whole.
 */
import { describe, it } from 'vitest';
import { retentionScenario } from './helpers/retention-scenario.ts';
import { localStoreCases } from './helpers/stores.ts';

for (const storeCase of localStoreCases()) {
  describe(`retention (${storeCase.name})`, () => {
    it('keeps exactly N manifests and deletes exactly the unnamed objects, with bounded LISTs', async () => {
      await retentionScenario(storeCase);
    });
  });
}
