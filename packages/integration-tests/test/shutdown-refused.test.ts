/**
 * A worker that refused its prefix for good stops with a report that says
 * so: incomplete, `shortfall: 'refused'`, the refusal as `lastError`, and
 * nothing of its own in the bucket.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BackupWorker, type ShutdownReport } from '@x/backup-worker';
import { FakeClock } from '@x/lease';
import { FramedDirSource } from '@x/source-framed';
import { MemoryStore } from '@x/store';
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from './helpers/drive.ts';
import { FramedTestEngine } from './helpers/framed-engine.ts';
import { CountingStore } from './helpers/stores.ts';

describe('a stop after the prefix was refused', () => {
  let directory: string;
  afterEach(async () => {
    await rm(directory, { recursive: true, force: true });
  });

  it('reports shortfall "refused" with the reason, and wrote nothing but its lease', async () => {
    directory = await mkdtemp(join(tmpdir(), 'shutdown-refused-'));
    const bucket = new MemoryStore();
    const owner = await FramedTestEngine.create(join(directory, 'owner'));
    await owner.commit(3);
    const clock = new FakeClock();
    const workerOf = (engine: FramedTestEngine, store: CountingStore | MemoryStore) =>
      new BackupWorker({
        store,
        prefix: 'p',
        source: new FramedDirSource({ directory: engine.directory, engine }),
        clock,
        manifestIntervalMs: 0,
      });
    await workerOf(owner, bucket).runOnce();

    const stranger = await FramedTestEngine.create(join(directory, 'stranger'));
    await stranger.commit(5);
    const counting = new CountingStore(bucket);
    const handle = workerOf(stranger, counting).start();
    await waitFor(clock, () => handle.health().refusal !== null, { what: 'the refusal' });
    let report: ShutdownReport | undefined;
    void handle.shutdown().then((r) => {
      report = r;
    });
    await waitFor(clock, () => report !== undefined, { stepMs: 100, what: 'shutdown' });

    expect(report).toMatchObject({ complete: false, shortfall: 'refused' });
    expect(report?.lastError).toMatch(/another lineage|another store/);
    expect(counting.writes.filter((key) => !key.endsWith('/LEASE'))).toEqual([]);
  });
});
