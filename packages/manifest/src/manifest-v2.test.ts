import { describe, expect, it } from 'vitest';
import { ManifestError } from './errors.ts';
import { manifestKey, segmentKey, snapshotKey } from './keys.ts';
import {
  checkManifestValue,
  type Manifest,
  parseManifest,
  serializeManifest,
  stateTimes,
} from './manifest.ts';

const PREFIX = 'backups/db2';
const LINEAGE = 'lineage-v2';

function v1(): Manifest {
  return {
    formatVersion: 1,
    lineage: LINEAGE,
    createdAt: '2026-12-01T10:00:05.000Z',
    commitSeq: 13,
    oldestCommitSeq: 0,
    walGeneration: 3,
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
  };
}

function v2(times: { snapshotTime?: unknown; commitTime?: unknown } = {}): Manifest {
  return {
    ...v1(),
    formatVersion: 2,
    snapshotTime: '2026-12-01T10:00:00.000Z',
    commitTime: '2026-12-01T10:00:04.500Z',
    ...times,
  } as Manifest;
}

function refusal(value: unknown): ManifestError {
  try {
    parseManifest(JSON.stringify(value), { prefix: PREFIX });
  } catch (error) {
    if (error instanceof ManifestError) return error;
    throw error;
  }
  throw new Error(`accepted: ${JSON.stringify(value)}`);
}

describe('manifest format version 2', () => {
  it('round-trips the snapshot and commit times, written after walGeneration', () => {
    const text = serializeManifest(v2(), { prefix: PREFIX });
    const lines = text.split('\n');
    expect(lines[1]).toBe('  "formatVersion": 2,');
    expect(lines[7]).toBe('  "snapshotTime": "2026-12-01T10:00:00.000Z",');
    expect(lines[8]).toBe('  "commitTime": "2026-12-01T10:00:04.500Z",');
    const parsed = parseManifest(text, { prefix: PREFIX });
    expect(parsed).toEqual(v2());
    expect(stateTimes(parsed)).toEqual({
      from: Date.parse('2026-12-01T10:00:00.000Z'),
      to: Date.parse('2026-12-01T10:00:04.500Z'),
    });
    expect(manifestKey(PREFIX, parsed.commitSeq)).toContain('manifest/');
  });

  it('takes null for a time the engine does not know', () => {
    const parsed = parseManifest(serializeManifest(v2({ snapshotTime: null, commitTime: null })), {
      prefix: PREFIX,
    });
    expect(parsed.snapshotTime).toBeNull();
    expect(parsed.commitTime).toBeNull();
    expect(stateTimes(parsed)).toEqual({ from: null, to: null });
  });

  it('parses version 1 exactly as before: no time fields, byte-identical serialization', () => {
    const text = serializeManifest(v1());
    expect(text).not.toContain('Time');
    const parsed = parseManifest(text, { prefix: PREFIX });
    expect(parsed).toEqual(v1());
    expect(Object.keys(parsed)).not.toContain('snapshotTime');
    expect(stateTimes(parsed)).toEqual({ from: null, to: null });
  });

  it('refuses the time fields in version 1, as any unknown field', () => {
    const error = refusal({ ...v1(), snapshotTime: null });
    expect(error.field).toBe('snapshotTime');
    expect(error.problem).toMatch(/unknown field \(format version 1 has none/);
  });

  it('refuses a version 2 document without either time, or with a bad one', () => {
    const cases: [unknown, string, RegExp][] = [
      [(({ snapshotTime: _, ...rest }) => rest)(v2()), 'snapshotTime', /missing/],
      [(({ commitTime: _, ...rest }) => rest)(v2()), 'commitTime', /missing/],
      [v2({ snapshotTime: 12 }), 'snapshotTime', /expected an RFC 3339 date-time or null/],
      [v2({ commitTime: '2026-12-01 10:00' }), 'commitTime', /not an RFC 3339/],
      [v2({ commitTime: '2026-13-01T10:00:00Z' }), 'commitTime', /month 13/],
      [v2({ commitTime: '2026-12-01T09:59:59.999Z' }), 'commitTime', /before snapshotTime/],
      [{ ...v2(), extra: 1 }, 'extra', /unknown field \(format version 2 has none/],
    ];
    for (const [value, field, problem] of cases) {
      const error = refusal(value);
      expect(error.field, JSON.stringify(value)).toBe(field);
      expect(error.problem).toMatch(problem);
    }
    expect(() => checkManifestValue(v2({ commitTime: undefined }))).toThrow(ManifestError);
  });
});
