/**
 * A worker that never held the lease says nothing about releasing it at
 * shutdown; one that held it says it released it.
 */
import type { BackupHandle, BackupLogger } from '@x/backup-worker';
import { MemoryStore } from '@x/store';
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from './helpers/drive.ts';
import { StartedWorkers } from './helpers/started-workers.ts';

function recordingLogger(): { logger: BackupLogger; events: string[] } {
  const events: string[] = [];
  const record = (event: string) => void events.push(event);
  return { logger: { debug: record, info: record, warn: record, error: record }, events };
}

describe('lease release at shutdown', () => {
  let workers: StartedWorkers;
  afterEach(() => workers.dispose());

  it('is logged by the holder and not by an instance that never held the lease', async () => {
    workers = await StartedWorkers.create('lease-release-logs-', { commits: 2 });
    const { clock } = workers;
    const store = new MemoryStore();
    const start = (logger: BackupLogger): BackupHandle =>
      workers.start(store, { prefix: 'p', logger, leaseTtlSeconds: 6, shutdownGraceMs: 2_000 })
        .handle;
    const holder = recordingLogger();
    const standby = recordingLogger();
    const a = start(holder.logger);
    await waitFor(clock, () => a.health().latestRestorePoint !== null, { what: 'A to back up' });
    const b = start(standby.logger);
    await waitFor(clock, () => standby.events.includes('backup.lease_held_elsewhere'), {
      what: 'B to see the holder',
    });
    // B first: were A released first, B could take the lease and release it too.
    for (const handle of [b, a]) await workers.stop(handle, { stepMs: 500 });
    expect(standby.events.filter((event) => event.startsWith('backup.lease_release'))).toEqual([]);
    expect(holder.events).toContain('backup.lease_released');
  });
});
