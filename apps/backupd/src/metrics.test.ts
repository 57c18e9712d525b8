import { MemoryStore } from '@x/store';
import { describe, expect, it } from 'vitest';
import { InstrumentedStore } from './instrumented-store.ts';
import { renderMetrics } from './metrics.ts';
import type { ReplicaStatus } from './status.ts';

function status(overrides: Partial<ReplicaStatus>): ReplicaStatus {
  return {
    database: '/data/app.db',
    replica: 'file:///backups/app',
    healthy: true,
    lagSeconds: 0,
    unshippedBytes: 0,
    unrestorableCommits: 0,
    lastSuccessSeconds: 1_700_000_000,
    errors: 0,
    leaseHeld: true,
    requests: new InstrumentedStore(new MemoryStore()).counters,
    ...overrides,
  };
}

describe('renderMetrics: how far behind a replica is', () => {
  it('exposes unshipped bytes and commits not yet in a restore point, per replica', () => {
    const text = renderMetrics([
      status({ unshippedBytes: 123_456_789, unrestorableCommits: 4242, lagSeconds: 41 }),
    ]);
    const labels = '{database="/data/app.db",replica="file:///backups/app"}';
    expect(text).toContain('# TYPE backupd_unshipped_bytes gauge');
    expect(text).toContain(`backupd_unshipped_bytes${labels} 123456789`);
    expect(text).toContain('# TYPE backupd_unrestorable_commits gauge');
    expect(text).toContain(`backupd_unrestorable_commits${labels} 4242`);
    expect(text).toContain(`backupd_lag_seconds${labels} 41`);
  });
});

describe('renderMetrics: the engine files', () => {
  const labels = '{database="/data/app.db",replica="file:///backups/app"}';

  it('exposes database size, WAL size and checkpoints by mode when the engine reports them', () => {
    const text = renderMetrics([
      status({
        engine: {
          databaseBytes: 2_400_256,
          walBytes: 4_152_832,
          checkpoints: { passive: 17, truncate: 3 },
          checkpointLockHeld: true,
        },
      }),
    ]);
    expect(text).toContain('# TYPE backupd_checkpoint_lock_held gauge');
    expect(text).toContain(`backupd_checkpoint_lock_held${labels} 1`);
    expect(text).toContain('# TYPE backupd_database_bytes gauge');
    expect(text).toContain(`backupd_database_bytes${labels} 2400256`);
    expect(text).toContain(`backupd_wal_bytes${labels} 4152832`);
    expect(text).toContain('# TYPE backupd_checkpoints_total counter');
    expect(text).toContain(
      'backupd_checkpoints_total{database="/data/app.db",replica="file:///backups/app",mode="passive"} 17',
    );
    expect(text).toContain(
      'backupd_checkpoints_total{database="/data/app.db",replica="file:///backups/app",mode="truncate"} 3',
    );
  });

  it('leaves the samples out when the engine does not say (a standby, a framed store)', () => {
    const text = renderMetrics([status({})]);
    expect(text).not.toContain(`backupd_database_bytes${labels}`);
    expect(text).not.toContain(`backupd_wal_bytes${labels}`);
    expect(text).not.toContain('backupd_checkpoints_total{');
    expect(text).not.toContain('backupd_checkpoint_lock_held{');
  });
});

describe('renderMetrics: how old the restore points are', () => {
  const labels = '{database="/data/app.db",replica="file:///backups/app"}';

  it('exposes the age of the latest restore point and the start of the window', () => {
    const text = renderMetrics(
      [
        status({
          latestRestorePoint: {
            commitSeq: 7,
            key: 'app/manifest/00000000000000000007.json',
            createdAt: '2026-12-01T11:59:30Z',
          },
          oldestRestorePoint: {
            commitSeq: 2,
            restorableFrom: 1,
            createdAt: '2026-12-01T00:00:00Z',
          },
        }),
      ],
      Date.parse('2026-12-01T12:00:00Z'),
    );
    expect(text).toContain('# TYPE backupd_latest_restore_point_age_seconds gauge');
    expect(text).toContain(`backupd_latest_restore_point_age_seconds${labels} 30`);
    expect(text).toContain(
      `backupd_oldest_restore_point_timestamp_seconds${labels} ${Date.parse('2026-12-01T00:00:00Z') / 1000}`,
    );
  });
});
