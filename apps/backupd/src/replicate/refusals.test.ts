import { describe, expect, it } from 'vitest';
import { type ReplicaRefusal, watchRefusals } from './refusals.ts';

describe('watchRefusals', () => {
  it('reports the first refusal once, with its replica, and then stops looking', async () => {
    const replicas: { database: string; replica: string; refusal?: ReplicaRefusal }[] = [
      { database: 'a.db', replica: 'file:///a' },
      { database: 'b.db', replica: 'file:///b' },
    ];
    let looks = 0;
    const seen: ReplicaRefusal[] = [];
    const stop = watchRefusals(
      () => {
        looks += 1;
        return replicas;
      },
      (refusal) => seen.push(refusal),
      5,
    );
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(seen).toEqual([]);
    replicas[1] = {
      ...replicas[1]!,
      refusal: {
        database: 'b.db',
        replica: 'file:///b',
        kind: 'preconditions-ignored',
        reason: 'the service ignores preconditions',
      },
    };
    await new Promise((resolve) => setTimeout(resolve, 30));
    const looksAfter = looks;
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(seen).toEqual([
      {
        database: 'b.db',
        replica: 'file:///b',
        kind: 'preconditions-ignored',
        reason: 'the service ignores preconditions',
      },
    ]);
    expect(looks).toBe(looksAfter);
    stop();
  });
});
