/**
 * Properties of the key layout (keys.ts) over generated inputs, hostile ones
 * included (any prefix, any string as a key, any number):
 *
 * - every constructor either throws KeyLayoutError or returns a key that
 *   lies under `${prefix}/`, is a valid key for every store, and parses back
 *   to exactly its arguments (`parse(build(x))` is `x`);
 * - every parse function, for any key, returns undefined or values that
 *   rebuild to that very key (never a different value), and throws only
 *   KeyLayoutError, only for an invalid prefix;
 * - nothing throws anything but KeyLayoutError.
 *
 * "Valid for every store" is checked against the rules `@x/store` documents
 * (its keys.ts), written out again below in another way. keys.ts uses those
 * very rules (`@x/store/keys`), so an oracle that called them would agree
 * with any bug in them; this one is independent.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { KeyLayoutError } from './errors.ts';
import {
  archiveKey,
  archiveName,
  archiveObjectKey,
  isPlainName,
  latestKey,
  MAX_KEY_BYTES,
  manifestKey,
  objectKey,
  type ParsedKey,
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
  prefixProblem,
  segmentGenerationPrefix,
  segmentKey,
  segmentObjectKey,
  sideKey,
  sideObjectKey,
  snapshotKey,
  snapshotObjectKey,
} from './keys.ts';

const MAX = Number.MAX_SAFE_INTEGER;
const RUNS = { numRuns: 400 };

// ------------------------------------------------------------ the oracle

/**
 * `@x/store`'s key rules (packages/store/src/keys.ts), restated: not empty;
 * well-formed Unicode; no control character (U+0000–U+001F, U+007F); no
 * backslash; at most 1024 bytes of UTF-8; no leading `/`; no empty, `.` or
 * `..` segment (so no `//` and no trailing `/`).
 */
function isStoreKey(key: string): boolean {
  if (key === '') return false;
  try {
    encodeURIComponent(key); // URIError for a lone surrogate
  } catch {
    return false;
  }
  if ([...key].some((char) => char.codePointAt(0)! < 0x20 || char === '\x7f')) return false;
  if (key.includes('\\')) return false;
  if (new TextEncoder().encode(key).byteLength > 1024) return false;
  return key.split('/').every((segment) => segment !== '' && segment !== '.' && segment !== '..');
}

/** A listing prefix: a store key followed by one `/`. */
function isListingPrefix(listed: string): boolean {
  return listed.endsWith('/') && isStoreKey(listed.slice(0, -1));
}

// ------------------------------------------------------------ generators

/** Pieces that break key rules or imitate the layout, to build hostile strings from. */
const HOSTILE_PIECES = [
  '',
  '/',
  '//',
  '.',
  '..',
  '\\',
  '\0',
  '\n',
  '\x1f',
  '\x7f',
  '\ud800',
  '\udfff',
  '😀',
  'é',
  'e\u0301',
  '\u00a0',
  '\u2028',
  '0',
  '00',
  '-',
  ' ',
  '%2F',
  'manifest',
  'snapshots',
  'archives',
  'wal',
  'side',
  'LATEST',
  '.json',
  '.snapshot',
  '.archive',
  '.segment',
  '.seg',
  'wal.',
  '00000000000000000001',
  '00009007199254740991',
  '00009007199254740992',
  '99999999999999999999',
  '0000000000000000001',
  '000000000000000000001',
  '0badf00d',
  'ABCDEF00',
  'x'.repeat(255),
  'x'.repeat(1000),
];

/** Any string: arbitrary code points, lone surrogates, and layout-like pieces glued together. */
const hostileString = fc.oneof(
  fc.string({ maxLength: 40, unit: 'binary' }),
  fc.string({ maxLength: 40, unit: 'grapheme-ascii' }),
  fc
    .array(
      fc.oneof(fc.constantFrom(...HOSTILE_PIECES), fc.string({ maxLength: 3, unit: 'binary' })),
      { maxLength: 10 },
    )
    .map((pieces) => pieces.join('')),
  fc.string({
    maxLength: 8,
    unit: fc.integer({ min: 0xd7f0, max: 0xe010 }).map((code) => String.fromCharCode(code)),
  }),
);

