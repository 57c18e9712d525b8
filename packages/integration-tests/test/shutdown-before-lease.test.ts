/**
 * A stop that comes before the worker ever held the lease (an application
 * that created its database and exited at once, on a first boot) still makes
 * what was captured restorable when the lease is free; a standby kept out by
 * another holder uploads nothing.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type BackupHandle, BackupWorker, type ShutdownReport } from '@x/backup-worker';
import { FakeClock } from '@x/lease';
import { latestKey } from '@x/manifest';
import { FramedDirSource } from '@x/source-framed';
import { MemoryStore } from '@x/store';
import { afterEach, describe, expect, it } from 'vitest';
import { checkBucket } from './helpers/check-bucket.ts';
import { waitFor } from './helpers/drive.ts';
import { FramedTestEngine } from './helpers/framed-engine.ts';
import { CountingStore } from './helpers/stores.ts';

describe('a stop before the first lease', () => {
  let directory: string;
  afterEach(async () => {
    await rm(directory, { recursive: true, force: true });
  });

  async function setUp() {
    directory = await mkdtemp(join(tmpdir(), 'shutdown-before-lease-'));
    const engine = await FramedTestEngine.create(directory);
    await engine.commit(4);
    const clock = new FakeClock();
    const start = (store: CountingStore): BackupHandle =>
      new BackupWorker({
        store,
        prefix: 'p',
        source: new FramedDirSource({ directory, engine }),
        clock,
        leaseTtlSeconds: 6,
        manifestIntervalMs: 0,
        shutdownGraceMs: 5_000,
      }).start();
    const stop = async (handle: BackupHandle): Promise<ShutdownReport> => {
      let report: ShutdownReport | undefined;
      void handle.shutdown().then((r) => {
        report = r;
      });
      await waitFor(clock, () => report !== undefined, { stepMs: 100, what: 'shutdown' });
      return report!;
    };
    return { engine, clock, start, stop };
  }

  it('takes the free lease and writes a restore point of everything captured', async () => {
    const { engine, start, stop } = await setUp();
    const bucket = new MemoryStore();
    // Stopped at once: the run loop never got to take the lease.
    const report = await stop(start(new CountingStore(bucket)));
    expect(await bucket.get(latestKey('p'))).not.toBeNull();
    const check = await checkBucket(bucket, 'p', { content: true });
    expect(check.manifests.get(check.latest!)!.commitSeq).toBe(engine.durableCommits);
    expect(report).toMatchObject({ complete: true, unrestorableCommits: 0 });
  });

  it('uploads nothing as a standby while another instance holds the lease', async () => {
    const { clock, start, stop } = await setUp();
    const bucket = new MemoryStore();
    const holder = start(new CountingStore(bucket));
    await waitFor(clock, () => holder.health().latestRestorePoint !== null, { what: 'holder' });
    const standbyStore = new CountingStore(bucket);
    await stop(start(standbyStore));
    expect(standbyStore.writes.filter((write) => !write.endsWith('/LEASE'))).toEqual([]);
    await stop(holder);
  });
});
