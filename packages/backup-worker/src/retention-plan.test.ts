import {
  archiveKey,
  type FileEntry,
  type Manifest,
  manifestKey,
  segmentKey,
  sideKey,
  snapshotKey,
} from '@x/manifest';
import { describe, expect, it } from 'vitest';
import {
  type ListedManifest,
  planDeletions,
  retiringGenerations,
  selectManifests,
} from './retention-plan.ts';

const P = 'db';
const OURS = 'lineage-a';

function file(name: string, key: string, lineage = OURS): FileEntry {
  return { name, key, size: 1, crc32: '00000000', frames: 0, lineage };
}

/** A restore point of generation `g` at `commitSeq`: snapshot, one archive, one side file, segments. */
function restorePoint(
  g: number,
  commitSeq: number,
  options: { lineage?: string; side?: string; segments?: [number, number][] } = {},
): ListedManifest {
  const lineage = options.lineage ?? OURS;
  const manifest: Manifest = {
    formatVersion: 1,
    lineage,
    createdAt: '2026-01-01T00:00:00.000Z',
    commitSeq,
    oldestCommitSeq: 0,
    walGeneration: g,
    files: [
      file('snapshot.bin', snapshotKey(P, g, 0), lineage),
      file('wal.00000000000000000001.archive', archiveKey(P, g, 1), lineage),
      file('roles.json', sideKey(P, 'roles.json', options.side ?? 'aaaaaaaa', 1), lineage),
    ],
    segments: (options.segments ?? [[0, 10]]).map(([start, end]) => ({
      key: segmentKey(P, g, start, end),
      size: end - start,
      crc32: '00000000',
      frames: 1,
      lineage,
    })),
  };
  return { key: manifestKey(P, commitSeq), manifest };
}

function select(manifests: ListedManifest[], retain: number, latestTarget?: string) {
  return selectManifests({
    manifests,
    lineage: OURS,
    retain,
    justWritten: manifests.at(-1)!.key,
    latestTarget: latestTarget ?? manifests.at(-1)!.key,
  });
}

describe('selectManifests', () => {
  it('keeps the newest `retain` of this lineage and drops the older ones, oldest first', () => {
    const all = [restorePoint(0, 1), restorePoint(0, 2), restorePoint(1, 3), restorePoint(1, 4)];
    const selection = select(all, 2);
    expect(selection.kept.map((m) => m.key)).toEqual([all[2]!.key, all[3]!.key]);
    expect(selection.dropped.map((m) => m.key)).toEqual([all[0]!.key, all[1]!.key]);
    expect(selection.restorePoints).toBe(2);
    expect(selection.doubt).toBe(false);
  });

  it("always keeps LATEST's target, even when it is older than the newest `retain`", () => {
    const all = [restorePoint(0, 1), restorePoint(0, 2), restorePoint(1, 3)];
    const selection = select(all, 1, all[0]!.key);
    expect(selection.kept.map((m) => m.key)).toEqual([all[0]!.key, all[2]!.key]);
    expect(selection.dropped.map((m) => m.key)).toEqual([all[1]!.key]);
  });

  it("neither counts nor drops another lineage's manifests, and protects what they name", () => {
    const foreign = restorePoint(7, 1, { lineage: 'lineage-b' });
    const all = [foreign, restorePoint(0, 2), restorePoint(0, 3)];
    const selection = select(all, 1);
    expect(selection.dropped.map((m) => m.key)).toEqual([all[1]!.key]);
    expect(selection.restorePoints).toBe(1);
    expect(selection.foreign.has(snapshotKey(P, 7, 0))).toBe(true);
  });

  it('keeps the manifest just written when a newer one by key is there and LATEST names another', () => {
    const all = [restorePoint(0, 1), restorePoint(0, 2), restorePoint(0, 3), restorePoint(0, 100)];
    const selection = selectManifests({
      manifests: all,
      lineage: OURS,
      retain: 1,
      justWritten: all[1]!.key,
      latestTarget: all[0]!.key,
    });
    expect(selection.kept.map((m) => m.key)).toEqual([all[0]!.key, all[1]!.key, all[3]!.key]);
    expect(selection.dropped.map((m) => m.key)).toEqual([all[2]!.key]);
  });

  it("keeps LATEST's target when it is neither the newest nor the one just written", () => {
    const all = [restorePoint(0, 1), restorePoint(0, 2), restorePoint(0, 3), restorePoint(0, 100)];
    const selection = selectManifests({
      manifests: all,
      lineage: OURS,
      retain: 1,
      justWritten: all[2]!.key,
      latestTarget: all[1]!.key,
    });
    expect(selection.kept.map((m) => m.key)).toEqual([all[1]!.key, all[2]!.key, all[3]!.key]);
    expect(selection.dropped.map((m) => m.key)).toEqual([all[0]!.key]);
  });

  it('turns doubtful when a manifest does not parse, and still names the surplus to drop', () => {
    const all: ListedManifest[] = [
      restorePoint(0, 1),
      { key: manifestKey(P, 2), manifest: null },
      restorePoint(1, 3),
      restorePoint(2, 4),
    ];
    const selection = select(all, 2);
    expect(selection.doubt).toBe(true);
    expect(selection.dropped.map((m) => m.key)).toEqual([all[0]!.key]);
    expect(selection.kept.map((m) => m.key)).toEqual([all[2]!.key, all[3]!.key]);
  });

  it('turns doubtful when a manifest does not parse, and drops nothing when under the limit', () => {
    const all: ListedManifest[] = [{ key: manifestKey(P, 1), manifest: null }, restorePoint(0, 2)];
    const selection = select(all, 5);
    expect(selection.doubt).toBe(true);
    expect(selection.dropped).toEqual([]);
    expect(selection.restorePoints).toBe(1);
  });
});

