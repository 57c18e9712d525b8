import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { crc32Hex } from './crc32.ts';
import { KeyLayoutError, ManifestError } from './errors.ts';
import {
  archiveKey,
  archiveName,
  archiveObjectKey,
  isPlainName,
  manifestKey,
  segmentKey,
  segmentObjectKey,
  sideKey,
  sideObjectKey,
  snapshotKey,
} from './keys.ts';
import {
  computeCommitSeq,
  type FileEntry,
  MAX_MANIFEST_BYTES,
  type Manifest,
  parseLatest,
  parseManifest,
  type SegmentEntry,
  serializeLatest,
  serializeManifest,
  verifyLineage,
} from './manifest.ts';

const PREFIX = 'backups/db1';
const LINEAGE = '0123456789abcdef0123456789abcdef';

function example(): Manifest {
  const roles = new TextEncoder().encode('{"roles":[]}');
  const files: FileEntry[] = [
    {
      name: 'snapshot.bin',
      key: snapshotKey(PREFIX, 4, 10),
      size: 8192,
      crc32: '1a2b3c4d',
      frames: 0,
      lineage: LINEAGE,
    },
    {
      name: archiveName(2),
      key: archiveKey(PREFIX, 3, 2),
      size: 300,
      crc32: 'deadbeef',
      frames: 5,
      lineage: LINEAGE,
    },
    {
      name: 'roles.json',
      key: sideKey(PREFIX, 'roles.json', crc32Hex(roles), roles.length),
      size: roles.length,
      crc32: crc32Hex(roles),
      frames: 0,
      lineage: LINEAGE,
    },
  ];
  const segments: SegmentEntry[] = [
    {
      key: segmentKey(PREFIX, 4, 0, 100),
      size: 100,
      crc32: '00000001',
      frames: 2,
      lineage: LINEAGE,
    },
    {
      key: segmentKey(PREFIX, 4, 100, 250),
      size: 150,
      crc32: '00000002',
      frames: 3,
      lineage: LINEAGE,
    },
  ];
  return {
    formatVersion: 1,
    lineage: LINEAGE,
    createdAt: '2026-11-29T08:00:00.123Z',
    commitSeq: 5 + 5 + 5,
    oldestCommitSeq: 5,
    walGeneration: 4,
    files,
    segments,
  };
}

