/**
 * A worker that never held the lease says nothing about releasing it at
 * shutdown; one that held it says it released it.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type BackupHandle, type BackupLogger, BackupWorker } from '@x/backup-worker';
import { FakeClock } from '@x/lease';
import { FramedDirSource } from '@x/source-framed';
import { MemoryStore } from '@x/store';
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from './helpers/drive.ts';
import { FramedTestEngine } from './helpers/framed-engine.ts';

function recordingLogger(): { logger: BackupLogger; events: string[] } {
  const events: string[] = [];
  const record = (event: string) => void events.push(event);
  return { logger: { debug: record, info: record, warn: record, error: record }, events };
}

describe('lease release at shutdown', () => {
  let directory: string;
  afterEach(async () => {
    await rm(directory, { recursive: true, force: true });
  });

  it('is logged by the holder and not by an instance that never held the lease', async () => {
    directory = await mkdtemp(join(tmpdir(), 'lease-release-logs-'));
    const engine = await FramedTestEngine.create(directory);
    await engine.commit(2);
    const clock = new FakeClock();
    const store = new MemoryStore();
    const start = (logger: BackupLogger): BackupHandle =>
      new BackupWorker({
        store,
        prefix: 'p',
        source: new FramedDirSource({ directory, engine }),
        clock,
        logger,
        leaseTtlSeconds: 6,
        manifestIntervalMs: 0,
        shutdownGraceMs: 2_000,
      }).start();
    const holder = recordingLogger();
    const standby = recordingLogger();
    const a = start(holder.logger);
    await waitFor(clock, () => a.health().latestRestorePoint !== null, { what: 'A to back up' });
    const b = start(standby.logger);
    await waitFor(clock, () => standby.events.includes('backup.lease_held_elsewhere'), {
      what: 'B to see the holder',
    });
    for (const handle of [b, a]) {
      let stopped = false;
      void handle.shutdown().then(() => {
        stopped = true;
      });
      await waitFor(clock, () => stopped, { stepMs: 500, what: 'shutdown' });
    }
    expect(standby.events.filter((event) => event.startsWith('backup.lease_release'))).toEqual([]);
    expect(holder.events).toContain('backup.lease_released');
  });
});
