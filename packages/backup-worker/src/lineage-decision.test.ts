import { describe, expect, it } from 'vitest';
import { decideLineage } from './lineage-decision.ts';

const latest = { lineage: 'A', commitSeq: 10 };
const target = 'db/manifest/00000000000000000010.json';

describe('decideLineage', () => {
  it('takes an empty prefix for the store: its own lineage, or a new one', () => {
    expect(decideLineage({ latest: null, latestTarget: null, local: 'A', parent: null })).toEqual({
      kind: 'continue',
      lineage: 'A',
      adopt: false,
    });
    expect(decideLineage({ latest: null, latestTarget: null, local: null, parent: null })).toEqual({
      kind: 'create',
      adopt: false,
    });
  });

  it("continues its own lineage's prefix once the store holds at least the newest restore point's commits", () => {
    const facts = { latest, latestTarget: target, local: 'A', parent: null };
    expect(decideLineage(facts)).toEqual({ kind: 'needs-commit-count' });
    expect(decideLineage({ ...facts, commitCount: null })).toEqual({ kind: 'undecidable' });
    expect(decideLineage({ ...facts, commitCount: 10 })).toEqual({
      kind: 'continue',
      lineage: 'A',
      adopt: false,
    });
    const rewound = decideLineage({ ...facts, commitCount: 9 });
    expect(rewound).toMatchObject({ kind: 'refuse' });
    expect(rewound.kind === 'refuse' && rewound.reason).toMatch(
      /^this store holds 9 commits, fewer than the 10 of the newest restore point/,
    );
  });

  it("refuses another store's prefix, and a never-backed-up store over restore points", () => {
    const other = decideLineage({ latest, latestTarget: target, local: 'B', parent: null });
    expect(other.kind === 'refuse' && other.reason).toMatch(
      /another store \(lineage A\), not this one \(lineage B\)/,
    );
    const never = decideLineage({ latest, latestTarget: target, local: null, parent: null });
    expect(never.kind === 'refuse' && never.reason).toMatch(
      /another store \(lineage A\), and this store has never been backed up/,
    );
  });

  it('adopts the prefix for a store restored from exactly the restore point LATEST names', () => {
    const parent = { lineage: 'A', manifestKey: target };
    expect(decideLineage({ latest, latestTarget: target, local: null, parent })).toEqual({
      kind: 'create',
      adopt: true,
    });
    // Adopted before (its own lineage exists): it continues under it, without a commit check.
    expect(decideLineage({ latest, latestTarget: target, local: 'C', parent })).toEqual({
      kind: 'continue',
      lineage: 'C',
      adopt: true,
    });
  });

  it('refuses a restored store once the prefix has moved on', () => {
    const parent = { lineage: 'A', manifestKey: 'db/manifest/00000000000000000008.json' };
    const moved = decideLineage({ latest, latestTarget: target, local: null, parent });
    expect(moved.kind === 'refuse' && moved.reason).toBe(
      `this store was restored from ${parent.manifestKey} of lineage A, but the backup prefix has moved on since (LATEST names ${target}): another instance has written to it. Nothing is uploaded or deleted. Point the worker at a new prefix`,
    );
  });

  it("treats a restored store whose own lineage is LATEST's like any store of that lineage", () => {
    const parent = { lineage: 'A', manifestKey: 'old' };
    expect(decideLineage({ latest, latestTarget: target, local: 'A', parent })).toEqual({
      kind: 'needs-commit-count',
    });
  });
});
