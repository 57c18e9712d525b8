import { describe, expect, it } from 'vitest';
import { SNAPSHOT_LOG_FLOOR_BYTES, snapshotDue } from './snapshot-schedule.ts';

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
