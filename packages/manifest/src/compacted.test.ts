import { describe, expect, it } from 'vitest';
import { KeyLayoutError, ManifestError } from './errors.ts';
import {
  compactedSegmentKey,
  parseKey,
  parseSegmentKey,
  segmentObjectKey,
  snapshotObjectKey,
} from './keys.ts';
import { type Manifest, parseManifest, serializeManifest } from './manifest.ts';

const PREFIX = 'backups/db';
const LINEAGE = 'lin-c';

describe('compacted segment keys', () => {
  it('name the range, the level and the commit range, and parse back', () => {
    const key = compactedSegmentKey(PREFIX, 4, 100, 900, 2, 10, 25);
    expect(key).toBe(
      'backups/db/wal/00000000000000000004/00000000000000000100-00000000000000000900.L2.00000000000000000010-00000000000000000025.seg',
    );
    expect(parseSegmentKey(PREFIX, key)).toEqual({
      generation: 4,
      start: 100,
      end: 900,
      layout: 'compacted',
      level: 2,
      fromCommit: 10,
      toCommit: 25,
    });
    expect(parseKey(PREFIX, key)?.kind).toBe('segment');
    // A fine `.seg` key is not a compacted one.
    expect(parseSegmentKey(PREFIX, segmentObjectKey(PREFIX, 4, 100, 900))?.layout).toBe('object');
  });

  it('refuses to build, and does not parse, a level outside 1..9 or fewer than 2 commits', () => {
    expect(() => compactedSegmentKey(PREFIX, 4, 0, 9, 0, 0, 5)).toThrow(KeyLayoutError);
    expect(() => compactedSegmentKey(PREFIX, 4, 0, 9, 10, 0, 5)).toThrow(KeyLayoutError);
    expect(() => compactedSegmentKey(PREFIX, 4, 0, 9, 1, 4, 5)).toThrow(/fewer than 2 commits/);
    expect(() => compactedSegmentKey(PREFIX, 4, 9, 9, 1, 0, 5)).toThrow(/not greater than start/);
    const good = compactedSegmentKey(PREFIX, 4, 0, 9, 1, 0, 5);
    for (const bad of [
      good.replace('.L1.', '.L0.'),
      good.replace('.L1.', '.L10.'),
      good.replace('00000000000000000005.seg', '00000000000000000001.seg'),
      good.replace('.seg', '.segment'),
    ])
      expect(parseSegmentKey(PREFIX, bad)).toBeUndefined();
  });
});

describe('a manifest naming compacted objects', () => {
  const snapshot = {
    name: 'sqlite.snapshot',
    key: snapshotObjectKey(PREFIX, 4, 3),
    size: 500,
    crc32: '0000000a',
    frames: 3,
    lineage: LINEAGE,
  };
  const manifest = (segments: Manifest['segments'], commitSeq: number): Manifest => ({
    formatVersion: 1,
    lineage: LINEAGE,
    createdAt: '2026-12-01T10:00:05.000Z',
    commitSeq,
    oldestCommitSeq: 0,
    walGeneration: 4,
    files: [snapshot],
    segments,
  });
  const entry = (key: string, frames: number) => ({
    key,
    size: 80,
    crc32: '0000000b',
    frames,
    lineage: LINEAGE,
  });

  it('round-trips one whose compacted entries count the commits before them', () => {
    const m = manifest(
      [
        entry(compactedSegmentKey(PREFIX, 4, 0, 500, 2, 3, 13), 10),
        entry(compactedSegmentKey(PREFIX, 4, 500, 800, 1, 13, 16), 3),
        entry(segmentObjectKey(PREFIX, 4, 800, 900), 1),
      ],
      17,
    );
    expect(parseManifest(serializeManifest(m, { prefix: PREFIX }), { prefix: PREFIX })).toEqual(m);
  });

  const refusal = (m: Manifest): ManifestError => {
    try {
      parseManifest(JSON.stringify(m), { prefix: PREFIX });
    } catch (error) {
      if (error instanceof ManifestError) return error;
      throw error;
    }
    throw new Error('accepted');
  };

  it('refuses overlapping compacted ranges', () => {
    const error = refusal(
      manifest(
        [
          entry(compactedSegmentKey(PREFIX, 4, 0, 500, 1, 3, 13), 10),
          entry(compactedSegmentKey(PREFIX, 4, 400, 800, 1, 13, 16), 3),
        ],
        16,
      ),
    );
    expect(error.message).toMatch(/starts at byte 400, not where the previous segment ends/);
  });

  it('refuses a commit range that does not start after the commits before it', () => {
    const error = refusal(
      manifest([entry(compactedSegmentKey(PREFIX, 4, 0, 500, 1, 5, 15), 10)], 13),
    );
    expect(error.message).toMatch(/commit range starts at 5, not after the 3 commits before it/);
  });

  it("refuses frames that are not the key's commit range", () => {
    const error = refusal(
      manifest([entry(compactedSegmentKey(PREFIX, 4, 0, 500, 1, 3, 13), 9)], 12),
    );
    expect(error.message).toMatch(/9 does not match the key's commit range/);
  });
});
