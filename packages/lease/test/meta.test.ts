/**
 * Meta-tests: the checks the scenarios rely on can fail. Each runs a check
 * against a setup that breaks the property it guards and shows the check
 * reports it.
 */
import { MemoryStore } from '@x/store';
import { describe, expect, it } from 'vitest';
import { FaultStore } from './fault-store.ts';
import { raceContenders, runSkewedTakeover } from './scenarios.ts';

describe('meta: the scenario checks detect broken exclusion', () => {
  it('the overlap check finds both writing when skew exceeds a third of a TTL (+15 s at 30 s)', async () => {
    const { successor, overlapSteps } = await runSkewedTakeover(
      new MemoryStore(),
      'meta/skew',
      15_000,
    );
    expect(successor).toBeDefined();
    // The holder still may write for 5 s after the takeover: the documented limit of skew absorption.
    expect(overlapSteps.length).toBeGreaterThan(0);
  });

  it('the one-winner count sees several winners without conditional writes', async () => {
    // All 16 contenders read the empty key first; then each writes and reads back in turn, so each
    // read-back sees its own write: best-effort mode cannot tell, and the count must catch it.
    const inner = new MemoryStore();
    const store = new FaultStore(inner);
    let reads = 0;
    let allRead: () => void = () => {};
    const everyoneRead = new Promise<void>((resolve) => {
      allRead = resolve;
    });
    let turn: Promise<void> = everyoneRead;
    let endTurn: () => void = () => {};
    const originalGet = inner.get.bind(inner);
    inner.get = async (key, callOptions) => {
      const result = await originalGet(key, callOptions);
      reads += 1;
      if (reads === 16) allRead();
      if (reads > 16) endTurn(); // a read-back ends the writer's turn
      return result;
    };
    store.faults.beforePut = async () => {
      const previous = turn;
      turn = new Promise<void>((resolve) => {
        const mine = resolve;
        void previous.then(() => {
          endTurn = mine;
        });
      });
      await previous;
    };
    const { winners } = await raceContenders(store, 'meta/race', 16, {
      conditional: false,
      logger: { info() {}, warn() {} },
    });
    expect(winners.length).toBeGreaterThan(1);
  });
});
