/**
 * `verify` and `listRestorePoints` name a restore point written by a lease
 * tenure after a later tenure had written one below it (manifest version 3's
 * `leaseGeneration`), and find nothing in a history whose generations grow.
 */
import {
  crc32Hex,
  latestKey,
  type Manifest,
  manifestKey,
  segmentKey,
  serializeLatest,
  serializeManifest,
  snapshotKey,
} from '@x/manifest';
import { MemoryStore } from '@x/store';
import { describe, expect, it } from 'vitest';
import { listRestorePoints } from './list-restore-points.ts';
import { verify } from './verify.ts';

const PREFIX = 'db';
const LINEAGE = 'lineage-a';

/** A restore point of one snapshot and one segment of `commits` bytes, written by lease `leaseGeneration`. */
async function putRestorePoint(
  store: MemoryStore,
  commits: number,
  leaseGeneration: number | null,
): Promise<string> {
  const snapshot = new Uint8Array([1, 2, 3]);
  const snapshotObject = snapshotKey(PREFIX, 0, 0);
  await store.put(snapshotObject, snapshot);
  const bytes = new Uint8Array(commits).fill(7);
  const segment = segmentKey(PREFIX, 0, 0, commits);
  await store.put(segment, bytes);
  const manifest: Manifest = {
    formatVersion: 3,
    lineage: LINEAGE,
    createdAt: '2026-12-06T00:00:00Z',
    commitSeq: commits,
    oldestCommitSeq: 0,
    walGeneration: 0,
    leaseGeneration,
    snapshotTime: null,
    commitTime: null,
    files: [
      {
        name: 'fake.snapshot',
        key: snapshotObject,
        size: snapshot.byteLength,
        crc32: crc32Hex(snapshot),
        frames: 0,
        lineage: LINEAGE,
      },
    ],
    segments: [
      { key: segment, size: commits, crc32: crc32Hex(bytes), frames: commits, lineage: LINEAGE },
    ],
  };
  const key = manifestKey(PREFIX, commits);
  await store.put(key, new TextEncoder().encode(serializeManifest(manifest, { prefix: PREFIX })));
  await store.put(
    latestKey(PREFIX),
    new TextEncoder().encode(serializeLatest(key, leaseGeneration)),
  );
  return key;
}

describe('restore points of a superseded lease tenure', () => {
  it('are a verify problem and an ls mark, naming both generations', async () => {
    const store = new MemoryStore();
    await putRestorePoint(store, 1, 4);
    const successor = await putRestorePoint(store, 2, 5);
    const stale = await putRestorePoint(store, 3, 4);

    const report = await verify(store, PREFIX);
    expect(report.ok).toBe(false);
    const flagged = report.manifests.filter((m) => m.status === 'problems');
    expect(flagged.map((m) => m.key)).toEqual([stale]);
    expect(flagged[0]!.leaseGeneration).toBe(4);
    expect(flagged[0]!.problems).toEqual([
      {
        kind: 'superseded-tenure',
        message: `written by lease generation 4 after generation 5 had written ${successor}: two writers wrote this prefix, and its history forks here`,
      },
    ]);

    const points = await listRestorePoints(store, PREFIX, { deep: true });
    const marked = points.filter((point) => point.superseded !== undefined);
    expect(marked.map((point) => point.manifestKey)).toEqual([stale]);
    expect(marked[0]).toMatchObject({
      status: 'ok',
      leaseGeneration: 4,
      superseded: { leaseGeneration: 4, successorGeneration: 5, successorKey: successor },
    });
  });

  it('are none in a history whose generations grow, or that records none', async () => {
    const store = new MemoryStore();
    await putRestorePoint(store, 1, null);
    await putRestorePoint(store, 2, 5);
    await putRestorePoint(store, 3, 5);
    await putRestorePoint(store, 4, 6);
    expect((await verify(store, PREFIX)).ok).toBe(true);
    expect((await listRestorePoints(store, PREFIX)).some((p) => p.superseded)).toBe(false);
  });
});
