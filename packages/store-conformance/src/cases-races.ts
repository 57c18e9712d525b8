/**
 * The conformance cases of group `races`. Races between concurrent writers:
 * conditional writes keep exactly one winner under contention.
 */
import { AlreadyExistsError } from '@x/store';
import { ConformanceFailure, check, describeError, text } from './assertions.ts';
import { callOptions, expectText, isRetryable, key, needsPut } from './case-helpers.ts';
import type { ConformanceCase } from './case-types.ts';

export const races: ConformanceCase[] = [
  {
    group: 'races',
    name: '32 concurrent creates of one key: exactly one succeeds, 31 fail with AlreadyExistsError',
    requires: [needsPut],
    async run(context) {
      const attempts = Array.from({ length: 32 }, (_, index) =>
        context.store.put(key(context, 'contested'), text(`writer ${index}`), {
          ...callOptions(context),
          mode: 'create',
        }),
      );
      const settled = await Promise.allSettled(attempts);
      const winners = settled.flatMap((result, index) =>
        result.status === 'fulfilled' ? [index] : [],
      );
      const others = settled.filter(
        (result) => result.status === 'rejected' && !AlreadyExistsError.isInstance(result.reason),
      );
      check(
        others.length === 0,
        `unexpected errors: ${others.map((result) => describeError((result as PromiseRejectedResult).reason)).join('; ')}`,
      );
      check(
        winners.length === 1,
        `${winners.length} of 32 concurrent creates succeeded, expected exactly 1`,
      );
      await expectText(context, 'contested', `writer ${winners[0]}`, "the winner's content");
    },
  },
  {
    group: 'races',
    name: '5 workers × 10 read-modify-write increments with ifMatch and retry reach exactly 50',
    requires: [needsPut],
    async run(context) {
      const { store } = context;
      const counter = key(context, 'counter');
      await store.put(counter, text('0'), callOptions(context));
      let attempts = 0;
      const worker = async () => {
        for (let done = 0; done < 10; ) {
          if (++attempts > 5000)
            throw new ConformanceFailure(
              'more than 5000 attempts for 50 increments: the store keeps refusing',
            );
          const current = await store.get(counter, callOptions(context));
          check(current !== null, 'the counter disappeared');
          const next = Number(new TextDecoder().decode(current.body)) + 1;
          try {
            await store.put(counter, text(String(next)), {
              ...callOptions(context),
              mode: { ifMatch: current.version },
            });
            done++;
          } catch (error) {
            if (!isRetryable(error)) throw error;
          }
        }
      };
      await Promise.all(Array.from({ length: 5 }, worker));
      await expectText(
        context,
        'counter',
        '50',
        'after 50 successful increments (lost updates otherwise)',
      );
    },
  },
];
