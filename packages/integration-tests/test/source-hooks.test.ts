/** The source's `afterStep` hook: called after every step, with what the bucket holds. */

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BackupWorker } from '@x/backup-worker';
import type { ShippedProgress } from '@x/engine';
import { FakeClock } from '@x/lease';
import { FramedDirSource } from '@x/source-framed';
import { MemoryStore, StoreError } from '@x/store';
import { describe, expect, it } from 'vitest';
import { FramedTestEngine } from './helpers/framed-engine.ts';

class HookedSource extends FramedDirSource {
  calls: (ShippedProgress | null)[] = [];
  failNext = false;
  async afterStep(shipped: ShippedProgress | null): Promise<void> {
    this.calls.push(shipped);
    if (this.failNext) {
      this.failNext = false;
      throw new StoreError('checkpoint failed');
    }
  }
}

describe('afterStep', () => {
  it('reports shipped and restore-point lengths after every step, and fails the step when it throws', async () => {
    const directory = await mkdtemp(join(tmpdir(), 'backup-worker-hooks-'));
    try {
      const engine = await FramedTestEngine.create(directory);
      await engine.commit(3);
      const source = new HookedSource({ directory, engine });
      const worker = new BackupWorker({
        store: new MemoryStore(),
        prefix: 'p',
        source,
        clock: new FakeClock(),
        manifestIntervalMs: 60_000,
      });
      await worker.runOnce();
      const position = await engine.durablePosition();
      expect(source.calls).toEqual([
        {
          engineGeneration: '0',
          snapshot: null,
          wal: position.wal,
          shippedLength: position.durableLength,
          inRestorePoint: position.durableLength,
          walGeneration: 0,
        },
      ]);
      // Shipped but the manifest is not due yet: inRestorePoint stays behind.
      await engine.commit(2);
      await worker.runOnce();
      const later = await engine.durablePosition();
      expect(source.calls[1]).toMatchObject({
        shippedLength: later.durableLength,
        inRestorePoint: position.durableLength,
      });
      source.failNext = true;
      expect(await worker.step()).toBe(1_000);
      expect(worker.health().errorCount).toBe(1);
    } finally {
      await rm(directory, { recursive: true, force: true });
    }
  });
});
