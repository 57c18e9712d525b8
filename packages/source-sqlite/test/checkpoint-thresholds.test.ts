import { afterEach, describe, expect, it } from 'vitest';
import { SqliteTap } from '../src/tap.ts';
import { openApplicationDatabase } from './harness.ts';

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0).reverse()) cleanup();
});

/**
 * A tap past its snapshot on a fresh application database (which never
 * checkpoints by itself), and `commit(n)`: n commits of one page of blob
 * each, so at least one frame each.
 */
function openTap(passiveCheckpointPages: number) {
  const { path, application } = openApplicationDatabase('backupd-sqlite-thresholds-', cleanups);
  const tap = SqliteTap.open(path, { passiveCheckpointPages, truncateCheckpointPages: 10_000 });
  cleanups.push(() => tap.close());
  tap.releaseSnapshot();
  const commit = (count: number) => {
    for (let i = 0; i < count; i += 1)
      application.exec('INSERT INTO t (body) VALUES (randomblob(3000))');
  };
  return { application, tap, commit };
}

describe('SQLite tap PASSIVE threshold', () => {
  it('copies once per passiveCheckpointPages new frames, not at every call past it', () => {
    const { tap, commit } = openTap(20);

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

  it('leaves the copying to an application that checkpoints on its own, and resumes when it stops', () => {
    // At most a few frames per commit: 5 commits stay under the threshold.
    const { application, tap, commit } = openTap(100);
    const applicationCheckpoint = () =>
      application.prepare('PRAGMA wal_checkpoint(PASSIVE)').get() as {
        log: number;
        checkpointed: number;
      };

    // Nobody else copies: the tap does, past its threshold.
    commit(110);
    expect(tap.maintain()?.mode).toBe('passive');

    // Fewer new frames than the threshold: the tap only moves its reader.
    commit(5);
    expect(tap.maintain()).toBeNull();
    // From now on the application checkpoints after its commits (as SQLite's
    // auto-checkpoint does): each time it copies up to the tap's reader, and
    // the tap runs no copy of its own, although more than 100 new frames
    // landed before each of its calls.
    let copiedByApplication = 0;
    for (let round = 0; round < 3; round += 1) {
      const copy = applicationCheckpoint();
      expect(copy.checkpointed).toBeGreaterThan(copiedByApplication);
      copiedByApplication = copy.checkpointed;
      commit(110);
      expect(tap.maintain(), `round ${round}`).toBeNull();
    }
    expect(tap.walFrames - copiedByApplication).toBeGreaterThanOrEqual(110);

    // The application stops checkpointing: the tap copies again.
    commit(110);
    const resumed = tap.maintain();
    expect(resumed?.mode).toBe('passive');
    expect(resumed?.checkpointedFrames).toBe(resumed?.walFrames);
  });
});
