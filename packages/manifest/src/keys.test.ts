import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { KeyLayoutError } from './errors.ts';
import {
  archiveKey,
  archiveName,
  archiveObjectKey,
  isPlainName,
  latestKey,
  manifestKey,
  objectKey,
  pad20,
  parseArchiveKey,
  parseArchiveName,
  parseKey,
  parseManifestKey,
  parsePad20,
  parseSegmentGenerationPrefix,
  parseSegmentKey,
  parseSideKey,
  parseSnapshotKey,
  parseVersionedGeneration,
  segmentGenerationPrefix,
  segmentKey,
  segmentObjectKey,
  sideKey,
  sideObjectKey,
  snapshotKey,
  snapshotObjectKey,
} from './keys.ts';

const MAX = Number.MAX_SAFE_INTEGER;
const count = fc.oneof(
  fc.integer({ min: 0, max: MAX }),
  fc.constantFrom(0, 1, 9, 10, MAX - 1, MAX),
);
const segmentText = fc.stringMatching(/^[A-Za-z0-9_-][A-Za-z0-9._-]{0,11}$/);
const prefixArbitrary = fc
  .array(segmentText, { minLength: 1, maxLength: 4 })
  .map((parts) => parts.join('/'))
  .filter((prefix) => prefix.split('/').every((part) => part !== '.' && part !== '..'));
const plainName = fc
  .string({ minLength: 1, maxLength: 40, unit: 'grapheme' })
  .filter((name) => isPlainName(name));
const crcHex = fc.integer({ min: 0, max: 0xffffffff }).map((n) => n.toString(16).padStart(8, '0'));

