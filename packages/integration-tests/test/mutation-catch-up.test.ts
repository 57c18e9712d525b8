/**
 * The worker asks the source to catch up when the files on disk are ahead of
 * the engine's position (another process committed or snapshotted), and
 * ships what the caught-up position names in the same step. Without the
 * catch-up the engine's stale position would be all it ever shipped: the
 * WAL only up to the old length, and no restore point of a snapshot taken
 * elsewhere.
 */

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { DurablePosition } from '@x/engine';
import { latestKey, parseLatest, parseManifest } from '@x/manifest';
import { FramedDirSource, type FramedEngineHandle } from '@x/source-framed';
import { MemoryStore } from '@x/store';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { checkBucket } from './helpers/check-bucket.ts';
import { FramedTestEngine } from './helpers/framed-engine.ts';
import { manualWorker } from './helpers/worker.ts';

/**
 * An engine handle whose view of the store is the one it last read: what
 * another process wrote since is invisible to it until `catchUp()`.
 */
class LaggingEngine implements FramedEngineHandle {
  readonly #engine: FramedTestEngine;
  #view: DurablePosition | null = null;
  catchUps = 0;

  constructor(engine: FramedTestEngine) {
    this.#engine = engine;
  }

  async durablePosition(): Promise<DurablePosition> {
    this.#view ??= await this.#engine.durablePosition();
    return this.#view;
  }

  async catchUp(): Promise<void> {
    this.catchUps += 1;
    this.#view = await this.#engine.durablePosition();
  }
}

describe('catching up with the files on disk', () => {
  let directory: string;
  let engine: FramedTestEngine;
  let lagging: LaggingEngine;
  let store: MemoryStore;

  beforeEach(async () => {
    directory = await mkdtemp(join(tmpdir(), 'backup-worker-catch-up-'));
    engine = await FramedTestEngine.create(directory);
    await engine.commit(3);
    lagging = new LaggingEngine(engine);
    store = new MemoryStore();
  });
  afterEach(() => rm(directory, { recursive: true, force: true }));

  async function latest() {
    const check = await checkBucket(store, 'p', { content: true });
    const object = (await store.get(latestKey('p')))!;
    const key = parseLatest(object.body, { prefix: 'p' });
    expect(check.latest).toBe(key);
    return parseManifest((await store.get(key))!.body, { prefix: 'p' });
  }

  it('catches up when the WAL on disk is longer than the engine knows, and ships it in the same step', async () => {
    const worker = manualWorker(store, new FramedDirSource({ directory, engine: lagging }));
    await worker.runOnce();
    expect((await latest()).commitSeq).toBe(3);
    const catchUpsBefore = lagging.catchUps;

    // Another process commits: the files grow, this engine's view does not.
    await engine.commit(2);
    await worker.runOnce();
    expect((await latest()).commitSeq).toBe(5);
    expect(lagging.catchUps).toBeGreaterThan(catchUpsBefore);
    expect(worker.health().unshippedBytes).toBe(0);
  });

  it('catches up when another process took a snapshot, and writes the new generation in the same step', async () => {
    const worker = manualWorker(store, new FramedDirSource({ directory, engine: lagging }));
    await worker.runOnce();
    const first = await latest();
    expect(first.commitSeq).toBe(3);

    await engine.snapshot();
    await engine.commit(1);
    await worker.runOnce();
    const second = await latest();
    expect(second.walGeneration).toBeGreaterThan(first.walGeneration);
    expect(second.commitSeq).toBe(4);
    expect(worker.health().reason).toBeNull();
  });
});
