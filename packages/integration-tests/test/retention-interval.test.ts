/**
 * Retention passes at most once per four manifest intervals: a restore point
 * every interval costs one LIST of `manifest/` every fourth, and what it
 * drops is deleted by then.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BackupWorker } from '@x/backup-worker';
import { FakeClock } from '@x/lease';
import { listRestorePoints } from '@x/restore';
import { FramedDirSource } from '@x/source-framed';
import { MemoryStore } from '@x/store';
import { afterEach, describe, expect, it } from 'vitest';
import { FramedTestEngine } from './helpers/framed-engine.ts';
import { CountingStore } from './helpers/stores.ts';

const directories: string[] = [];
afterEach(async () => {
  for (const directory of directories.splice(0))
    await rm(directory, { recursive: true, force: true });
});

describe('retention passes', () => {
  it('run at most once per four manifest intervals, and still keep exactly what the policy keeps', async () => {
    const directory = await mkdtemp(join(tmpdir(), 'backup-worker-retention-interval-'));
    directories.push(directory);
    const store = new CountingStore(new MemoryStore());
    const engine = await FramedTestEngine.create(directory);
    const clock = new FakeClock();
    const worker = new BackupWorker({
      store,
      prefix: 'p',
      source: new FramedDirSource({ directory, engine }),
      clock,
      manifestIntervalMs: 1_000,
      retain: 2,
      compactionLevels: [],
    });
    const manifestLists = () => store.listPrefixes.filter((p) => p === 'p/manifest/').length;
    const passes: number[] = [];
    for (let step = 0; step < 17; step += 1) {
      await engine.commit(1);
      await worker.runOnce();
      passes.push(manifestLists());
      clock.advance(1_000);
    }
    // The first pass at the first restore point, then one every fourth.
    expect(passes).toEqual([1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5]);
    // Right after a pass only the newest two restore points are left.
    expect((await listRestorePoints(store, 'p')).length).toBe(2);
  });
});
