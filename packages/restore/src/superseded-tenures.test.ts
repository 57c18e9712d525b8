import { describe, expect, it } from 'vitest';
import { supersededTenures, type TenureStamp } from './superseded-tenures.ts';

const stamp = (commitSeq: number, leaseGeneration: number | null, lineage = 'a'): TenureStamp => ({
  key: `m/${lineage}/${commitSeq}`,
  lineage,
  commitSeq,
  leaseGeneration,
});

describe('supersededTenures', () => {
  it('finds nothing in a history whose generations only grow, with takeovers and restarts', () => {
    const history = [stamp(1, 1), stamp(5, 1), stamp(9, 2), stamp(9, 3), stamp(12, 3)];
    expect(supersededTenures(history).size).toBe(0);
  });

  it('names a restore point of a generation older than one written at a lower commit', () => {
    const found = supersededTenures([stamp(1, 4), stamp(5, 5), stamp(7, 4), stamp(8, 5)]);
    expect([...found]).toEqual([
      ['m/a/7', { leaseGeneration: 4, successorGeneration: 5, successorKey: 'm/a/5' }],
    ]);
  });

  it('compares within a lineage only, and skips restore points without a generation', () => {
    const stamps = [stamp(1, 9, 'a'), stamp(5, 1, 'b'), stamp(2, null, 'a'), stamp(6, 2, 'a')];
    expect(supersededTenures(stamps).size).toBe(1);
    expect(supersededTenures(stamps).has('m/a/6')).toBe(true);
  });
});
