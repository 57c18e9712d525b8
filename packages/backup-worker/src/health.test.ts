import { describe, expect, it } from 'vitest';
import { HealthTracker, MIN_UNHEALTHY_LAG_MS } from './health.ts';

const key = { engineGeneration: 'g', snapshot: 's', wal: 'w' };

describe('HealthTracker: how far behind', () => {
  it('reports unshipped bytes and unrestorable commits, and turns unhealthy when commits wait too long for a restore point', () => {
    // WAL interval 1 s, restore points every 10 s: unhealthy past 30 s + 2 × 10 s.
    const health = new HealthTracker(1_000, 10_000);
    health.shipped = { key, cursor: 1_000 };
    health.latestRestorePoint = { manifestKey: 'p/manifest/5.json', commitSeq: 5 };
    health.observe({ ...key, durableLength: 1_000, commitCount: 5 }, 0, 0);
    expect(health.snapshot()).toMatchObject({
      healthy: true,
      unshippedBytes: 0,
      unrestorableCommits: 0,
    });
    // Shipped, not yet in a restore point: healthy while it is recent.
    health.observe({ ...key, durableLength: 1_000, commitCount: 9 }, 1_000, 1_000);
    expect(health.snapshot()).toMatchObject({ healthy: true, unrestorableCommits: 4 });
    health.observe({ ...key, durableLength: 1_000, commitCount: 9 }, 50_000, 50_000);
    expect(health.snapshot().healthy).toBe(true);
    health.observe({ ...key, durableLength: 1_000, commitCount: 9 }, 51_500, 51_500);
    expect(health.snapshot()).toMatchObject({ healthy: false, unrestorableCommits: 4 });
    expect(health.snapshot().reason).toMatch(
      /4 commits captured 50s ago or later are in no restore point yet/,
    );
    // A restore point that covers them: healthy again.
    health.latestRestorePoint = { manifestKey: 'p/manifest/9.json', commitSeq: 9 };
    health.observe({ ...key, durableLength: 1_000, commitCount: 9 }, 52_000, 52_000);
    expect(health.snapshot()).toMatchObject({ healthy: true, unrestorableCommits: 0 });
  });

  it('names how far behind the shipping is when durable data waits unshipped too long', () => {
    const health = new HealthTracker(1_000, 10_000);
    health.shipped = { key, cursor: 0 };
    health.observe({ ...key, durableLength: 3 * 1024 * 1024, commitCount: 10 }, 0, 0);
    expect(health.snapshot()).toMatchObject({ healthy: true, unshippedBytes: 3 * 1024 * 1024 });
    health.observe(
      { ...key, durableLength: 3 * 1024 * 1024, commitCount: 10 },
      MIN_UNHEALTHY_LAG_MS + 1,
      0,
    );
    expect(health.snapshot().reason).toMatch(
      /unshipped for 30s \(3\.0 MiB behind\): backupd is not keeping up/,
    );
  });
});

describe('HealthTracker: the engine files and refusals', () => {
  it("keeps the engine's files from the last position, and forgets them without one", () => {
    const health = new HealthTracker(1_000, 10_000);
    const engine = {
      databaseBytes: 8192,
      walBytes: 4152,
      checkpoints: { passive: 2, truncate: 1 },
    };
    health.observe({ ...key, durableLength: 0, engine }, 0, 0);
    expect(health.snapshot().engine).toEqual(engine);
    health.observe(null, 1_000, 1_000);
    expect(health.snapshot().engine).toBeNull();
  });

  it('reports a lineage refusal before ignored preconditions, and neither once cleared', () => {
    const health = new HealthTracker(1_000, 10_000);
    expect(health.snapshot().refusal).toBeNull();
    health.preconditionsIgnored = 'the service accepted a write it should have refused';
    expect(health.snapshot().refusal).toEqual({
      kind: 'preconditions-ignored',
      reason: 'the service accepted a write it should have refused',
    });
    health.lineage = 'this backup prefix holds another database';
    expect(health.snapshot().refusal).toEqual({
      kind: 'lineage',
      reason: 'this backup prefix holds another database',
    });
    health.lineage = null;
    health.preconditionsIgnored = null;
    expect(health.snapshot().refusal).toBeNull();
  });
});
