import { appendFile, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BackupWorker, unchangedBetween } from '@x/backup-worker';
import type { BackupSource, OpenedRestorePoint } from '@x/engine';
import { FakeClock } from '@x/lease';
import { FramedDirSource } from '@x/source-framed';
import { MemoryStore } from '@x/store';
import { encodeFrame } from '@x/wal-segment';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { checkBucket } from './helpers/check-bucket.ts';
import { FramedTestEngine, floorBytes } from './helpers/framed-engine.ts';
import { CountingStore } from './helpers/stores.ts';
import { manualWorker } from './helpers/worker.ts';

describe('FramedDirSource', () => {
  let directory: string;
  let engine: FramedTestEngine;

  beforeEach(async () => {
    directory = await mkdtemp(join(tmpdir(), 'framed-dir-source-'));
    engine = await FramedTestEngine.create(directory);
  });
  afterEach(() => rm(directory, { recursive: true, force: true }));

  it('observes identities: a growing WAL keeps its identity, a replaced snapshot or WAL gets a new one', async () => {
    const source = new FramedDirSource({ directory });
    const first = await source.observe();
    await engine.commit(2);
    const grown = await source.observe();
    expect(grown.wal).toBe(first.wal);
    expect(grown.walLength).toBeGreaterThan(first.walLength);
    expect(unchangedBetween(first, grown)).toBe(true);
    await engine.snapshot();
    const replaced = await source.observe();
    expect(replaced.wal).not.toBe(grown.wal);
    expect(replaced.snapshot).not.toBe(grown.snapshot);
    expect(unchangedBetween(grown, replaced)).toBe(false);
    await writeFile(engine.path('snapshot.intent'), 'x');
    expect((await source.observe()).intentPending).toBe(true);
  });

  it('out of process: the durable position is the complete frames on disk, commits = floor + archives + WAL', async () => {
    await engine.commit(3);
    await engine.snapshot();
    await engine.commit(2);
    await writeFile(engine.path('wal.floor'), floorBytes(10));
    // A torn frame at the end is not durable.
    const torn = encodeFrame(new TextEncoder().encode('torn')).subarray(0, 9);
    await appendFile(engine.path('wal.bin'), torn);
    const source = new FramedDirSource({ directory });
    const position = await source.durablePosition();
    const observed = await source.observe();
    expect(position.commitCount).toBe(10 + 3 + 2);
    expect(position.durableLength).toBe(observed.walLength - torn.byteLength);
    expect(position.wal).toBe(observed.wal);
    expect(position.snapshot).toBe(observed.snapshot);
    expect(position.snapshotInProgress).toBe(false);
  });

  it('reads WAL ranges of complete frames, capped, but at least one frame', async () => {
    await engine.commit(4, { payloadBytes: 100 });
    const source = new FramedDirSource({ directory });
    const length = (await source.observe()).walLength;
    const whole = await source.readWalRange(0, length);
    expect(whole).toMatchObject({ start: 0, end: length, frames: 4 });
    const capped = await source.readWalRange(0, length, { maxBytes: 250 });
    expect(capped).toMatchObject({ start: 0, end: 216, frames: 2 });
    const tiny = await source.readWalRange(216, length, { maxBytes: 10 });
    expect(tiny).toMatchObject({ start: 216, end: 324, frames: 1 });
    expect(await source.readWalRange(length, length)).toBeNull();
  });

  it('backs up out of process (no engine handle), deferring while the intent is pending', async () => {
    await engine.commit(3);
    await engine.snapshot();
    await engine.commit(2);
    const store = new CountingStore(new MemoryStore());
    const worker = new BackupWorker({
      store,
      prefix: 'p',
      source: new FramedDirSource({ directory }),
      clock: new FakeClock(),
      manifestIntervalMs: 0,
    });
    await writeFile(engine.path('snapshot.intent'), 'x');
    await worker.step();
    expect(store.writes).toEqual([]);
    await writeFile(engine.path('snapshot.intent'), '');
    await worker.runOnce();
    let check = await checkBucket(store, 'p', { content: true });
    expect(check.manifests.get(check.latest!)!.commitSeq).toBe(5);
    await engine.commit(1, { durable: false });
    await worker.runOnce();
    check = await checkBucket(store, 'p', { content: true });
    expect(check.manifests.get(check.latest!)!.commitSeq).toBe(6);
  });

  it('keeps a restore point only when the files held still while it was read', async () => {
    await engine.commit(3);
    await engine.snapshot();
    const inner = new FramedDirSource({ directory, engine });
    let interfere = true;
    // A source whose files change (another snapshot) between the open and the
    // second observation.
    const source: BackupSource = {
      description: inner.description,
      sideFileNames: inner.sideFileNames,
      durablePosition: () => inner.durablePosition(),
      observe: () => inner.observe(),
      catchUp: () => inner.catchUp(),
      readWalRange: (start, end, options) => inner.readWalRange(start, end, options),
      frameCounter: () => inner.frameCounter(),
      readSideFile: (name, known) => inner.readSideFile(name, known),
      readLineage: () => inner.readLineage(),
      createLineage: (lineage) => inner.createLineage(lineage),
      readParent: () => inner.readParent(),
      openRestorePoint: async (): Promise<OpenedRestorePoint> => {
        const opened = await inner.openRestorePoint();
        if (interfere) {
          interfere = false;
          await engine.commit(1);
          await engine.snapshot();
        }
        return opened;
      },
    };
    const store = new CountingStore(new MemoryStore());
    const worker = manualWorker(store, source);
    await worker.step();
    // Deferred: nothing but the resume's reads; not a failure.
    expect(store.writes).toEqual([]);
    expect(worker.health()).toMatchObject({ healthy: true, errorCount: 0 });
    await worker.runOnce();
    const check = await checkBucket(store, 'p', { content: true });
    expect(check.manifests.get(check.latest!)!.commitSeq).toBe(4);
  });
});