describe('retiringGenerations', () => {
  it('retires owned generations older than every kept one, except the current and the retired', () => {
    const all = [restorePoint(0, 1), restorePoint(1, 2), restorePoint(2, 3), restorePoint(4, 4)];
    const selection = select(all, 1);
    const plan = retiringGenerations({
      selection,
      allocated: new Set([3, 5]),
      current: 5,
      retired: new Set([1]),
    });
    expect([...plan.owned].sort()).toEqual([0, 1, 2, 3, 4, 5]);
    expect(plan.retiring).toEqual([0, 2, 3]);
    expect(plan.referenced.has(snapshotKey(P, 4, 0))).toBe(true);
    expect(plan.referenced.has(snapshotKey(P, 2, 0))).toBe(false);
  });
});

describe('planDeletions', () => {
  it('deletes what only dropped restore points name, never what a kept or foreign one names', () => {
    const foreign = restorePoint(9, 1, { lineage: 'lineage-b', side: 'cccccccc' });
    const old = restorePoint(0, 2, { side: 'bbbbbbbb', segments: [[0, 10]] });
    const kept = restorePoint(1, 3, { segments: [[0, 10]] });
    const selection = select([foreign, old, kept], 1);
    const generations = retiringGenerations({
      selection,
      allocated: new Set(),
      current: 1,
      retired: new Set(),
    });
    const doomed = planDeletions({
      prefix: P,
      selection,
      generations,
      baseObjects: [
        snapshotKey(P, 0, 0),
        snapshotKey(P, 1, 0),
        snapshotKey(P, 9, 0), // another lineage's generation: not owned
        archiveKey(P, 0, 1),
        archiveKey(P, 1, 1),
      ],
      ownSideNames: new Set(['roles.json']),
      segmentObjects: new Map([[0, [segmentKey(P, 0, 0, 10), segmentKey(P, 0, 10, 20)]]]),
    });
    expect(doomed).toEqual([
      snapshotKey(P, 0, 0),
      archiveKey(P, 0, 1),
      sideKey(P, 'roles.json', 'bbbbbbbb', 1),
      segmentKey(P, 0, 0, 10),
      segmentKey(P, 0, 10, 20),
    ]);
  });

  it('keeps a side file a kept restore point still names, and names the source does not write', () => {
    const old = restorePoint(0, 1, { side: 'aaaaaaaa' });
    old.manifest!.files.push(file('custom.bin', sideKey(P, 'custom.bin', 'dddddddd', 1)));
    const kept = restorePoint(0, 2, { side: 'aaaaaaaa' });
    const selection = select([old, kept], 1);
    const generations = retiringGenerations({
      selection,
      allocated: new Set(),
      current: 0,
      retired: new Set(),
    });
    const doomed = planDeletions({
      prefix: P,
      selection,
      generations,
      baseObjects: [],
      ownSideNames: new Set(['roles.json']),
      segmentObjects: new Map(),
    });
    expect(doomed).toEqual([]);
  });

  it('never deletes an object a foreign manifest names, even in an owned generation', () => {
    const old = restorePoint(0, 1);
    const kept = restorePoint(1, 2);
    const foreign = restorePoint(0, 3, { lineage: 'lineage-b' });
    const selection = select([old, kept, foreign], 1, kept.key);
    const generations = retiringGenerations({
      selection,
      allocated: new Set(),
      current: 1,
      retired: new Set(),
    });
    const doomed = planDeletions({
      prefix: P,
      selection,
      generations,
      baseObjects: [snapshotKey(P, 0, 0), archiveKey(P, 0, 1)],
      ownSideNames: new Set(),
      segmentObjects: new Map([[0, [segmentKey(P, 0, 0, 10)]]]),
    });
    expect(doomed).toEqual([]);
  });
});
