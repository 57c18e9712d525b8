/**
 * Round trip with the real worker: a framed store backed up by
 * `BackupWorker` through two generations restores, at every commit any
 * restore point covers, to exactly the store's state at that commit.
 *
 * The test engine's content is deterministic (commit `c` is the frame
 * `commit-{c}`, a snapshot taken at `c` commits holds `snapshot-at-{c}`), so
 * "the source at commit N" is known without keeping copies.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BackupWorker } from '@x/backup-worker';
import { FakeClock } from '@x/lease';
import { listRestorePoints, verify } from '@x/restore';
import { FramedDirSource, restoreFramedStore } from '@x/source-framed';
import { MemoryStore } from '@x/store';
import { completeFrames, FRAME_HEADER_BYTES } from '@x/wal-segment';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FramedTestEngine } from '../helpers/framed-engine.ts';
import { readFiles } from './fixture.ts';

const PREFIX = 'backups/roundtrip';

function framePayloads(bytes: Uint8Array): string[] {
  const payloads: string[] = [];
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let offset = 0;
  expect(completeFrames(bytes).length).toBe(bytes.byteLength);
  while (offset < bytes.byteLength) {
    const length = view.getUint32(offset, true);
    const payload = bytes.subarray(
      offset + FRAME_HEADER_BYTES,
      offset + FRAME_HEADER_BYTES + length,
    );
    payloads.push(new TextDecoder().decode(payload).replace(/\0+$/, ''));
    offset += FRAME_HEADER_BYTES + length;
  }
  return payloads;
}

describe('restore of what BackupWorker backed up', () => {
  let work: string;
  beforeEach(async () => {
    work = await mkdtemp(join(tmpdir(), 'restore-roundtrip-'));
  });
  afterEach(async () => {
    await rm(work, { recursive: true, force: true });
  });

  it('every covered commit restores to the source at that commit', async () => {
    const store = new MemoryStore();
    const engine = await FramedTestEngine.create(join(work, 'source'));
    const worker = new BackupWorker({
      store,
      prefix: PREFIX,
      source: new FramedDirSource({ directory: engine.directory, engine }),
      clock: new FakeClock(),
      manifestIntervalMs: 0,
      retain: 100,
    });
    await engine.commit(3);
    await worker.runOnce();
    await engine.commit(2);
    await worker.runOnce();
    await engine.snapshot();
    await engine.commit(4);
    await worker.runOnce();
    await engine.commit(1);
    await worker.runOnce();

    const report = await verify(store, PREFIX, { deep: true });
    expect(report.ok, JSON.stringify(report.manifests)).toBe(true);
    const points = await listRestorePoints(store, PREFIX);
    expect(points.at(-1)!.commitSeq).toBe(engine.durableCommits);
    expect(points.at(-1)!.latest).toBe(true);

    const lineage = (await readFile(engine.path('backup.lineage'), 'utf8')).trim();
    const commits = new Set<number>();
    for (const point of points) {
      for (let commit = point.restorableFrom!; commit <= point.commitSeq; commit += 1)
        commits.add(commit);
    }
    expect([...commits].sort((a, b) => a - b)).toEqual(
      Array.from({ length: engine.durableCommits + 1 }, (_, index) => index),
    );
    for (const commitSeq of commits) {
      const target = join(work, `restored-${commitSeq}`);
      const result = await restoreFramedStore(store, PREFIX, target, {
        target: { kind: 'commit', commitSeq },
      });
      const point = points.find((entry) => entry.manifestKey === result.manifestKey)!;
      const base = point.restorableFrom!;
      const files = await readFiles(target);
      expect(framePayloads(files.get('wal.bin')!)).toEqual(
        Array.from({ length: commitSeq - base }, (_, index) => `commit-${base + index + 1}`),
      );
      if (base > 0) {
        expect(new TextDecoder().decode(files.get('snapshot.bin'))).toBe(`snapshot-at-${base}`);
        // The archive of generation 0 is the source's, byte for byte.
        expect(
          Buffer.from(files.get('wal.1.archive')!).equals(
            await readFile(engine.path('wal.1.archive')),
          ),
        ).toBe(true);
      } else {
        expect(files.has('snapshot.bin')).toBe(false);
      }
      for (const name of ['roles.json', 'keys.json', 'wal.genesis']) {
        expect(Buffer.from(files.get(name)!).equals(await readFile(engine.path(name))), name).toBe(
          true,
        );
      }
      expect(files.has('backup.lineage')).toBe(false);
      expect(JSON.parse(new TextDecoder().decode(files.get('backup.parent')))).toEqual({
        lineage,
        manifestKey: result.manifestKey,
        commitSeq,
      });
    }
  });
});
