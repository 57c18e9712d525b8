/**
 * The lease's behaviour, written once and run against every store
 * (`defineLeaseScenarios` is called once per store, one describe each).
 * Time is a FakeClock everywhere, also on real servers: the record's
 * timestamps come from the fake wall clock, so nothing sleeps. *
 * One module per group of scenarios (scenarios-acquire.ts, -renew,
 * -self-fencing, -suspect, -misbehaving-stores, -release, -reclaim, -keeper); what
 * they share is in scenario-helpers.ts.
 */
import { describe } from 'vitest';
import type { StoreTarget } from './scenario-helpers.ts';
import { acquireScenarios } from './scenarios-acquire.ts';
import { keeperScenarios } from './scenarios-keeper.ts';
import { misbehavingStoreScenarios } from './scenarios-misbehaving-stores.ts';
import { reclaimScenarios } from './scenarios-reclaim.ts';
import { releaseScenarios } from './scenarios-release.ts';
import { renewScenarios } from './scenarios-renew.ts';
import { selfFencingScenarios } from './scenarios-self-fencing.ts';
import { suspectRecordScenarios } from './scenarios-suspect.ts';

export {
  raceContenders,
  runSkewedTakeover,
  type StoreTarget,
  type StoreUnderTest,
} from './scenario-helpers.ts';

export function defineLeaseScenarios(target: StoreTarget): void {
  describe(`lease on ${target.name}`, () => {
    acquireScenarios(target);
    renewScenarios(target);
    selfFencingScenarios(target);
    suspectRecordScenarios(target);
    misbehavingStoreScenarios(target);
    releaseScenarios(target);
    reclaimScenarios(target);
    keeperScenarios(target);
  });
}
