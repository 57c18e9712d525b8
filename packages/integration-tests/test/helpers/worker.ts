/**
 * The worker most tests drive by hand: prefix `p`, a fake clock (nothing
 * runs on its own), a restore point at every step unless `options` say
 * otherwise.
 */

import { BackupWorker, type BackupWorkerOptions } from '@x/backup-worker';
import type { BackupSource } from '@x/engine';
import { FakeClock } from '@x/lease';
import type { ObjectStore } from '@x/store';

export function manualWorker(
  store: ObjectStore,
  source: BackupSource,
  options: Partial<BackupWorkerOptions> = {},
): BackupWorker {
  return new BackupWorker({
    store,
    prefix: 'p',
    source,
    clock: new FakeClock(),
    manifestIntervalMs: 0,
    ...options,
  });
}