/** One path segment a valid prefix can have: any Unicode, none of the refused characters. */
const prefixSegment = fc.oneof(
  fc.stringMatching(/^[A-Za-z0-9_-][A-Za-z0-9._-]{0,11}$/),
  fc
    .string({ minLength: 1, maxLength: 12, unit: 'grapheme' })
    .filter((text) => isStoreKey(text) && !text.includes('/')),
  fc.constantFrom('manifest', 'wal', 'side', 'LATEST', '00000000000000000001', 'x'.repeat(200)),
);

/** A valid prefix (some of them so long that some or all keys under them exceed 1024 bytes). */
const validPrefix = fc
  .oneof(
    { weight: 4, arbitrary: fc.array(prefixSegment, { minLength: 1, maxLength: 6 }) },
    {
      weight: 1,
      arbitrary: fc
        .tuple(
          fc.array(prefixSegment, { minLength: 1, maxLength: 2 }),
          fc.integer({ min: 900, max: 1000 }),
        )
        .map(([segments, bytes]) => [...segments, 'y'.repeat(bytes)]),
    },
  )
  .map((segments) => segments.join('/'))
  .filter((prefix) => isStoreKey(prefix));

/** Any prefix: valid, valid with a hostile edit, or any string at all. */
const anyPrefix = fc.oneof(
  { weight: 2, arbitrary: validPrefix },
  // Valid segments with one refused segment among them (`a/../b`, `a//b`, `a/`, …).
  fc
    .tuple(
      fc.array(prefixSegment, { minLength: 1, maxLength: 4 }),
      fc.constantFrom('', '.', '..', 'a\\b', 'a\0', '\x7f', '\ud800', '\u001f'),
      fc.nat(),
    )
    .map(([segments, bad, at]) => {
      const position = at % (segments.length + 1);
      return [...segments.slice(0, position), bad, ...segments.slice(position)].join('/');
    }),
  fc
    .tuple(validPrefix, hostileString, fc.nat(), fc.nat({ max: 2 }))
    .map(([prefix, insert, at, drop]) => {
      const position = at % (prefix.length + 1);
      return prefix.slice(0, position) + insert + prefix.slice(position + drop);
    }),
  hostileString,
);

/** A number the layout accepts (0..2^53 − 1), edges weighted in. */
const validNumber = fc.oneof(
  fc.integer({ min: 0, max: MAX }),
  fc.constantFrom(0, 1, 9, 10, 99, 2 ** 32, MAX - 1, MAX),
);

/** Any number: valid ones, and negatives, fractions, 2^53 and beyond, NaN, infinities, -0. */
const anyNumber = fc.oneof(
  { weight: 4, arbitrary: validNumber },
  fc.double(),
  fc.integer({ min: -1000, max: -1 }),
  fc.constantFrom(2 ** 53, 2 ** 53 + 2, 1e21, 0.5, -0, Number.NaN, Infinity, -Infinity),
);

const validCrc = fc
  .integer({ min: 0, max: 0xffffffff })
  .map((n) => n.toString(16).padStart(8, '0'));
const anyCrc = fc.oneof(
  validCrc,
  hostileString,
  validCrc.map((crc) => crc.toUpperCase()),
);

const validName = fc
  .oneof(
    fc.string({ minLength: 1, maxLength: 40, unit: 'grapheme' }),
    fc.constantFrom('roles.json', '.hidden', 'a b', 'x'.repeat(255), '😀'.repeat(63)),
  )
  .filter((name) => isPlainName(name));
const anyName = fc.oneof(validName, hostileString);

// ------------------------------------------------------------ helpers

/** `-0` and `0` name the same integer: the layout writes both as `0…0`. */
function sameNumber(a: number, b: number): boolean {
  return a === b;
}