/** Valid manifests: keys, names and numbers consistent by construction. */
const manifestArbitrary: fc.Arbitrary<{ prefix: string; manifest: Manifest }> = fc
  .record({
    prefix: fc.constantFrom('p', 'backups/db1', 'a/b/c-d_e.f'),
    lineage: fc.stringMatching(/^[A-Za-z0-9._-]{1,40}$/),
    createdAt: fc
      .date({ min: new Date(0), max: new Date('9999-12-31T23:59:59Z'), noInvalidDate: true })
      .map((date) => date.toISOString()),
    oldestCommitSeq: fc.nat({ max: 2 ** 40 }),
    walGeneration: fc.nat({ max: 2 ** 40 }),
    snapshot: fc.option(fc.record({ frames: fc.nat({ max: 2 ** 40 }), size: fc.nat() })),
    archives: fc.uniqueArray(
      fc.record({
        n: fc.nat({ max: 1000 }),
        back: fc.nat({ max: 3 }),
        frames: fc.nat({ max: 2 ** 30 }),
      }),
      { selector: (archive) => archive.n, maxLength: 4 },
    ),
    sides: fc.uniqueArray(
      fc.record({
        name: fc.string({ minLength: 1, maxLength: 12, unit: 'grapheme' }).filter(isPlainName),
        bytes: fc.uint8Array({ maxLength: 30 }),
      }),
      { selector: (side) => side.name, maxLength: 4 },
    ),
    segmentStart: fc.nat({ max: 2 ** 40 }),
    segments: fc.array(
      fc.record({ size: fc.integer({ min: 1, max: 2 ** 30 }), frames: fc.nat({ max: 2 ** 30 }) }),
      {
        maxLength: 6,
      },
    ),
    crc: fc.integer({ min: 0, max: 0xffffffff }).map((n) => n.toString(16).padStart(8, '0')),
  })
  .filter(
    ({ archives, sides }) =>
      // Side-file names must not collide with the snapshot's or an archive's.
      !sides.some(
        (side) =>
          side.name === 'snapshot.bin' ||
          archives.some((archive) => archiveName(archive.n) === side.name),
      ),
  )
  .map((input) => {
    const { prefix, lineage, walGeneration, crc } = input;
    const files: FileEntry[] = [];
    if (input.snapshot !== null) {
      files.push({
        name: 'snapshot.bin',
        key: snapshotKey(prefix, walGeneration, input.snapshot.frames),
        size: input.snapshot.size,
        crc32: crc,
        frames: 0,
        lineage,
      });
    }
    for (const archive of input.archives) {
      files.push({
        name: archiveName(archive.n),
        key: archiveKey(prefix, Math.max(0, walGeneration - archive.back), archive.n),
        size: 100,
        crc32: crc,
        frames: archive.frames,
        lineage,
      });
    }
    for (const side of input.sides) {
      files.push({
        name: side.name,
        key: sideKey(prefix, side.name, crc32Hex(side.bytes), side.bytes.length),
        size: side.bytes.length,
        crc32: crc32Hex(side.bytes),
        frames: 0,
        lineage,
      });
    }
    let start = input.segmentStart;
    const segments: SegmentEntry[] = input.segments.map((segment) => {
      const entry = {
        key: segmentKey(prefix, walGeneration, start, start + segment.size),
        size: segment.size,
        crc32: crc,
        frames: segment.frames,
        lineage,
      };
      start += segment.size;
      return entry;
    });
    const manifest: Manifest = {
      formatVersion: 1,
      lineage,
      createdAt: input.createdAt,
      commitSeq: computeCommitSeq({ oldestCommitSeq: input.oldestCommitSeq, files, segments }),
      oldestCommitSeq: input.oldestCommitSeq,
      walGeneration,
      files,
      segments,
    };
    return { prefix, manifest };
  });

function refusal(text: string, prefix = PREFIX): ManifestError {
  try {
    parseManifest(text, { prefix });
  } catch (error) {
    if (ManifestError.isInstance(error)) return error;
    throw error;
  }
  throw new Error(`accepted: ${text.slice(0, 300)}`);
}

/** The example with `change` applied to its parsed JSON, serialized again. */
function mutated(
  change: (
    value: Record<string, unknown> & {
      files: Record<string, unknown>[];
      segments: Record<string, unknown>[];
    },
  ) => void,
): string {
  const value = JSON.parse(serializeManifest(example(), { prefix: PREFIX }));
  change(value);
  return JSON.stringify(value);
}

