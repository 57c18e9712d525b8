/**
 * Crash at every write: for n = 0, 1, 2, … a worker killed after n bucket
 * writes leaves a bucket in which every manifest verifies and LATEST names
 * one of them; a new worker then resumes and completes, and LATEST's restore
 * point is the source at that commit. The loop ends at the first n whose run
 * completes. Local stores run every n; real servers a bounded sample (see
 * real-servers.test.ts).
 */
import { describe, expect, it } from 'vitest';
import { crashAt } from './helpers/scenario.ts';
import { localStoreCases } from './helpers/stores.ts';

for (const storeCase of localStoreCases()) {
  describe(`crash at every write (${storeCase.name})`, () => {
    it('leaves a verifying bucket after a kill at every write, and a new worker completes', async () => {
      let n = 0;
      for (; n < 500; n += 1) {
        if ((await crashAt(storeCase, n)) === 'completed') break;
      }
      // The loop crashed at many distinct writes before a run completed: it
      // cannot pass vacuously.
      expect(n).toBeGreaterThan(20);
      expect(n).toBeLessThan(500);
    });
  });
}