type Outcome<T> = { ok: true; value: T } | { ok: false; error: unknown };

function attempt<T>(call: () => T): Outcome<T> {
  try {
    return { ok: true, value: call() };
  } catch (error) {
    return { ok: false, error };
  }
}

/** The call threw, and what it threw is a KeyLayoutError (also across copies of the package). */
function expectKeyLayoutError(outcome: Outcome<unknown>, label: string): void {
  if (outcome.ok)
    throw new Error(`${label}: expected KeyLayoutError, returned ${String(outcome.value)}`);
  expect(KeyLayoutError.isInstance(outcome.error), `${label}: ${String(outcome.error)}`).toBe(true);
  expect(outcome.error).toBeInstanceOf(KeyLayoutError);
}

/** A constructor's key: KeyLayoutError, or a store key under `${prefix}/`. */
function builtKey(prefix: string, label: string, call: () => string): string | undefined {
  const outcome = attempt(call);
  if (!outcome.ok) {
    expectKeyLayoutError(outcome, label);
    return undefined;
  }
  const key = outcome.value;
  expect(typeof key).toBe('string');
  expect(isStoreKey(key), `${label} built ${JSON.stringify(key)}, not a store key`).toBe(true);
  expect(key.startsWith(`${prefix}/`), `${label}: ${key} is not under ${prefix}/`).toBe(true);
  expect(prefixProblem(prefix), `${label} accepted the prefix ${JSON.stringify(prefix)}`).toBe(
    undefined,
  );
  return key;
}

/** The key a parsed value names, built again. */
function rebuild(prefix: string, parsed: ParsedKey): string {
  switch (parsed.kind) {
    case 'latest':
      return latestKey(prefix);
    case 'manifest':
      return manifestKey(prefix, parsed.commitSeq);
    case 'snapshot':
      return (parsed.layout === 'object' ? snapshotObjectKey : snapshotKey)(
        prefix,
        parsed.generation,
        parsed.frames,
      );
    case 'archive':
      return (parsed.layout === 'object' ? archiveObjectKey : archiveKey)(
        prefix,
        parsed.generation,
        parsed.n,
      );
    case 'segment':
      return (parsed.layout === 'object' ? segmentObjectKey : segmentKey)(
        prefix,
        parsed.generation,
        parsed.start,
        parsed.end,
      );
    case 'side':
      return (parsed.layout === 'object' ? sideObjectKey : sideKey)(
        prefix,
        parsed.name,
        parsed.crc32,
        parsed.size,
      );
  }
}

/** Counts how often each branch of a property was taken, so that none is vacuous. */
class Tally {
  readonly counts = new Map<string, number>();
  add(label: string): void {
    this.counts.set(label, (this.counts.get(label) ?? 0) + 1);
  }
  get(label: string): number {
    return this.counts.get(label) ?? 0;
  }
}

// ------------------------------------------------------------ properties

