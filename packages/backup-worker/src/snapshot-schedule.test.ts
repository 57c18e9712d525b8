import { describe, expect, it } from 'vitest';
import {
  decideSnapshot,
  NO_SNAPSHOT_WAIT,
  SNAPSHOT_FORCE_AFTER_STEPS,
  SNAPSHOT_FORCE_MAX_BACKLOG_BYTES,
  SNAPSHOT_FORCE_MIN_AGE_MS,
  SNAPSHOT_LOG_FLOOR_BYTES,
  snapshotDue,
} from './snapshot-schedule.ts';

const base = {
  startedAt: 1_000,
  now: 1_000,
  intervalMs: 3_600_000,
  shippedBytes: 0,
  databaseBytes: 4_000_000,
  logFactor: 2,
};

describe('snapshotDue', () => {
  it('is due once the generation is as old as the interval, not before', () => {
    expect(snapshotDue({ ...base, now: 1_000 + 3_599_999 })).toBeNull();
    expect(snapshotDue({ ...base, now: 1_000 + 3_600_000 })).toMatch(/3600s old/);
  });

  it('is due once the stored log outgrows the factor times the database, not at it', () => {
    expect(snapshotDue({ ...base, shippedBytes: 8_000_000 })).toBeNull();
    expect(snapshotDue({ ...base, shippedBytes: 8_000_001 })).toMatch(/more than 2 ×/);
  });

  it('waits for the floor of WAL for a small database, however far past the factor', () => {
    // A 10 kB database: 2 × is 20 kB, which a few commits ship.
    const small = { ...base, databaseBytes: 10_000 };
    expect(snapshotDue({ ...small, shippedBytes: 20_001 })).toBeNull();
    expect(snapshotDue({ ...small, shippedBytes: SNAPSHOT_LOG_FLOOR_BYTES - 1 })).toBeNull();
    expect(snapshotDue({ ...small, shippedBytes: SNAPSHOT_LOG_FLOOR_BYTES })).toMatch(
      /more than 2 × the 10000-byte database/,
    );
    expect(SNAPSHOT_LOG_FLOOR_BYTES).toBe(1024 * 1024);
  });

  it('ignores a disabled rule and an unknown database size', () => {
    expect(snapshotDue({ ...base, intervalMs: 0, now: 1e12 })).toBeNull();
    expect(snapshotDue({ ...base, logFactor: 0, shippedBytes: 1e12 })).toBeNull();
    expect(snapshotDue({ ...base, databaseBytes: null, shippedBytes: 1e12 })).toBeNull();
  });
});

describe('decideSnapshot', () => {
  const due = {
    ...base,
    now: base.startedAt + SNAPSHOT_FORCE_MIN_AGE_MS,
    intervalMs: SNAPSHOT_FORCE_MIN_AGE_MS,
    generation: 3,
    sameWal: true,
    inRestorePoint: true,
    backlogBytes: 0,
    compactionUnnamed: false,
  };

  it('starts a generation at once when due and caught up, and forgets the wait', () => {
    const decision = decideSnapshot({ ...NO_SNAPSHOT_WAIT, dueSteps: 1 }, due);
    expect(decision).toMatchObject({ start: true, backlogBytes: 0, reason: /10s old/ });
    expect(decision.wait.dueSteps).toBe(0);
  });

  it('does nothing when not due, or when the engine already left the generation', () => {
    expect(decideSnapshot(NO_SNAPSHOT_WAIT, { ...due, intervalMs: 0 })).toEqual({
      start: false,
      wait: NO_SNAPSHOT_WAIT,
    });
    const moved = decideSnapshot({ ...NO_SNAPSHOT_WAIT, dueSteps: 2 }, { ...due, sameWal: false });
    expect(moved.start).toBe(false);
    expect(moved.wait.dueSteps).toBe(0);
  });

  it('keeps a generation due once found due, though the size rule stops saying so', () => {
    const sized = { ...due, intervalMs: 0, shippedBytes: 9_000_000, backlogBytes: 1 };
    const first = decideSnapshot(NO_SNAPSHOT_WAIT, sized);
    expect(first.wait.dueFor).toEqual({ generation: 3, reason: expect.stringMatching(/2 ×/) });
    const compacted = decideSnapshot(first.wait, { ...sized, shippedBytes: 100 });
    expect(compacted.start).toBe(true);
    // Not for the next generation.
    expect(decideSnapshot(first.wait, { ...sized, shippedBytes: 100, generation: 4 }).start).toBe(
      false,
    );
  });

  it('forces the switch after the allowed steps behind, with the backlog going into the snapshot', () => {
    let wait = NO_SNAPSHOT_WAIT;
    const behind = { ...due, backlogBytes: 4096 };
    for (let step = 1; step <= SNAPSHOT_FORCE_AFTER_STEPS; step += 1) {
      const decision = decideSnapshot(wait, behind);
      expect(decision.start).toBe(false);
      expect(decision.wait.dueSteps).toBe(step);
      wait = decision.wait;
    }
    expect(decideSnapshot(wait, behind)).toMatchObject({ start: true, backlogBytes: 4096 });
    // Not while the shipped log is outside a restore point.
    expect(decideSnapshot(wait, { ...behind, inRestorePoint: false }).start).toBe(false);
  });

  it('does not force past the backlog bound or before the minimum age, and starts the count over', () => {
    const counted = { ...NO_SNAPSHOT_WAIT, dueSteps: 5 };
    const flooded = { ...due, backlogBytes: SNAPSHOT_FORCE_MAX_BACKLOG_BYTES + 1 };
    expect(decideSnapshot(counted, flooded)).toMatchObject({ start: false, wait: { dueSteps: 0 } });
    const young = { ...due, intervalMs: 1, now: due.now - 1, backlogBytes: 1 };
    expect(decideSnapshot(counted, young)).toMatchObject({ start: false, wait: { dueSteps: 0 } });
  });

  it('waits for a compaction to be named, asking for no other meanwhile', () => {
    const decision = decideSnapshot(NO_SNAPSHOT_WAIT, { ...due, compactionUnnamed: true });
    expect(decision).toMatchObject({ start: false, wait: { awaitsCompaction: true, dueSteps: 1 } });
    expect(decideSnapshot(decision.wait, due)).toMatchObject({
      start: true,
      wait: { awaitsCompaction: false },
    });
  });
});