describe('manifest', () => {
  it('serializes with a stable field order and parses back to an equal manifest', () => {
    const text = serializeManifest(example(), { prefix: PREFIX });
    expect(Object.keys(JSON.parse(text))).toEqual([
      'formatVersion',
      'lineage',
      'createdAt',
      'commitSeq',
      'oldestCommitSeq',
      'walGeneration',
      'files',
      'segments',
    ]);
    expect(text.split('\n')[1]).toBe('  "formatVersion": 1,');
    expect(text).toContain(
      `    {"name":"snapshot.bin","key":"${snapshotKey(PREFIX, 4, 10)}","size":8192,"crc32":"1a2b3c4d","frames":0,"lineage":"${LINEAGE}"},`,
    );
    expect(parseManifest(text, { prefix: PREFIX })).toEqual(example());
    expect(parseManifest(new TextEncoder().encode(text), { prefix: PREFIX })).toEqual(example());
    // Field order of the input object does not change the output.
    const shuffled = { ...example(), segments: example().segments, formatVersion: 1 as const };
    expect(serializeManifest(shuffled, { prefix: PREFIX })).toBe(text);
  });

  it('round-trips arbitrary valid manifests', () => {
    fc.assert(
      fc.property(manifestArbitrary, ({ prefix, manifest }) => {
        const text = serializeManifest(manifest, { prefix });
        const parsed = parseManifest(text, { prefix });
        expect(parsed).toEqual(manifest);
        expect(serializeManifest(parsed, { prefix })).toBe(text);
        verifyLineage(parsed);
      }),
      { numRuns: 300 },
    );
  });

  it('refuses each broken rule, naming the field and the problem', () => {
    const cases: [string, string, RegExp][] = [
      [
        mutated((m) => {
          m.formatVersion = 4;
        }),
        'formatVersion',
        /unsupported format version 4 \(this reader knows 1, 2, 3\)/,
      ],
      [
        mutated((m) => {
          delete m.formatVersion;
        }),
        'formatVersion',
        /missing/,
      ],
      [
        mutated((m) => {
          m.formatVersion = '1';
        }),
        'formatVersion',
        /unsupported/,
      ],
      [
        mutated((m) => {
          delete m.lineage;
        }),
        'lineage',
        /missing/,
      ],
      [
        mutated((m) => {
          m.extra = true;
        }),
        'extra',
        /unknown field/,
      ],
      [
        mutated((m) => {
          m.files[1]!.extra = 1;
        }),
        'files[1].extra',
        /unknown field/,
      ],
      [
        mutated((m) => {
          m.commitSeq = '15';
        }),
        'commitSeq',
        /expected a number, found a string/,
      ],
      [
        mutated((m) => {
          m.commitSeq = 16;
        }),
        'commitSeq',
        /does not equal oldestCommitSeq \+ the frames listed \(15\)/,
      ],
      [
        mutated((m) => {
          m.oldestCommitSeq = -5;
        }),
        'oldestCommitSeq',
        /non-negative integer/,
      ],
      [
        mutated((m) => {
          m.files[0]!.size = 1.5;
        }),
        'files[0].size',
        /non-negative integer/,
      ],
      [
        mutated((m) => {
          m.files[0]!.size = null;
        }),
        'files[0].size',
        /found null/,
      ],
      [
        mutated((m) => {
          m.walGeneration = 'x';
        }),
        'walGeneration',
        /expected a number/,
      ],
      [
        mutated((m) => {
          (m as Record<string, unknown>).files = {};
        }),
        'files',
        /expected an array/,
      ],
      [
        mutated((m) => {
          (m.files as unknown[])[0] = 'x';
        }),
        'files[0]',
        /expected an object/,
      ],
      [
        mutated((m) => {
          m.createdAt = '2026-02-30T00:00:00Z';
        }),
        'createdAt',
        /day 30/,
      ],
      [
        mutated((m) => {
          m.createdAt = 'yesterday';
        }),
        'createdAt',
        /RFC 3339/,
      ],
      [
        mutated((m) => {
          m.lineage = 'a b';
        }),
        'lineage',
        /not a lineage id/,
      ],
      [
        mutated((m) => {
          m.files[0]!.crc32 = '1A2B3C4D';
        }),
        'files[0].crc32',
        /8 lowercase hex/,
      ],
      [
        mutated((m) => {
          m.files[0]!.name = '../etc/passwd';
        }),
        'files[0].name',
        /plain file name/,
      ],
      [
        mutated((m) => {
          m.files[0]!.name = '/abs';
        }),
        'files[0].name',
        /plain file name/,
      ],
      [
        mutated((m) => {
          m.files[0]!.name = 'a\u0000';
        }),
        'files[0].name',
        /plain file name/,
      ],
      [
        mutated((m) => {
          m.files[0]!.name = '';
        }),
        'files[0].name',
        /plain file name: empty/,
      ],
      [
        mutated((m) => {
          m.files[0]!.name = '..';
        }),
        'files[0].name',
        /plain file name/,
      ],
      [
        mutated((m) => {
          m.files[2]!.name = 'snapshot.bin';
        }),
        'files[2].name',
        /duplicate name, also files\[0\].name/,
      ],
      [
        mutated((m) => {
          m.files[0]!.key = 'elsewhere/x';
        }),
        'files[0].key',
        /outside the manifest's prefix/,
      ],
      [
        mutated((m) => {
          m.files[0]!.key = `${PREFIX}/../x`;
        }),
        'files[0].key',
        /not a snapshot, archive or side-file key/,
      ],
      [
        mutated((m) => {
          m.files[0]!.key = `${PREFIX}/manifest/00000000000000000001.json`;
        }),
        'files[0].key',
        /not a snapshot, archive or side-file key/,
      ],
      [
        mutated((m) => {
          m.files[0]!.key = snapshotKey(PREFIX, 5, 10);
        }),
        'files[0].key',
        /generation 5, not of walGeneration 4/,
      ],
      [
        mutated((m) => {
          m.files[1]!.name = 'wal.3.archive';
        }),
        'files[1].name',
        /must be named wal.2.archive/,
      ],
      [
        mutated((m) => {
          m.files[1]!.key = archiveKey(PREFIX, 5, 2);
        }),
        'files[1].key',
        /after walGeneration 4/,
      ],
      [
        mutated((m) => {
          m.files[2]!.size = 3;
        }),
        'files[2].size',
        /key's size/,
      ],
      [
        mutated((m) => {
          m.files[2]!.crc32 = '00000000';
        }),
        'files[2].crc32',
        /key's CRC-32/,
      ],
      [
        mutated((m) => {
          m.files[2]!.name = 'keys.json';
        }),
        'files[2].key',
        /side-file key for "roles.json"/,
      ],
      [
        mutated((m) => {
          m.files[2]!.frames = 1;
          m.commitSeq = 16;
        }),
        'files[2].frames',
        /holds no frames/,
      ],
      [
        mutated((m) => {
          m.segments[0]!.key = `${PREFIX}/wal/4/0-100`;
        }),
        'segments[0].key',
        /not a segment key/,
      ],
      [
        mutated((m) => {
          m.segments[0]!.key = segmentKey(PREFIX, 3, 0, 100);
        }),
        'segments[0].key',
        /generation 3, not of walGeneration 4/,
      ],
      [
        mutated((m) => {
          m.segments[0]!.size = 99;
        }),
        'segments[0].size',
        /does not match the key's byte range \(100\)/,
      ],
      [
        mutated((m) => {
          m.segments[1]!.key = segmentKey(PREFIX, 4, 101, 251);
        }),
        'segments[1].key',
        /not where the previous segment ends \(100\)/,
      ],
      [
        mutated((m) => {
          m.segments[0]!.key = segmentObjectKey(PREFIX, 4, 0, 100);
          m.segments[0]!.size = 57;
        }),
        'segments[0].size',
        /57 is less than the smallest stored segment object \(58 bytes\)/,
      ],
      [
        mutated((m) => {
          m.segments[0]!.key = segmentObjectKey(PREFIX, 4, 0, 100);
          m.segments[1]!.key = segmentObjectKey(PREFIX, 4, 101, 250);
        }),
        'segments[1].key',
        /not where the previous segment ends \(100\)/,
      ],
      [
        mutated((m) => {
          m.segments[0]!.key = segmentObjectKey(PREFIX, 3, 0, 100);
        }),
        'segments[0].key',
        /generation 3, not of walGeneration 4/,
      ],
      [
        mutated((m) => {
          m.segments[1]!.key = m.files[0]!.key;
        }),
        'segments[1].key',
        /not a segment key/,
      ],
      [
        mutated((m) => {
          m.segments[1]!.key = m.segments[0]!.key;
          m.segments[1]!.size = 100;
        }),
        'segments[1].key',
        /previous segment ends/,
      ],
    ];
    for (const [text, field, problem] of cases) {
      const error = refusal(text);
      expect(error.field, text).toBe(field);
      expect(error.problem, field).toMatch(problem);
      expect(error.message).toContain(field);
      expect(error.code).toBe('MANIFEST_INVALID');
    }
  });

  it('accepts .seg segments, whose size is the stored object’s and not the range, chained with .segment ones', () => {
    const manifest = example();
    const stored = {
      ...manifest.segments[1]!,
      key: segmentObjectKey(PREFIX, 4, 100, 250),
      size: 61,
    };
    const mixed: Manifest = { ...manifest, segments: [manifest.segments[0]!, stored] };
    const parsed = parseManifest(serializeManifest(mixed, { prefix: PREFIX }), { prefix: PREFIX });
    expect(parsed.segments[1]).toEqual(stored);
    expect(parsed.commitSeq).toBe(manifest.commitSeq);
  });

  it('accepts .bko archive and side-file objects, a side key naming the stored CRC-32 and size', () => {
    const manifest = example();
    const archive = { ...manifest.files[1]!, key: archiveObjectKey(PREFIX, 3, 2), size: 211 };
    const side = {
      ...manifest.files[2]!,
      key: sideObjectKey(PREFIX, 'roles.json', '0badf00d', 190),
      size: 190,
      crc32: '0badf00d',
    };
    const sealed: Manifest = { ...manifest, files: [manifest.files[0]!, archive, side] };
    const parsed = parseManifest(serializeManifest(sealed, { prefix: PREFIX }), { prefix: PREFIX });
    expect(parsed.files).toEqual(sealed.files);
    const otherCrc = JSON.stringify({
      ...JSON.parse(serializeManifest(sealed, { prefix: PREFIX })),
      files: [manifest.files[0], archive, { ...side, crc32: crc32Hex(new Uint8Array(1)) }],
    });
    expect(() => parseManifest(otherCrc, { prefix: PREFIX })).toThrow(/key's CRC-32/);
  });

  it('refuses numbers that are not plain non-negative decimal integers, or beyond 2^53 - 1', () => {
    const text = serializeManifest(example(), { prefix: PREFIX });
    const replace = (to: string): string => text.replace('"size":8192', `"size":${to}`);
    for (const spelled of ['8.192e3', '8192.0', '-0', '9007199254740992', '1e400', '-8192']) {
      const error = refusal(replace(spelled));
      expect(error.field, spelled).toBe('files[0].size');
    }
    expect(refusal(replace('9007199254740993')).problem).toMatch(/plain decimal|beyond/);
    expect(parseManifest(replace('9007199254740991'), { prefix: PREFIX }).files[0]!.size).toBe(
      2 ** 53 - 1,
    );
  });

  it('refuses a commitSeq sum beyond 2^53 - 1', () => {
    const m = example();
    m.oldestCommitSeq = 2 ** 53 - 3;
    expect(() => computeCommitSeq(m)).toThrow(/beyond 2\^53 - 1/);
  });

  it('refuses documents that are not JSON, not UTF-8, or over the size cap', () => {
    expect(refusal('').problem).toMatch(/not valid JSON/);
    expect(refusal('[]').problem).toMatch(/expected a JSON object, found an array/);
    expect(refusal('null').field).toBe('');
    expect(() => parseManifest(new Uint8Array([0x7b, 0xff, 0x7d]), { prefix: PREFIX })).toThrow(
      /not valid UTF-8/,
    );
    const big = `{"formatVersion":1,"pad":"${'x'.repeat(MAX_MANIFEST_BYTES)}"}`;
    expect(refusal(big).problem).toMatch(/cap/);
    expect(() => parseManifest(new Uint8Array(MAX_MANIFEST_BYTES + 1), { prefix: PREFIX })).toThrow(
      /cap/,
    );
    const deep = `${'['.repeat(200_000)}${']'.repeat(200_000)}`;
    expect(refusal(deep).field).toBe('');
  });

  it('refuses an invalid prefix option as a caller bug', () => {
    for (const prefix of ['', 'a/', '/a', 'a//b']) {
      expect(() => parseManifest('{}', { prefix })).toThrow(KeyLayoutError);
      expect(() => parseLatest('x', { prefix })).toThrow(KeyLayoutError);
    }
  });

  it('checks before serializing', () => {
    const m = example();
    m.commitSeq += 1;
    expect(() => serializeManifest(m)).toThrow(ManifestError);
    const n = example();
    n.files[0]!.key = 'other/prefix/x';
    expect(() => serializeManifest(n, { prefix: PREFIX })).toThrow(/outside the manifest's prefix/);
  });

  it('verifyLineage names the entry of another lineage', () => {
    const m = example();
    verifyLineage(m);
    m.segments[1]!.lineage = 'other';
    expect(() => verifyLineage(m)).toThrow(
      expect.objectContaining({ field: 'segments[1].lineage' }),
    );
    const n = example();
    n.files[2]!.lineage = 'other';
    expect(() => verifyLineage(n)).toThrow(expect.objectContaining({ field: 'files[2].lineage' }));
  });

  it('LATEST holds exactly one manifest key of the prefix', () => {
    const key = manifestKey(PREFIX, 15);
    expect(serializeLatest(key)).toBe(key);
    expect(parseLatest(serializeLatest(key), { prefix: PREFIX })).toBe(key);
    expect(parseLatest(`${key}\n`, { prefix: PREFIX })).toBe(key);
    expect(parseLatest(new TextEncoder().encode(key), { prefix: PREFIX })).toBe(key);
    for (const bad of [
      '',
      `${key}\n\n`,
      ` ${key}`,
      `${key}\r\n`,
      manifestKey('other', 15),
      `${PREFIX}/manifest/15.json`,
      `${PREFIX}/LATEST`,
      `${key}${'x'.repeat(5000)}`,
    ]) {
      expect(() => parseLatest(bad, { prefix: PREFIX }), JSON.stringify(bad.slice(0, 80))).toThrow(
        expect.objectContaining({ document: 'LATEST' }),
      );
    }
    expect(() => serializeLatest(`${PREFIX}/snapshots/x`)).toThrow(ManifestError);
    expect(() => serializeLatest('manifest/00000000000000000001.json')).toThrow(ManifestError);
  });

  it('parsers survive random and mutated input: a value within the prefix, or a ManifestError', () => {
    const base = serializeManifest(example(), { prefix: PREFIX });
    const inputs = fc.oneof(
      fc.string({ maxLength: 300, unit: 'binary' }),
      fc.json({ maxDepth: 4 }),
      fc
        .tuple(fc.nat(), fc.string({ maxLength: 6, unit: 'binary' }), fc.nat({ max: 6 }))
        .map(([at, insert, drop]) => {
          const position = at % (base.length + 1);
          return base.slice(0, position) + insert + base.slice(position + drop);
        }),
      fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })).map(([at, byte]) => {
        const bytes = new TextEncoder().encode(base);
        bytes[at % bytes.length] = byte;
        return bytes;
      }),
    );
    let accepted = 0;
    const check = (input: string | Uint8Array): void => {
      let manifest: Manifest;
      try {
        manifest = parseManifest(input, { prefix: PREFIX });
      } catch (error) {
        expect(ManifestError.isInstance(error)).toBe(true);
        return;
      }
      accepted++;
      for (const entry of [...manifest.files, ...manifest.segments]) {
        expect(entry.key.startsWith(`${PREFIX}/`)).toBe(true);
        expect(entry.key.split('/')).not.toContain('..');
      }
      for (const file of manifest.files) expect(isPlainName(file.name)).toBe(true);
      expect(manifest.commitSeq).toBe(computeCommitSeq(manifest));
    };
    fc.assert(fc.property(inputs, check), { numRuns: 3000 });
    // Not vacuous: some mutations (inside a CRC, a date) still parse.
    expect(accepted).toBeGreaterThan(20);
    for (const input of ['{}', '1', '"x"', 'true', '{"formatVersion":1}', '\ufeff{}']) check(input);
    // And LATEST.
    fc.assert(
      fc.property(fc.string({ maxLength: 80, unit: 'binary' }), (text) => {
        try {
          const key = parseLatest(`${PREFIX}/manifest/${text}`, { prefix: PREFIX });
          expect(key.startsWith(`${PREFIX}/manifest/`)).toBe(true);
        } catch (error) {
          expect(ManifestError.isInstance(error)).toBe(true);
        }
      }),
      { numRuns: 500 },
    );
  });
});
