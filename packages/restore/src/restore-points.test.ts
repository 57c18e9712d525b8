import { latestKey, manifestKey, serializeManifest } from '@x/manifest';
import { MemoryStore } from '@x/store';
import { describe, expect, it } from 'vitest';
import { latestRestorePoint, newestUsableRestorePoint } from './restore-points.ts';

const PREFIX = 'p';
const encode = (text: string): Uint8Array => new TextEncoder().encode(text);

/** A manifest of no objects at commit `commitSeq`: restore's checks pass. */
function emptyManifest(commitSeq: number): Uint8Array {
  return encode(
    serializeManifest({
      formatVersion: 1,
      lineage: 'l'.repeat(32),
      createdAt: '2026-12-01T00:00:00Z',
      commitSeq,
      oldestCommitSeq: commitSeq,
      walGeneration: 0,
      files: [],
      segments: [],
    }),
  );
}

describe('the newest usable restore point', () => {
  it('is found below a window of unusable manifests, listing again below it (bounded memory)', async () => {
    const store = new MemoryStore();
    await store.put(manifestKey(PREFIX, 3), emptyManifest(3));
    for (let commit = 4; commit <= 9; commit += 1)
      await store.put(manifestKey(PREFIX, commit), encode('{'));
    const found = await newestUsableRestorePoint(store, PREFIX, null, undefined, 2);
    expect(found.point?.key).toBe(manifestKey(PREFIX, 3));
    expect(found.tried).toBe(7);
    expect(found.rejected.map((entry) => entry.key)).toEqual(
      [9, 8, 7, 6, 5, 4].map((commit) => manifestKey(PREFIX, commit)),
    );
  });

  it('none usable: every manifest tried once, across windows', async () => {
    const store = new MemoryStore();
    for (let commit = 1; commit <= 5; commit += 1)
      await store.put(manifestKey(PREFIX, commit), encode('not json'));
    const found = await newestUsableRestorePoint(store, PREFIX, null, undefined, 2);
    expect(found.point).toBeNull();
    expect(found.tried).toBe(5);
  });

  it('skips the key LATEST named, and keys under manifest/ that are not manifest keys', async () => {
    const store = new MemoryStore();
    await store.put(manifestKey(PREFIX, 1), emptyManifest(1));
    await store.put(manifestKey(PREFIX, 2), emptyManifest(2));
    await store.put(`${PREFIX}/manifest/notes.txt`, encode('x'));
    const found = await newestUsableRestorePoint(store, PREFIX, manifestKey(PREFIX, 2));
    expect(found.point?.key).toBe(manifestKey(PREFIX, 1));
    expect(found.tried).toBe(1);
  });

  it('latestRestorePoint: LATEST naming a corrupt manifest falls back with the reason', async () => {
    const store = new MemoryStore();
    await store.put(manifestKey(PREFIX, 1), emptyManifest(1));
    await store.put(manifestKey(PREFIX, 2), encode('[]'));
    await store.put(latestKey(PREFIX), encode(manifestKey(PREFIX, 2)));
    const picked = await latestRestorePoint(store, PREFIX);
    expect(picked.point.key).toBe(manifestKey(PREFIX, 1));
    expect(picked.fellBackFrom?.latest).toBe(manifestKey(PREFIX, 2));
    expect(picked.fellBackFrom?.reason).toMatch(
      /^LATEST names p\/manifest\/00000000000000000002\.json, which is refused: does not parse/,
    );
  });
});
