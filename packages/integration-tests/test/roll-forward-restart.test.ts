/**
 * A restarted worker makes everything it can see restorable at once: after
 * an abandoned worker (a SIGKILL, no final restore point) and more commits
 * no one shipped, the first step of a new worker — with a restore-point
 * interval far longer than the test — writes a restore point that holds
 * every durable commit, and LATEST names it. On the local stores.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BackupWorker } from '@x/backup-worker';
import { FakeClock } from '@x/lease';
import { latestKey, parseLatest, parseManifest } from '@x/manifest';
import { FramedDirSource, restoreFramedStore } from '@x/source-framed';
import type { ObjectStore } from '@x/store';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FramedTestEngine } from './helpers/framed-engine.ts';
import { localStoreCases } from './helpers/stores.ts';

function worker(store: ObjectStore, prefix: string, engine: FramedTestEngine): BackupWorker {
  return new BackupWorker({
    store,
    prefix,
    source: new FramedDirSource({ directory: engine.directory, engine }),
    clock: new FakeClock(),
    manifestIntervalMs: 3_600_000,
    retain: 100,
  });
}

async function latestCommitSeq(store: ObjectStore, prefix: string): Promise<number> {
  const key = parseLatest((await store.get(latestKey(prefix)))!.body, { prefix });
  return parseManifest((await store.get(key))!.body, { prefix }).commitSeq;
}

for (const storeCase of localStoreCases()) {
  describe(`a restarted worker writes a restore point at once (${storeCase.name})`, () => {
    let work: string;
    let store: ObjectStore;
    let prefix: string;
    let close: () => Promise<void>;
    beforeEach(async () => {
      work = await mkdtemp(join(tmpdir(), 'roll-forward-restart-'));
      ({ store, prefix, close } = await storeCase.open());
    });
    afterEach(async () => {
      await close();
      await rm(work, { recursive: true, force: true });
    });

    it('its first step names every durable commit, without waiting for the interval', async () => {
      const engine = await FramedTestEngine.create(join(work, 'source'));
      const first = worker(store, prefix, engine);
      await engine.commit(2);
      await first.runOnce();
      const named = await latestCommitSeq(store, prefix);
      for (let ship = 0; ship < 3; ship += 1) {
        await engine.commit(2);
        await first.runOnce();
      }
      // Shipped, in no restore point; then commits nobody shipped (the writer died with the host).
      expect(await latestCommitSeq(store, prefix)).toBe(named);
      await engine.commit(5);
      // `first` is abandoned: no shutdown, no final restore point.
      const second = worker(store, prefix, engine);
      await second.runOnce();
      expect(await latestCommitSeq(store, prefix)).toBe(engine.durableCommits);
      const restored = await restoreFramedStore(store, prefix, join(work, 'restored'), {
        target: {
          kind: 'restore-point',
          manifestKey: parseLatest((await store.get(latestKey(prefix)))!.body, { prefix }),
        },
      });
      expect(restored.commitSeq).toBe(engine.durableCommits);
    });
  });
}
