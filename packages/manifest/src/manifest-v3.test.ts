import { describe, expect, it } from 'vitest';
import { ManifestError } from './errors.ts';
import { manifestKey, segmentKey, snapshotKey } from './keys.ts';
import {
  type Manifest,
  parseLatest,
  parseLatestRecord,
  parseManifest,
  serializeLatest,
  serializeManifest,
} from './manifest.ts';

const PREFIX = 'backups/db3';
const LINEAGE = 'lineage-v3';

function v3(leaseGeneration: unknown = 7): Manifest {
  return {
    formatVersion: 3,
    lineage: LINEAGE,
    createdAt: '2026-12-06T10:00:05.000Z',
    commitSeq: 13,
    oldestCommitSeq: 0,
    walGeneration: 3,
    leaseGeneration,
    snapshotTime: '2026-12-06T10:00:00.000Z',
    commitTime: '2026-12-06T10:00:04.500Z',
    files: [
      {
        name: 'sqlite.snapshot',
        key: snapshotKey(PREFIX, 3, 10),
        size: 4096,
        crc32: '0000000a',
        frames: 10,
        lineage: LINEAGE,
      },
    ],
    segments: [
      {
        key: segmentKey(PREFIX, 3, 0, 90),
        size: 90,
        crc32: '0000000b',
        frames: 3,
        lineage: LINEAGE,
      },
    ],
  } as Manifest;
}

function refusal(parse: () => unknown): ManifestError {
  try {
    parse();
  } catch (error) {
    if (error instanceof ManifestError) return error;
    throw error;
  }
  throw new Error('accepted');
}

describe('manifest format version 3', () => {
  it('round trips the lease generation (or null) after walGeneration', () => {
    for (const generation of [7, 0, null]) {
      const text = serializeManifest(v3(generation), { prefix: PREFIX });
      expect(text).toContain(
        `"walGeneration": 3,\n  "leaseGeneration": ${JSON.stringify(generation)},\n  "snapshotTime"`,
      );
      expect(parseManifest(text, { prefix: PREFIX })).toEqual(v3(generation));
    }
  });

  it('refuses a version 3 document without the lease generation, or with one that is not a count', () => {
    const { leaseGeneration: _, ...missing } = v3();
    expect(refusal(() => parseManifest(JSON.stringify(missing), { prefix: PREFIX }))).toMatchObject(
      { field: 'leaseGeneration' },
    );
    for (const bad of [-1, 1.5, '7', true])
      expect(refusal(() => parseManifest(JSON.stringify(v3(bad)), { prefix: PREFIX })).field).toBe(
        'leaseGeneration',
      );
  });

  it('refuses the lease generation in an older version, as any unknown field', () => {
    const older = { ...v3(), formatVersion: 2 };
    const error = refusal(() => parseManifest(JSON.stringify(older), { prefix: PREFIX }));
    expect(error.field).toBe('leaseGeneration');
    expect(error.message).toMatch(/unknown field \(format version 2 has none/);
  });
});

describe('LATEST with the lease generation', () => {
  const key = manifestKey(PREFIX, 13);

  it('is the bare key without a generation, one line of JSON with one; both parse to the key', () => {
    expect(serializeLatest(key)).toBe(key);
    const text = serializeLatest(key, 4);
    expect(text).toBe(`{"manifest":"${key}","leaseGeneration":4}`);
    expect(parseLatestRecord(text, { prefix: PREFIX })).toEqual({ key, leaseGeneration: 4 });
    expect(parseLatest(`${text}\n`, { prefix: PREFIX })).toBe(key);
    expect(parseLatestRecord(key, { prefix: PREFIX })).toEqual({ key, leaseGeneration: null });
    expect(parseLatestRecord(serializeLatest(key, null), { prefix: PREFIX })).toEqual({
      key,
      leaseGeneration: null,
    });
  });

  it('refuses JSON that is not exactly the two fields, a bad generation, or another prefix’s key', () => {
    const bad = [
      '{"manifest":',
      JSON.stringify({ manifest: key }),
      JSON.stringify({ manifest: key, leaseGeneration: 1, extra: 0 }),
      JSON.stringify({ manifest: key, leaseGeneration: -1 }),
      JSON.stringify({ manifest: key, leaseGeneration: '1' }),
      JSON.stringify({ manifest: 7, leaseGeneration: 1 }),
      JSON.stringify({ manifest: manifestKey('other', 13), leaseGeneration: 1 }),
      JSON.stringify([key]),
    ];
    for (const text of bad)
      expect(refusal(() => parseLatestRecord(text, { prefix: PREFIX })).document).toBe('LATEST');
    expect(() => serializeLatest(key, -2)).toThrow(ManifestError);
  });
});
