import { describe, expect, it } from 'vitest';
import { type ChainEntryInfo, compactionLevelsProblem, planCompaction } from './compaction-plan.ts';

const LEVELS = [30_000, 300_000];
const fine = (shippedAt: number, size = 100, logBytes = 400): ChainEntryInfo => ({
  level: 0,
  size,
  logBytes,
  shippedAt,
});
const at = (level: number, shippedAt: number, size = 100, logBytes = 400): ChainEntryInfo => ({
  level,
  size,
  logBytes,
  shippedAt,
});

describe('planCompaction', () => {
  it('merges the fine segments of a closed 30 s window, never the last entry', () => {
    const chain = [fine(1_000), fine(6_000), fine(11_000), fine(31_000)];
    expect(planCompaction({ chain, now: 32_000, levelsMs: LEVELS, databaseBytes: null })).toEqual({
      level: 1,
      first: 0,
      end: 3,
      reason: 'window-ended',
    });
    // The window still open: nothing.
    expect(
      planCompaction({ chain, now: 29_000, levelsMs: LEVELS, databaseBytes: null }),
    ).toBeNull();
    // Its last two entries in one window, the last of them the chain's end: not a run.
    const tail = [fine(31_000), fine(32_000)];
    expect(
      planCompaction({ chain: tail, now: 90_000, levelsMs: LEVELS, databaseBytes: null }),
    ).toBeNull();
  });

  it('a single entry in its window stays as it is', () => {
    const chain = [fine(1_000), fine(31_000), fine(61_000)];
    expect(
      planCompaction({ chain, now: 100_000, levelsMs: [30_000], databaseBytes: null }),
    ).toBeNull();
  });

  it('merges level-1 objects of a closed 5 min window at level 2, with what followed them', () => {
    const chain = [at(1, 20_000), at(1, 50_000), fine(70_000), fine(301_000)];
    expect(planCompaction({ chain, now: 302_000, levelsMs: LEVELS, databaseBytes: null })).toEqual({
      level: 2,
      first: 0,
      end: 3,
      reason: 'window-ended',
    });
  });

  it('above level 1, merges a window only once all of it is older than the exact window', () => {
    const chain = [at(1, 20_000), at(1, 50_000), at(1, 280_000), fine(301_000), fine(700_000)];
    const plan = (now: number) =>
      planCompaction({
        chain,
        now,
        levelsMs: LEVELS,
        databaseBytes: null,
        exactSince: now - 300_000,
      });
    // The window ended at 300 s; its first two objects are older than the
    // exact window at 400 s, the third not: nothing yet, not a partial merge.
    expect(plan(400_000)).toBeNull();
    expect(plan(599_999)).toBeNull();
    expect(plan(600_000)).toEqual({ level: 2, first: 0, end: 3, reason: 'window-ended' });
    // Without an exact window, at the window's end.
    expect(planCompaction({ chain, now: 300_000, levelsMs: LEVELS, databaseBytes: null })).toEqual({
      level: 2,
      first: 0,
      end: 3,
      reason: 'window-ended',
    });
    // Level 1 does not wait: its objects' fine segments are what the window keeps.
    const fineChain = [fine(1_000), fine(6_000), fine(31_000)];
    expect(
      planCompaction({
        chain: fineChain,
        now: 31_000,
        levelsMs: LEVELS,
        databaseBytes: null,
        exactSince: 31_000 - 300_000,
      }),
    ).toEqual({ level: 1, first: 0, end: 2, reason: 'window-ended' });
  });

  it('an object of a window merges again with later entries of the same window, not with another window', () => {
    const chain = [at(1, 20_000), fine(25_000), fine(29_000), fine(31_000)];
    expect(planCompaction({ chain, now: 30_500, levelsMs: LEVELS, databaseBytes: null })).toEqual({
      level: 1,
      first: 0,
      end: 3,
      reason: 'window-ended',
    });
    // Objects of one level alone are not merged again.
    const same = [at(1, 20_000), at(1, 25_000), fine(31_000)];
    expect(
      planCompaction({ chain: same, now: 30_500, levelsMs: [30_000], databaseBytes: null }),
    ).toBeNull();
  });

  it('inside an open window, merges at level 1 once the fine bytes reach the database size', () => {
    const chain = [fine(1_000, 600), fine(2_000, 500), fine(3_000, 10)];
    expect(planCompaction({ chain, now: 4_000, levelsMs: LEVELS, databaseBytes: 1_000 })).toEqual({
      level: 1,
      first: 0,
      end: 2,
      reason: 'bytes',
    });
    expect(
      planCompaction({ chain, now: 4_000, levelsMs: LEVELS, databaseBytes: 2_000 }),
    ).toBeNull();
  });

  it('inside an open window above level 1, merges once the entries below it hold twice the database', () => {
    // A closed 30 s window's object, the open window's object and a fine
    // segment, inside one open 5 min window.
    const upper = [at(1, 1_000, 900), at(1, 40_000, 900), fine(41_000, 300), fine(42_000)];
    expect(
      planCompaction({ chain: upper, now: 43_000, levelsMs: LEVELS, databaseBytes: 1_000 }),
    ).toEqual({ level: 2, first: 0, end: 3, reason: 'bytes' });
    // 2100 bytes below level 2 against a 1100-byte database: not yet.
    expect(
      planCompaction({ chain: upper, now: 43_000, levelsMs: LEVELS, databaseBytes: 1_100 }),
    ).toBeNull();
    // A level-2 object already there counts for nothing below level 2.
    const again = [at(2, 1_000, 1_000), at(1, 40_000, 900), fine(41_000, 300), fine(42_000)];
    expect(
      planCompaction({ chain: again, now: 43_000, levelsMs: LEVELS, databaseBytes: 1_000 }),
    ).toBeNull();
  });

  it('with maxRunLogBytes, leaves a window covering more of the log as it is, at every level', () => {
    const chain = [
      fine(1_000, 100, 600),
      fine(6_000, 100, 600),
      fine(40_000),
      fine(45_000),
      fine(301_000),
    ];
    const plan = (maxRunLogBytes: number, now: number) =>
      planCompaction({ chain, now, levelsMs: LEVELS, databaseBytes: null, maxRunLogBytes });
    // The first window covers 1,200 bytes: at 1,200 it is a run, at 1,199 the next window is.
    expect(plan(1_200, 61_000)).toEqual({ level: 1, first: 0, end: 2, reason: 'window-ended' });
    expect(plan(1_199, 61_000)).toEqual({ level: 1, first: 2, end: 4, reason: 'window-ended' });
    // Level 2's window holds both (2,000 bytes): not a run under 2,000.
    const merged = [at(1, 6_000, 100, 1_200), at(1, 45_000, 100, 800), fine(301_000)];
    const level2 = (maxRunLogBytes: number) =>
      planCompaction({
        chain: merged,
        now: 302_000,
        levelsMs: LEVELS,
        databaseBytes: null,
        maxRunLogBytes,
      });
    expect(level2(2_000)).toEqual({ level: 2, first: 0, end: 2, reason: 'window-ended' });
    expect(level2(1_999)).toBeNull();
  });

  it('with no levels, never', () => {
    const chain = [fine(1_000), fine(2_000), fine(90_000)];
    expect(planCompaction({ chain, now: 1e9, levelsMs: [], databaseBytes: 1 })).toBeNull();
  });
});

describe('compactionLevelsProblem', () => {
  it('accepts ascending whole intervals of at least a second, or none', () => {
    expect(compactionLevelsProblem([30_000, 300_000, 3_600_000])).toBeUndefined();
    expect(compactionLevelsProblem([])).toBeUndefined();
  });
  it('names what is wrong', () => {
    expect(compactionLevelsProblem([500])).toMatch(/level 1: 500/);
    expect(compactionLevelsProblem([60_000, 30_000])).toMatch(/level 2 .* not longer than level 1/);
    expect(compactionLevelsProblem([30_000, 45_000])).toMatch(
      /level 2 \(45000 ms\) is not a whole multiple of level 1 \(30000 ms\)/,
    );
    expect(compactionLevelsProblem(Array.from({ length: 10 }, (_, i) => 2 ** i * 1000))).toMatch(
      /10 levels, at most 9/,
    );
    expect(compactionLevelsProblem([1.5e3 + 0.5])).toMatch(/whole number/);
  });
});
