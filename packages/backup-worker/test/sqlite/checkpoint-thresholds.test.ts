import { afterEach, describe, expect, it } from 'vitest';
import { SqliteTap } from '../../src/sqlite/tap.ts';
import { openApplicationDatabase } from './harness.ts';

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0).reverse()) cleanup();
});

describe('SQLite tap PASSIVE threshold', () => {
  it('copies once per passiveCheckpointPages new frames, not at every call past it', () => {
    const { path, application } = openApplicationDatabase('backupd-sqlite-thresholds-', cleanups);
    const tap = SqliteTap.open(path, {
      passiveCheckpointPages: 20,
      truncateCheckpointPages: 10_000,
    });
    cleanups.push(() => tap.close());
    tap.releaseSnapshot();
    // One page of blob per commit: at least one frame each.
    const commit = (count: number) => {
      for (let i = 0; i < count; i += 1)
        application.exec('INSERT INTO t (body) VALUES (randomblob(3000))');
    };

    commit(25);
    const first = tap.maintain();
    expect(first?.mode).toBe('passive');
    expect(first?.checkpointedFrames).toBeGreaterThanOrEqual(20);

    // A few frames more: the WAL is still past 20 frames, but only a few are new.
    commit(2);
    expect(tap.walFrames).toBeGreaterThanOrEqual(20);
    expect(tap.maintain()).toBeNull();

    commit(25);
    expect(tap.maintain()?.mode).toBe('passive');
  });
});