describe('key layout', () => {
  it('writes the documented keys', () => {
    expect(latestKey('db/a')).toBe('db/a/LATEST');
    expect(manifestKey('db/a', 42)).toBe('db/a/manifest/00000000000000000042.json');
    expect(snapshotKey('db/a', 3, 100)).toBe(
      'db/a/snapshots/00000000000000000003-00000000000000000100.snapshot',
    );
    expect(snapshotObjectKey('db/a', 3, 100)).toBe(
      'db/a/snapshots/00000000000000000003-00000000000000000100.snap',
    );
    expect(archiveKey('db/a', 3, 7)).toBe(
      'db/a/archives/00000000000000000003/wal.00000000000000000007.archive',
    );
    expect(segmentKey('db/a', 3, 0, 4096)).toBe(
      'db/a/wal/00000000000000000003/00000000000000000000-00000000000000004096.segment',
    );
    expect(segmentObjectKey('db/a', 3, 0, 4096)).toBe(
      'db/a/wal/00000000000000000003/00000000000000000000-00000000000000004096.seg',
    );
    expect(sideKey('db/a', 'roles.json', '0badf00d', 12)).toBe(
      'db/a/side/roles.json/0badf00d-00000000000000000012',
    );
    expect(segmentGenerationPrefix('db/a', 3)).toBe('db/a/wal/00000000000000000003/');
    expect(objectKey('db/a', 'manifest/')).toBe('db/a/manifest/');
    expect(objectKey('db/a', 'side/x')).toBe('db/a/side/x');
    expect(archiveName(12)).toBe('wal.12.archive');
  });

  it('pads to 20 digits, so lexicographic order is numeric order', () => {
    fc.assert(
      fc.property(count, count, (a, b) => {
        expect(pad20(a)).toHaveLength(20);
        expect(pad20(a) < pad20(b)).toBe(a < b);
        expect(parsePad20(pad20(a))).toBe(a);
      }),
      { numRuns: 300 },
    );
  });

  it('round-trips every key constructor through its parse function', () => {
    fc.assert(
      fc.property(
        prefixArbitrary,
        count,
        count,
        count,
        plainName,
        crcHex,
        (prefix, a, b, c, name, crc) => {
          expect(parseManifestKey(prefix, manifestKey(prefix, a))).toBe(a);
          expect(parseSnapshotKey(prefix, snapshotKey(prefix, a, b))).toEqual({
            generation: a,
            frames: b,
            layout: 'raw',
          });
          expect(parseSnapshotKey(prefix, snapshotObjectKey(prefix, a, b))).toEqual({
            generation: a,
            frames: b,
            layout: 'object',
          });
          expect(parseVersionedGeneration(prefix, snapshotObjectKey(prefix, a, b))).toBe(a);
          expect(parseArchiveKey(prefix, archiveKey(prefix, a, b))).toEqual({
            generation: a,
            n: b,
            layout: 'raw',
          });
          expect(parseArchiveKey(prefix, archiveObjectKey(prefix, a, b))).toEqual({
            generation: a,
            n: b,
            layout: 'object',
          });
          expect(parseVersionedGeneration(prefix, archiveObjectKey(prefix, a, b))).toBe(a);
          expect(parseVersionedGeneration(prefix, snapshotKey(prefix, a, b))).toBe(a);
          expect(parseVersionedGeneration(prefix, archiveKey(prefix, a, b))).toBe(a);
          const [start, end] = b < c ? [b, c] : c < b ? [c, b] : [b, b + 1];
          if (end <= MAX) {
            expect(parseSegmentKey(prefix, segmentKey(prefix, a, start, end))).toEqual({
              generation: a,
              start,
              end,
              layout: 'raw',
            });
            expect(parseSegmentKey(prefix, segmentObjectKey(prefix, a, start, end))).toEqual({
              generation: a,
              start,
              end,
              layout: 'object',
            });
            expect(parseKey(prefix, segmentObjectKey(prefix, a, start, end))).toEqual({
              kind: 'segment',
              generation: a,
              start,
              end,
              layout: 'object',
            });
          }
          expect(parseSegmentGenerationPrefix(prefix, segmentGenerationPrefix(prefix, a))).toBe(a);
          expect(parseSideKey(prefix, sideKey(prefix, name, crc, c))).toEqual({
            name,
            crc32: crc,
            size: c,
            layout: 'raw',
          });
          expect(parseSideKey(prefix, sideObjectKey(prefix, name, crc, c))).toEqual({
            name,
            crc32: crc,
            size: c,
            layout: 'object',
          });
          expect(parseArchiveName(archiveName(a))).toBe(a);
          expect(parseKey(prefix, latestKey(prefix))).toEqual({ kind: 'latest' });
          expect(parseKey(prefix, manifestKey(prefix, a))).toEqual({
            kind: 'manifest',
            commitSeq: a,
          });
        },
      ),
      { numRuns: 300 },
    );
  });

  it('refuses keys no constructor produces', () => {
    const prefix = 'db/a';
    const good = 'db/a/manifest/00000000000000000042.json';
    expect(parseManifestKey(prefix, good)).toBe(42);
    for (const bad of [
      'db/b/manifest/00000000000000000042.json', // another prefix
      'db/a/x/manifest/00000000000000000042.json',
      'db/ab/manifest/00000000000000000042.json',
      'db/manifest/00000000000000000042.json',
      'db/a/manifest/42.json', // not padded
      'db/a/manifest/000000000000000000042.json', // 21 digits
      'db/a/manifest/0000000000000000004a.json', // non-digit
      'db/a/manifest/0000000000000000004２.json', // fullwidth digit
      'db/a/manifest/-0000000000000000042.json',
      'db/a/manifest/00009007199254740992.json', // 2^53
      'db/a/manifest/99999999999999999999.json',
      'db/a/manifest/00000000000000000042.JSON',
      'db/a/manifest/00000000000000000042.json/',
      'db/a//manifest/00000000000000000042.json',
      '/db/a/manifest/00000000000000000042.json',
    ]) {
      expect(parseManifestKey(prefix, bad), bad).toBeUndefined();
    }
    expect(parseManifestKey(prefix, 'db/a/manifest/00009007199254740991.json')).toBe(MAX);
    expect(
      parseSegmentKey(prefix, segmentKey(prefix, 1, 5, 6).replace('05-', '06-')),
    ).toBeUndefined();
    expect(
      parseSegmentKey(
        prefix,
        'db/a/wal/00000000000000000001/00000000000000000006-00000000000000000006.segment',
      ),
    ).toBeUndefined();
    for (const suffix of ['.SEG', '.se', '.segm', '.seg.', '.seg/', '.snap', '']) {
      const key = `db/a/wal/00000000000000000001/00000000000000000005-00000000000000000006${suffix}`;
      expect(parseSegmentKey(prefix, key), key).toBeUndefined();
    }
    expect(
      parseSegmentKey(
        prefix,
        'db/a/wal/00000000000000000001/00000000000000000006-00000000000000000006.seg',
      ),
    ).toBeUndefined();
    expect(
      parseSegmentKey(
        prefix,
        'db/a/wal/00000000000000000001/00000000000000000007-00000000000000000006.seg',
      ),
    ).toBeUndefined();
    expect(parseSideKey(prefix, 'db/a/side/../00000000-00000000000000000001')).toBeUndefined();
    expect(parseSideKey(prefix, 'db/a/side/x/0000000G-00000000000000000001')).toBeUndefined();
    expect(parseSideKey(prefix, 'db/a/side/x/ABCDEF00-00000000000000000001')).toBeUndefined();
    expect(parseSideKey(prefix, 'db/a/side/x/y/00000000-00000000000000000001')).toBeUndefined();
    expect(parseSegmentGenerationPrefix(prefix, 'db/a/wal/00000000000000000001')).toBeUndefined();
    expect(parseSegmentGenerationPrefix(prefix, 'db/a/wal/1/')).toBeUndefined();
    for (const bad of [
      'wal.01.archive',
      'wal.-1.archive',
      'wal..archive',
      'wal.1.archive.x',
      'wal.9007199254740992.archive',
      'wal.1e3.archive',
      'WAL.1.archive',
    ]) {
      expect(parseArchiveName(bad), bad).toBeUndefined();
    }
    expect(parseArchiveName('wal.0.archive')).toBe(0);
  });

  it('refuses invalid constructor arguments with KeyLayoutError', () => {
    const calls: [string, () => unknown][] = [
      ['empty prefix', () => latestKey('')],
      ['trailing slash', () => latestKey('db/')],
      ['leading slash', () => latestKey('/db')],
      ['dot-dot prefix', () => latestKey('db/../x')],
      ['NUL prefix', () => latestKey('d\0b')],
      ['negative', () => manifestKey('db', -1)],
      ['fraction', () => manifestKey('db', 1.5)],
      ['beyond 2^53-1', () => manifestKey('db', 2 ** 53)],
      ['NaN', () => snapshotKey('db', Number.NaN, 0)],
      ['empty segment', () => segmentKey('db', 0, 5, 5)],
      ['reversed segment', () => segmentKey('db', 0, 6, 5)],
      ['dot-dot name', () => sideKey('db', '..', '00000000', 0)],
      ['slash name', () => sideKey('db', 'a/b', '00000000', 0)],
      ['empty name', () => sideKey('db', '', '00000000', 0)],
      ['NUL name', () => sideKey('db', 'a\0', '00000000', 0)],
      ['uppercase crc', () => sideKey('db', 'a', 'ABCDEF00', 0)],
      ['escaping relative', () => objectKey('db', '../x')],
      ['absolute relative', () => objectKey('db', '/x')],
      ['too long', () => objectKey('db', 'x'.repeat(1100))],
      ['archive name of -1', () => archiveName(-1)],
    ];
    for (const [label, call] of calls) {
      expect(call, label).toThrow(KeyLayoutError);
      try {
        call();
      } catch (error) {
        expect(KeyLayoutError.isInstance(error), label).toBe(true);
      }
    }
  });

  it('accepts plain names and refuses path-like ones', () => {
    for (const name of ['snapshot.bin', 'wal.3.archive', 'roles.json', '.hidden', 'a b', 'ünï']) {
      expect(isPlainName(name), name).toBe(true);
    }
    for (const name of [
      '',
      '.',
      '..',
      'a/b',
      '/abs',
      'a\\b',
      'C:\\x',
      'a\0b',
      'a\nb',
      'x'.repeat(256),
      '\ud800',
    ]) {
      expect(isPlainName(name), JSON.stringify(name)).toBe(false);
    }
  });

  it('never parses a random or mutated key into a value that escapes its prefix or is not canonical', () => {
    const prefix = 'db/a';
    const built = [
      manifestKey(prefix, 42),
      snapshotKey(prefix, 1, 2),
      archiveKey(prefix, 1, 2),
      segmentKey(prefix, 1, 2, 3),
      segmentObjectKey(prefix, 1, 2, 3),
      sideKey(prefix, 'roles.json', '0badf00d', 3),
      latestKey(prefix),
    ];
    const keyGenerators = fc.oneof(
      fc.string({ maxLength: 120, unit: 'binary' }),
      fc.string({ maxLength: 120, unit: 'grapheme-ascii' }).map((tail) => `${prefix}/${tail}`),
      // Unchanged, so that every kind parses and is rebuilt.
      fc.constantFrom(...built),
      fc
        .tuple(
          fc.constantFrom(...built),
          fc.nat(),
          fc.string({ maxLength: 4, unit: 'binary' }),
          fc.nat({ max: 3 }),
        )
        .map(([key, at, insert, drop]) => {
          const position = at % (key.length + 1);
          return key.slice(0, position) + insert + key.slice(position + drop);
        }),
    );
    let parsedCount = 0;
    fc.assert(
      fc.property(keyGenerators, (key) => {
        const parsed = parseKey(prefix, key);
        if (parsed === undefined) return;
        parsedCount++;
        // Whatever parses is exactly what a constructor writes for those values.
        expect(key.startsWith(`${prefix}/`)).toBe(true);
        const rebuilt = {
          latest: () => latestKey(prefix),
          manifest: () => parsed.kind === 'manifest' && manifestKey(prefix, parsed.commitSeq),
          snapshot: () =>
            parsed.kind === 'snapshot' && snapshotKey(prefix, parsed.generation, parsed.frames),
          archive: () =>
            parsed.kind === 'archive' && archiveKey(prefix, parsed.generation, parsed.n),
          segment: () =>
            parsed.kind === 'segment' &&
            (parsed.layout === 'object' ? segmentObjectKey : segmentKey)(
              prefix,
              parsed.generation,
              parsed.start,
              parsed.end,
            ),
          side: () =>
            parsed.kind === 'side' && sideKey(prefix, parsed.name, parsed.crc32, parsed.size),
        }[parsed.kind]();
        expect(rebuilt).toBe(key);
        if (parsed.kind === 'side') expect(isPlainName(parsed.name)).toBe(true);
      }),
      { numRuns: 2000 },
    );
    // Not vacuous: mutations that keep a key valid (or leave it unchanged) do parse.
    expect(parsedCount).toBeGreaterThan(200);
    for (const parse of [parseArchiveName]) {
      fc.assert(
        fc.property(fc.string({ maxLength: 30, unit: 'binary' }), (name) => {
          const n = parse(name);
          if (n !== undefined) expect(archiveName(n)).toBe(name);
        }),
        { numRuns: 500 },
      );
    }
  });

  it('meta: the escape check catches a parser that only looks for /manifest/', () => {
    const prefix = 'db/a';
    const naive = (key: string): number | undefined => {
      const match = /\/manifest\/([0-9]{20})\.json$/.exec(key);
      return match === null ? undefined : Number(match[1]);
    };
    const result = fc.check(
      fc.property(fc.string({ maxLength: 8, unit: 'grapheme-ascii' }), (head) => {
        const key = `${head}/manifest/00000000000000000001.json`;
        const value = naive(key);
        if (value !== undefined) expect(manifestKey(prefix, value)).toBe(key);
      }),
      { numRuns: 200 },
    );
    expect(result.failed).toBe(true);
    // The real parser passes the same property.
    fc.assert(
      fc.property(fc.string({ maxLength: 8, unit: 'grapheme-ascii' }), (head) => {
        const key = `${head}/manifest/00000000000000000001.json`;
        const value = parseManifestKey(prefix, key);
        if (value !== undefined) expect(manifestKey(prefix, value)).toBe(key);
      }),
      { numRuns: 200 },
    );
  });
});