describe('key layout, property-tested', () => {
  it('valid arguments: parse(build(x)) is x, and every built key is a store key under the prefix', () => {
    const tally = new Tally();
    fc.assert(
      fc.property(
        validPrefix,
        validNumber,
        validNumber,
        validNumber,
        validName,
        validCrc,
        (prefix, a, b, c, name, crc) => {
          const fits = (label: string, call: () => string): string | undefined => {
            const key = builtKey(prefix, label, call);
            // A constructor refuses valid arguments only when the key would be too long.
            if (key === undefined) {
              const error = attempt(call);
              expect(!error.ok && (error.error as KeyLayoutError).problem).toMatch(/longer than/);
              tally.add('too long');
            } else tally.add('built');
            return key;
          };
          const latest = fits('latestKey', () => latestKey(prefix));
          if (latest !== undefined) expect(parseKey(prefix, latest)).toEqual({ kind: 'latest' });

          const manifest = fits('manifestKey', () => manifestKey(prefix, a));
          if (manifest !== undefined) {
            expect(parseManifestKey(prefix, manifest)).toBe(a);
            expect(parseKey(prefix, manifest)).toEqual({ kind: 'manifest', commitSeq: a });
          }

          const snapshot = fits('snapshotKey', () => snapshotKey(prefix, a, b));
          if (snapshot !== undefined) {
            expect(parseSnapshotKey(prefix, snapshot)).toEqual({
              generation: a,
              frames: b,
              layout: 'raw',
            });
            expect(parseKey(prefix, snapshot)).toEqual({
              kind: 'snapshot',
              generation: a,
              frames: b,
              layout: 'raw',
            });
          }
          const snapshotObject = fits('snapshotObjectKey', () => snapshotObjectKey(prefix, a, b));
          if (snapshotObject !== undefined) {
            expect(parseKey(prefix, snapshotObject)).toEqual({
              kind: 'snapshot',
              generation: a,
              frames: b,
              layout: 'object',
            });
          }

          const archive = fits('archiveKey', () => archiveKey(prefix, a, b));
          if (archive !== undefined) {
            expect(parseArchiveKey(prefix, archive)).toEqual({
              generation: a,
              n: b,
              layout: 'raw',
            });
            expect(parseKey(prefix, archive)).toEqual({
              kind: 'archive',
              generation: a,
              n: b,
              layout: 'raw',
            });
          }

          const [start, end] = b < c ? [b, c] : c < b ? [c, b] : [b, b + 1];
          if (end <= MAX) {
            const segment = fits('segmentKey', () => segmentKey(prefix, a, start, end));
            if (segment !== undefined) {
              expect(parseSegmentKey(prefix, segment)).toEqual({
                generation: a,
                start,
                end,
                layout: 'raw',
              });
              expect(parseKey(prefix, segment)).toEqual({
                kind: 'segment',
                generation: a,
                start,
                end,
                layout: 'raw',
              });
            }
            const object = fits('segmentObjectKey', () => segmentObjectKey(prefix, a, start, end));
            if (object !== undefined) {
              expect(parseKey(prefix, object)).toEqual({
                kind: 'segment',
                generation: a,
                start,
                end,
                layout: 'object',
              });
            }
          }

          const side = fits('sideKey', () => sideKey(prefix, name, crc, c));
          if (side !== undefined) {
            expect(parseSideKey(prefix, side)).toEqual({
              name,
              crc32: crc,
              size: c,
              layout: 'raw',
            });
            expect(parseKey(prefix, side)).toEqual({
              kind: 'side',
              name,
              crc32: crc,
              size: c,
              layout: 'raw',
            });
          }

          const listed = attempt(() => segmentGenerationPrefix(prefix, a));
          if (listed.ok) {
            expect(isListingPrefix(listed.value), listed.value).toBe(true);
            expect(listed.value.startsWith(`${prefix}/`)).toBe(true);
            expect(parseSegmentGenerationPrefix(prefix, listed.value)).toBe(a);
          } else expectKeyLayoutError(listed, 'segmentGenerationPrefix');

          expect(parseArchiveName(archiveName(a))).toBe(a);
        },
      ),
      RUNS,
    );
    // Not vacuous: most keys are built, and the length limit is reached too.
    expect(tally.get('built')).toBeGreaterThan(RUNS.numRuns * 3);
    expect(tally.get('too long')).toBeGreaterThan(0);
  });

  it('any arguments: a constructor throws KeyLayoutError, or builds a store key that parses back to them', () => {
    const tally = new Tally();
    fc.assert(
      fc.property(
        anyPrefix,
        anyNumber,
        anyNumber,
        anyNumber,
        anyName,
        anyCrc,
        (prefix, a, b, c, name, crc) => {
          const manifest = builtKey(prefix, 'manifestKey', () => manifestKey(prefix, a));
          if (manifest !== undefined) {
            tally.add('manifest');
            expect(sameNumber(parseManifestKey(prefix, manifest)!, a)).toBe(true);
          }
          const snapshot = builtKey(prefix, 'snapshotKey', () => snapshotKey(prefix, a, b));
          if (snapshot !== undefined) {
            const parsed = parseSnapshotKey(prefix, snapshot)!;
            expect(sameNumber(parsed.generation, a) && sameNumber(parsed.frames, b)).toBe(true);
          }
          const snapshotObject = builtKey(prefix, 'snapshotObjectKey', () =>
            snapshotObjectKey(prefix, a, b),
          );
          if (snapshotObject !== undefined) {
            const parsed = parseSnapshotKey(prefix, snapshotObject)!;
            expect(
              sameNumber(parsed.generation, a) &&
                sameNumber(parsed.frames, b) &&
                parsed.layout === 'object',
            ).toBe(true);
          }
          const archive = builtKey(prefix, 'archiveKey', () => archiveKey(prefix, a, b));
          if (archive !== undefined) {
            const parsed = parseArchiveKey(prefix, archive)!;
            expect(sameNumber(parsed.generation, a) && sameNumber(parsed.n, b)).toBe(true);
          }
          const segment = builtKey(prefix, 'segmentKey', () => segmentKey(prefix, a, b, c));
          if (segment !== undefined) {
            tally.add('segment');
            const parsed = parseSegmentKey(prefix, segment)!;
            expect(b < c).toBe(true);
            expect(
              sameNumber(parsed.generation, a) &&
                sameNumber(parsed.start, b) &&
                sameNumber(parsed.end, c),
            ).toBe(true);
          }
          const object = builtKey(prefix, 'segmentObjectKey', () =>
            segmentObjectKey(prefix, a, b, c),
          );
          if (object !== undefined) {
            tally.add('segment object');
            const parsed = parseSegmentKey(prefix, object)!;
            expect(b < c && parsed.layout === 'object').toBe(true);
            expect(
              sameNumber(parsed.generation, a) &&
                sameNumber(parsed.start, b) &&
                sameNumber(parsed.end, c),
            ).toBe(true);
          }
          const side = builtKey(prefix, 'sideKey', () => sideKey(prefix, name, crc, c));
          if (side !== undefined) {
            tally.add('side');
            const parsed = parseSideKey(prefix, side)!;
            expect(parsed.name).toBe(name);
            expect(parsed.crc32).toBe(crc);
            expect(sameNumber(parsed.size, c)).toBe(true);
            expect(isPlainName(name)).toBe(true);
          }
          const latest = builtKey(prefix, 'latestKey', () => latestKey(prefix));
          if (latest === undefined) {
            // Refused: the prefix is invalid, or `${prefix}/LATEST` is too long.
            tally.add('refused prefix');
            const tooLong = new TextEncoder().encode(`${prefix}/LATEST`).byteLength > 1024;
            expect(prefixProblem(prefix) !== undefined || tooLong, JSON.stringify(prefix)).toBe(
              true,
            );
          }
          const listed = attempt(() => segmentGenerationPrefix(prefix, a));
          if (listed.ok) {
            expect(isListingPrefix(listed.value)).toBe(true);
            expect(sameNumber(parseSegmentGenerationPrefix(prefix, listed.value)!, a)).toBe(true);
          } else expectKeyLayoutError(listed, 'segmentGenerationPrefix');
          const named = attempt(() => archiveName(a));
          if (named.ok) expect(sameNumber(parseArchiveName(named.value)!, a)).toBe(true);
          else expectKeyLayoutError(named, 'archiveName');
        },
      ),
      { numRuns: 1500 },
    );
    // Not vacuous: hostile arguments are refused, and some arguments still make keys.
    expect(tally.get('refused prefix')).toBeGreaterThan(100);
    for (const kind of ['manifest', 'segment', 'segment object', 'side'])
      expect(tally.get(kind), kind).toBeGreaterThan(50);
  });

  it('objectKey: KeyLayoutError, or the prefix, `/` and `relative` as given (a store key or a listing prefix)', () => {
    let built = 0;
    fc.assert(
      fc.property(
        anyPrefix,
        fc.oneof(
          hostileString,
          validPrefix,
          validPrefix.map((p) => `${p}/`),
        ),
        (prefix, relative) => {
          const outcome = attempt(() => objectKey(prefix, relative));
          if (!outcome.ok) return expectKeyLayoutError(outcome, 'objectKey');
          built++;
          expect(outcome.value).toBe(`${prefix}/${relative}`);
          if (relative.endsWith('/')) expect(isListingPrefix(outcome.value)).toBe(true);
          else expect(isStoreKey(outcome.value)).toBe(true);
          expect(prefixProblem(prefix)).toBe(undefined);
        },
      ),
      { numRuns: 1000 },
    );
    expect(built).toBeGreaterThan(100);
  });

  it('any key under any prefix: undefined, or values that rebuild to that very key; only an invalid prefix throws, with KeyLayoutError', () => {
    /** Keys near the layout: built keys with a hostile edit, and hostile tails under the prefix. */
    const keyNear = (prefix: string) => {
      const builders = fc.constantFrom(
        () => latestKey(prefix),
        () => manifestKey(prefix, 42),
        () => snapshotKey(prefix, 1, 2),
        () => snapshotObjectKey(prefix, 1, 2),
        () => archiveKey(prefix, MAX, 0),
        () => archiveObjectKey(prefix, MAX, 0),
        () => segmentKey(prefix, 1, 2, 3),
        () => segmentObjectKey(prefix, 1, 2, 3),
        () => sideKey(prefix, 'roles.json', '0badf00d', 3),
        () => sideObjectKey(prefix, 'roles.json', '0badf00d', 3),
        () => segmentGenerationPrefix(prefix, 7),
      );
      return fc.oneof(
        hostileString,
        hostileString.map((tail) => `${prefix}/${tail}`),
        // Unchanged, so that each kind is reached (and must parse).
        builders.map((build) => {
          const key = attempt(build);
          return key.ok ? key.value : `${prefix}/LATEST`;
        }),
        // One character of the layout's part deleted, doubled or flipped in case:
        // a number one digit short or long, a hex digit in upper case, a
        // separator gone or doubled.
        {
          weight: 4,
          arbitrary: fc
            .tuple(builders, fc.nat(), fc.constantFrom('delete', 'double', 'case'))
            .map(([build, at, edit]) => {
              const key = attempt(build);
              const base = key.ok ? key.value : `${prefix}/manifest/00000000000000000042.json`;
              const tail = Math.max(1, base.length - prefix.length);
              const position = base.length - 1 - (at % tail);
              const char = base[position]!;
              const replacement =
                edit === 'delete'
                  ? ''
                  : edit === 'double'
                    ? char + char
                    : char === char.toUpperCase()
                      ? char.toLowerCase()
                      : char.toUpperCase();
              return base.slice(0, position) + replacement + base.slice(position + 1);
            }),
        },
        fc
          .tuple(builders, hostileString, fc.nat(), fc.nat({ max: 3 }))
          .map(([build, insert, at, drop]) => {
            const key = attempt(build);
            const base = key.ok ? key.value : `${prefix}/manifest/00000000000000000042.json`;
            const position = at % (base.length + 1);
            return base.slice(0, position) + insert + base.slice(position + drop);
          }),
      );
    };
    const tally = new Tally();
    fc.assert(
      fc.property(
        anyPrefix.chain((prefix) => fc.tuple(fc.constant(prefix), keyNear(prefix))),
        ([prefix, key]) => {
          const parses: [string, () => unknown][] = [
            ['parseKey', () => parseKey(prefix, key)],
            ['parseManifestKey', () => parseManifestKey(prefix, key)],
            ['parseSnapshotKey', () => parseSnapshotKey(prefix, key)],
            ['parseArchiveKey', () => parseArchiveKey(prefix, key)],
            ['parseSegmentKey', () => parseSegmentKey(prefix, key)],
            ['parseSideKey', () => parseSideKey(prefix, key)],
            ['parseSegmentGenerationPrefix', () => parseSegmentGenerationPrefix(prefix, key)],
          ];
          if (prefixProblem(prefix) !== undefined) {
            // A caller's bug, said as such: never a silent undefined, never another error.
            tally.add('invalid prefix');
            for (const [label, parse] of parses) expectKeyLayoutError(attempt(parse), label);
            return;
          }
          for (const [label, parse] of parses) {
            const outcome = attempt(parse);
            expect(outcome.ok, `${label} threw ${outcome.ok ? '' : String(outcome.error)}`).toBe(
              true,
            );
          }
          const parsed = parseKey(prefix, key);
          if (parsed !== undefined) {
            tally.add(
              parsed.kind === 'segment' || parsed.kind === 'archive' || parsed.kind === 'side'
                ? `${parsed.kind} ${parsed.layout}`
                : parsed.kind,
            );
            expect(rebuild(prefix, parsed)).toBe(key);
            expect(isStoreKey(key)).toBe(true);
          }
          const generation = parseSegmentGenerationPrefix(prefix, key);
          if (generation !== undefined) {
            tally.add('generation prefix');
            expect(segmentGenerationPrefix(prefix, generation)).toBe(key);
          }
          // Each specific parser agrees with parseKey.
          expect(parseManifestKey(prefix, key)).toBe(
            parsed?.kind === 'manifest' ? parsed.commitSeq : undefined,
          );
          expect(parseSegmentKey(prefix, key) !== undefined).toBe(parsed?.kind === 'segment');
          expect(parseSideKey(prefix, key) !== undefined).toBe(parsed?.kind === 'side');
        },
      ),
      { numRuns: 3000 },
    );
    // Not vacuous: every kind of key is reached through hostile edits that keep it valid.
    expect(tally.get('invalid prefix')).toBeGreaterThan(100);
    for (const kind of [
      'latest',
      'manifest',
      'snapshot',
      'archive raw',
      'archive object',
      'segment raw',
      'segment object',
      'side raw',
      'side object',
      'generation prefix',
    ])
      expect(tally.get(kind), kind).toBeGreaterThan(5);
  });

  it('any string: parsePad20 gives undefined, or the number pad20 writes as it', () => {
    let parsed = 0;
    fc.assert(
      fc.property(
        fc.oneof(
          hostileString,
          validNumber.map((n) => pad20(n)),
          fc
            .tuple(validNumber, fc.integer({ min: 17, max: 23 }))
            .map(([n, width]) => String(n).padStart(width, '0')),
          fc.stringMatching(/^[0-9]{18,22}$/),
        ),
        (text) => {
          const value = parsePad20(text);
          if (value === undefined) return;
          parsed++;
          expect(pad20(value)).toBe(text);
        },
      ),
      { numRuns: 1000 },
    );
    expect(parsed).toBeGreaterThan(100);
  });

  it('any archive file name: undefined, or the number whose name it is', () => {
    let parsed = 0;
    fc.assert(
      fc.property(
        fc.oneof(
          hostileString,
          hostileString.map((middle) => `wal.${middle}.archive`),
          anyNumber.map((n) => `wal.${String(n)}.archive`),
          validNumber.map((n) => `wal.${String(n).padStart(3, '0')}.archive`),
        ),
        (name) => {
          const n = parseArchiveName(name);
          if (n === undefined) return;
          parsed++;
          expect(archiveName(n)).toBe(name);
        },
      ),
      { numRuns: 1000 },
    );
    expect(parsed).toBeGreaterThan(50);
  });

  it('the oracle agrees with the layout on what a valid prefix is', () => {
    fc.assert(
      fc.property(anyPrefix, (prefix) => {
        expect(prefixProblem(prefix) === undefined, JSON.stringify(prefix)).toBe(
          isStoreKey(prefix),
        );
      }),
      { numRuns: 2000 },
    );
    expect(MAX_KEY_BYTES).toBe(1024);
  });
});
