/**
 * The time search across generations (restore-point-at-time.ts), on a bucket
 * built by hand: two generations of SQLite restore points, each a snapshot
 * and commit records with known times. The answer is the newest state at or
 * before the time, including a generation's snapshot state when the time
 * falls after the snapshot and before its first commit.
 */
import {
  type Manifest,
  manifestKey,
  segmentKey,
  serializeManifest,
  snapshotKey,
} from '@x/manifest';
import { MemoryStore } from '@x/store';
import { describe, expect, it } from 'vitest';
import { encodeCommitFrame } from '../src/commit-record.ts';
import { sqliteCommitAtTime } from '../src/restore-point-at-time.ts';

const PREFIX = 'db/time';
const LINEAGE = 'time-lineage';
const PAGE = 512;

function records(times: readonly number[]): Uint8Array {
  const frames = times.map((commitTime, index) =>
    encodeCommitFrame({
      pageSize: PAGE,
      databasePages: 1,
      commitTime,
      walSalt1: 0,
      walSalt2: 0,
      commitFrame: index,
      pages: new Map([[1, new Uint8Array(PAGE).fill(index + 1)]]),
    }),
  );
  return new Uint8Array(Buffer.concat(frames));
}

/** A generation: its snapshot (holding `base` commits, taken at `snapshotTime`) and records at `times`. */
async function generation(
  store: MemoryStore,
  number: number,
  base: number,
  snapshotTime: number,
  times: readonly number[],
  version: 1 | 2,
): Promise<void> {
  const log = records(times);
  const segment = segmentKey(PREFIX, number, 0, log.byteLength);
  await store.put(segment, log, { mode: 'overwrite' });
  const iso = (ms: number) => new Date(ms).toISOString();
  const manifest: Manifest = {
    formatVersion: version,
    lineage: LINEAGE,
    createdAt: iso(times.at(-1) ?? snapshotTime),
    commitSeq: base + times.length,
    oldestCommitSeq: 0,
    walGeneration: number,
    ...(version === 2
      ? { snapshotTime: iso(snapshotTime), commitTime: iso(times.at(-1) ?? snapshotTime) }
      : {}),
    files: [
      {
        name: 'sqlite.snapshot',
        key: snapshotKey(PREFIX, number, base),
        size: PAGE,
        crc32: '00000000',
        frames: base,
        lineage: LINEAGE,
      },
    ],
    segments: [
      {
        key: segment,
        size: log.byteLength,
        crc32: '00000000',
        frames: times.length,
        lineage: LINEAGE,
      },
    ],
  };
  await store.put(
    manifestKey(PREFIX, manifest.commitSeq),
    new TextEncoder().encode(serializeManifest(manifest, { prefix: PREFIX })),
    { mode: 'overwrite' },
  );
}

async function bucket(version: 1 | 2): Promise<MemoryStore> {
  const store = new MemoryStore();
  // Generation 0: snapshot at t=1000 holding 10 commits, then commits at 1100, 1200, 1300.
  await generation(store, 0, 10, 1_000, [1_100, 1_200, 1_300], version);
  // A restart: generation 1's snapshot at t=2000 (commit 14: 13 + 1 for the break), then 2100, 2200.
  await generation(store, 1, 14, 2_000, [2_100, 2_200], version);
  return store;
}

describe('restore by time across generations', () => {
  it('answers with the newest state at or before the time, snapshot states included', async () => {
    const store = await bucket(2);
    const at = async (time: number) => {
      const found = await sqliteCommitAtTime(store, PREFIX, time);
      return found === null ? null : { commitSeq: found.commitSeq, commitTime: found.commitTime };
    };
    expect(await at(999)).toBeNull();
    expect(await at(1_000)).toEqual({ commitSeq: 10, commitTime: 1_000 });
    expect(await at(1_250)).toEqual({ commitSeq: 12, commitTime: 1_200 });
    expect(await at(1_999)).toEqual({ commitSeq: 13, commitTime: 1_300 });
    // After the restart's snapshot, before its first commit: the snapshot's
    // state, not the previous generation's last.
    expect(await at(2_000)).toEqual({ commitSeq: 14, commitTime: 2_000 });
    expect(await at(2_050)).toEqual({ commitSeq: 14, commitTime: 2_000 });
    expect(await at(2_150)).toEqual({ commitSeq: 15, commitTime: 2_100 });
    expect(await at(9_999)).toEqual({ commitSeq: 16, commitTime: 2_200 });
    expect((await sqliteCommitAtTime(store, PREFIX, 2_050))?.manifestKey).toBe(
      manifestKey(PREFIX, 16),
    );
  });

  it('version 1 restore points, whose snapshots carry no time, answer from commit records only', async () => {
    const store = await bucket(1);
    expect((await sqliteCommitAtTime(store, PREFIX, 2_050))?.commitSeq).toBe(13);
    expect((await sqliteCommitAtTime(store, PREFIX, 2_150))?.commitSeq).toBe(15);
    expect(await sqliteCommitAtTime(store, PREFIX, 1_050)).toBeNull();
  });
});
