import { crc32, zstdCompressSync } from 'node:zlib';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  decodeSegmentObject,
  encodeSegmentObject,
  encodeSegmentObjectAsync,
  readSegmentObjectHeader,
  SEGMENT_OBJECT_MAGIC,
  SEGMENT_OBJECT_MAX_HEADER_BYTES,
  SegmentObjectError,
  type SegmentObjectFields,
  segmentObjectFieldsOf,
} from './segment-object.ts';
import { decodeSegmentObjectStream } from './segment-object-stream.ts';

const FIELDS: SegmentObjectFields = {
  codec: 'zstd',
  kind: 'segment',
  generation: 7,
  start: 4096,
  end: 4096 + 5,
  commits: 1,
  previousCrc32: 0xdeadbeef,
  lineage: 'lin-1',
};

const HELLO = new TextEncoder().encode('hello');

/** A page-like body: small edits to mostly repeated bytes, as a SQLite commit log has. */
function pageLike(bytes: number): Uint8Array {
  const body = new Uint8Array(bytes);
  for (let i = 0; i < bytes; i++) body[i] = (i * 31) % 251 < 200 ? 0 : i & 0xff;
  return body;
}

/** Rewrites the header CRC after an edit, so a test reaches the check behind it. */
function refixHeaderCrc(bytes: Uint8Array): Uint8Array {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const headerBytes = view.getUint16(4, true);
  view.setUint32(headerBytes - 4, crc32(bytes.subarray(0, headerBytes - 4)), true);
  return bytes;
}

function edited(bytes: Uint8Array, edit: (copy: Uint8Array, view: DataView) => void): Uint8Array {
  const copy = new Uint8Array(bytes);
  edit(copy, new DataView(copy.buffer));
  return copy;
}

function withByte(bytes: Uint8Array, at: number, value: number): Uint8Array {
  const copy = new Uint8Array(bytes);
  copy[at] = value;
  return copy;
}

function flipBit(bytes: Uint8Array, at: number): Uint8Array {
  return withByte(bytes, at, bytes[at]! ^ 1);
}

function refusal(run: () => unknown): SegmentObjectError {
  try {
    run();
  } catch (error) {
    expect(SegmentObjectError.isInstance(error)).toBe(true);
    return error as SegmentObjectError;
  }
  throw new Error('expected a SegmentObjectError, got a value');
}

describe('encodeSegmentObject / decodeSegmentObject', () => {
  it('round-trips a zstd segment and says what it holds', () => {
    const body = pageLike(64 * 1024);
    const stored = encodeSegmentObject(body, { ...FIELDS, end: FIELDS.start + body.length });
    expect(stored.length).toBeLessThan(body.length / 4);
    const { header, body: decoded } = decodeSegmentObject(stored);
    expect(decoded).toEqual(body);
    expect(header).toEqual({
      version: 1,
      codec: 'zstd',
      kind: 'segment',
      generation: 7,
      start: 4096,
      end: 4096 + body.length,
      commits: 1,
      previousCrc32: 0xdeadbeef,
      bodyCrc32: crc32(body),
      lineage: 'lin-1',
      headerBytes: 53 + 5 + 4,
      decodedLength: body.length,
      chainEndCrc32: null,
      encryption: 'none',
      recipients: [],
    });
  });

  it('the off-thread encoder writes an envelope that decodes as the synchronous one does, and refuses the same fields', async () => {
    const body = pageLike(256 * 1024);
    const fields = { ...FIELDS, end: FIELDS.start + body.length };
    // Not byte for byte: zstd's streaming encoder cuts blocks elsewhere.
    const off = decodeSegmentObject(await encodeSegmentObjectAsync(body, fields));
    const on = decodeSegmentObject(encodeSegmentObject(body, fields));
    expect(off.body).toEqual(body);
    expect(off.header).toEqual(on.header);
    const identity = { ...fields, codec: 'identity' as const };
    expect(await encodeSegmentObjectAsync(body, identity)).toEqual(
      encodeSegmentObject(body, identity),
    );
    const wrong = await encodeSegmentObjectAsync(HELLO, { ...FIELDS, lineage: 'a b' }).then(
      () => null,
      (error: unknown) => error,
    );
    expect(wrong).toBeInstanceOf(SegmentObjectError);
    expect((wrong as SegmentObjectError).field).toBe('lineage');
  });

  it('round-trips identity segments and snapshots for any body and fields', () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ minLength: 1, maxLength: 2000 }),
        fc.constantFrom('identity' as const, 'zstd' as const),
        fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER - 2000 }),
        fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }),
        fc.stringMatching(/^[A-Za-z0-9._-]{1,128}$/),
        fc.boolean(),
        (body, codec, start, generation, lineage, snapshot) => {
          const fields: SegmentObjectFields = snapshot
            ? {
                codec,
                kind: 'snapshot',
                generation,
                start: 0,
                end: body.length,
                commits: 3,
                previousCrc32: 0,
                lineage,
              }
            : {
                codec,
                kind: 'segment',
                generation,
                start,
                end: start + body.length,
                commits: 2,
                previousCrc32: 9,
                lineage,
              };
          const stored = encodeSegmentObject(body, fields);
          const { header, body: decoded } = decodeSegmentObject(stored);
          expect(decoded).toEqual(body);
          expect(header).toMatchObject(fields);
          expect(readSegmentObjectHeader(stored.subarray(0, header.headerBytes))).toEqual(header);
        },
      ),
      { numRuns: 200 },
    );
  });

  it('writes a given body CRC as given, so a wrong one fails the decode check', () => {
    const right = encodeSegmentObject(HELLO, FIELDS, { bodyCrc32: crc32(HELLO) });
    expect(right).toEqual(encodeSegmentObject(HELLO, FIELDS));
    const wrong = encodeSegmentObject(HELLO, FIELDS, { bodyCrc32: (crc32(HELLO) ^ 1) >>> 0 });
    expect(readSegmentObjectHeader(wrong).bodyCrc32).toBe((crc32(HELLO) ^ 1) >>> 0);
    expect(refusal(() => decodeSegmentObject(wrong)).field).toBe('bodyCrc32');
    expect(refusal(() => encodeSegmentObject(HELLO, FIELDS, { bodyCrc32: -1 })).field).toBe(
      'bodyCrc32',
    );
  });

  it('an identity body is stored as is after the header', () => {
    const stored = encodeSegmentObject(HELLO, { ...FIELDS, codec: 'identity' });
    expect(Buffer.from(stored.subarray(62)).toString()).toBe('hello');
  });

  it('writes this exact header (fixed vector)', () => {
    const stored = encodeSegmentObject(HELLO, { ...FIELDS, codec: 'identity' });
    expect(Buffer.from(stored.subarray(0, 62)).toString('hex')).toBe(
      [
        '424b4f31', // magic BKO1
        '3e00', // header length 62
        '01', // version
        '00', // codec identity
        '00', // encryption none
        '01', // kind segment
        '0000', // reserved
        '0700000000000000', // generation 7
        '0010000000000000', // start 4096
        '0510000000000000', // end 4101
        '0100000000000000', // commits 1
        'efbeadde', // previous 0xdeadbeef
        '86a61036', // CRC-32 of "hello"
        '05', // lineage length
        '6c696e2d31', // "lin-1"
        HEADER_CRC_HEX,
      ].join(''),
    );
    expect(readSegmentObjectHeader(stored).bodyCrc32).toBe(0x3610a686);
  });

  it('refuses to write invalid fields, naming the field', () => {
    expect(
      refusal(() => encodeSegmentObject(HELLO, { ...FIELDS, end: FIELDS.start + 4 })).field,
    ).toBe('end');
    expect(refusal(() => encodeSegmentObject(HELLO, { ...FIELDS, lineage: 'a b' })).field).toBe(
      'lineage',
    );
    expect(
      refusal(() => encodeSegmentObject(HELLO, { ...FIELDS, lineage: 'x'.repeat(129) })).field,
    ).toBe('lineage');
    expect(refusal(() => encodeSegmentObject(HELLO, { ...FIELDS, generation: -1 })).field).toBe(
      'generation',
    );
    expect(
      refusal(() => encodeSegmentObject(HELLO, { ...FIELDS, previousCrc32: 2 ** 32 })).field,
    ).toBe('previousCrc32');
    expect(
      refusal(() => encodeSegmentObject(HELLO, { ...FIELDS, codec: 'lz4' as unknown as 'zstd' }))
        .field,
    ).toBe('codec');
    expect(
      refusal(() => encodeSegmentObject(new Uint8Array(0), { ...FIELDS, end: FIELDS.start })).field,
    ).toBe('end');
    expect(
      refusal(() =>
        encodeSegmentObject(HELLO, {
          ...FIELDS,
          kind: 'snapshot',
          start: 0,
          end: 5,
          previousCrc32: 1,
        }),
      ).field,
    ).toBe('previousCrc32');
  });
});

describe('reading refuses a bad object, naming the field', () => {
  const good = encodeSegmentObject(HELLO, FIELDS);
  const headerBytes = 62;

  const cases: [string, () => Uint8Array, string][] = [
    ['bad magic', () => withByte(good, 0, 0x43), 'magic'],
    ['a raw segment (no envelope)', () => HELLO, 'magic'],
    ['an empty object', () => new Uint8Array(0), 'magic'],
    [
      'header length too small',
      () => edited(good, (_, v) => v.setUint16(4, 20, true)),
      'headerBytes',
    ],
    [
      'header length too large',
      () => edited(good, (_, v) => v.setUint16(4, SEGMENT_OBJECT_MAX_HEADER_BYTES + 1, true)),
      'headerBytes',
    ],
    ['a truncated header', () => good.subarray(0, headerBytes - 1), 'headerBytes'],
    ['header CRC mismatch', () => flipBit(good, 13), 'headerCrc32'],
    ['unknown version', () => refixHeaderCrc(withByte(good, 6, 2)), 'version'],
    ['unknown codec', () => refixHeaderCrc(withByte(good, 7, 2)), 'codec'],
    ['an unknown encryption', () => refixHeaderCrc(withByte(good, 8, 2)), 'encryption'],
    ['kind 2 (compacted) of one commit', () => refixHeaderCrc(withByte(good, 9, 2)), 'commits'],
    [
      'kind 2 (compacted) without its fields',
      () => refixHeaderCrc(edited(withByte(good, 9, 2), (_, v) => v.setBigUint64(36, 5n, true))),
      'headerBytes',
    ],
    ['unknown kind', () => refixHeaderCrc(withByte(good, 9, 0)), 'kind'],
    [
      'generation beyond 2^53 − 1',
      () => refixHeaderCrc(edited(good, (_, v) => v.setBigUint64(12, 2n ** 53n, true))),
      'generation',
    ],
    [
      'end before start',
      () => refixHeaderCrc(edited(good, (_, v) => v.setBigUint64(28, 10n, true))),
      'end',
    ],
    ['lineage length 0', () => refixHeaderCrc(withByte(good, 52, 0)), 'lineage'],
    ['lineage longer than the header', () => refixHeaderCrc(withByte(good, 52, 6)), 'lineage'],
    ['lineage outside the alphabet', () => refixHeaderCrc(withByte(good, 53, 0x2f)), 'lineage'],
  ];

  for (const [name, make, field] of cases) {
    it(`${name}: ${field}`, () => {
      const bytes = make();
      const headerError = refusal(() => readSegmentObjectHeader(bytes));
      expect(headerError.field).toBe(field);
      expect(headerError.message).toContain(field);
      expect(refusal(() => decodeSegmentObject(bytes)).field).toBe(field);
    });
  }

  it('a body that does not decompress: body', () => {
    const bytes = edited(good, (b) => b.fill(0x55, headerBytes));
    expect(readSegmentObjectHeader(bytes).codec).toBe('zstd');
    expect(refusal(() => decodeSegmentObject(bytes)).field).toBe('body');
  });

  it('a truncated zstd body: body', () => {
    const bytes = encodeSegmentObject(pageLike(8192), { ...FIELDS, end: FIELDS.start + 8192 });
    expect(refusal(() => decodeSegmentObject(bytes.subarray(0, bytes.length - 3))).field).toBe(
      'body',
    );
  });

  /** An envelope around `stored` whose header claims `claimed` decoded bytes of `real`. */
  function withBody(real: Uint8Array, claimed: number): Uint8Array {
    const header = encodeSegmentObject(new Uint8Array(claimed), {
      ...FIELDS,
      end: FIELDS.start + claimed,
    }).subarray(0, headerBytes);
    const out = new Uint8Array(Buffer.concat([header, zstdCompressSync(real)]));
    new DataView(out.buffer).setUint32(48, crc32(real), true);
    return refixHeaderCrc(out);
  }

  it('a body that decompresses to fewer bytes than end − start: end', () => {
    const error = refusal(() => decodeSegmentObject(withBody(pageLike(1000), 1001)));
    expect(error.field).toBe('end');
    expect(error.problem).toContain('1000 bytes');
  });

  it('a body that decompresses to more bytes than end − start (a bomb): end, bounded output', () => {
    // 16 MiB of zeros compress to a few hundred bytes; the header claims 16 bytes.
    const bomb = withBody(new Uint8Array(16 * 1024 * 1024), 16);
    expect(bomb.length).toBeLessThan(64 * 1024);
    const error = refusal(() => decodeSegmentObject(bomb));
    expect(error.field).toBe('end');
    expect(error.problem).toContain('more than');
  });

  it('an identity body of the wrong length: end', () => {
    const identity = encodeSegmentObject(HELLO, { ...FIELDS, codec: 'identity' });
    expect(
      refusal(() => decodeSegmentObject(identity.subarray(0, identity.length - 1))).field,
    ).toBe('end');
  });

  it('a decoded body whose CRC is not the header’s: bodyCrc32', () => {
    const bytes = refixHeaderCrc(edited(good, (_, v) => v.setUint32(48, 0x12345678, true)));
    expect(readSegmentObjectHeader(bytes).bodyCrc32).toBe(0x12345678);
    expect(refusal(() => decodeSegmentObject(bytes)).field).toBe('bodyCrc32');
    const identity = encodeSegmentObject(HELLO, { ...FIELDS, codec: 'identity' });
    const flipped = flipBit(identity, headerBytes);
    expect(refusal(() => decodeSegmentObject(flipped)).field).toBe('bodyCrc32');
  });

  it('skips header fields it does not know between the lineage and the header CRC', () => {
    const longer = new Uint8Array(good.length + 3);
    longer.set(good.subarray(0, 58), 0);
    longer.set([9, 9, 9], 58);
    longer.set(good.subarray(58), 61);
    new DataView(longer.buffer).setUint16(4, headerBytes + 3, true);
    refixHeaderCrc(longer);
    const { header, body } = decodeSegmentObject(longer);
    expect(header.headerBytes).toBe(headerBytes + 3);
    expect(Buffer.from(body).toString()).toBe('hello');
  });

  it('the magic constant is BKO1', () => {
    expect(Buffer.from(SEGMENT_OBJECT_MAGIC).toString('latin1')).toBe('BKO1');
  });

  it('never throws anything but SegmentObjectError for random bytes', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), fc.boolean(), (noise, withMagic) => {
        const bytes = withMagic
          ? new Uint8Array(Buffer.concat([SEGMENT_OBJECT_MAGIC, noise]))
          : noise;
        try {
          decodeSegmentObject(bytes);
        } catch (error) {
          expect(SegmentObjectError.isInstance(error)).toBe(true);
        }
      }),
    );
  });
});

/** CRC-32 of the 58 bytes above, little-endian (computed independently with Python's zlib.crc32). */
const HEADER_CRC_HEX = '20cedd32';

describe('a compacted object (kind 2)', () => {
  const merged = pageLike(20 * 1024);
  const COMPACTED: SegmentObjectFields = {
    ...FIELDS,
    kind: 'compacted',
    start: 4096,
    end: 4096 + 90_000,
    commits: 12,
    decodedLength: merged.length,
    chainEndCrc32: 0x01020304,
  };

  it('stands for a log range longer than its body, and names its chain end', () => {
    const stored = encodeSegmentObject(merged, COMPACTED);
    const { header, body } = decodeSegmentObject(stored);
    expect(body).toEqual(merged);
    expect(header).toMatchObject({
      kind: 'compacted',
      start: 4096,
      end: 4096 + 90_000,
      commits: 12,
      decodedLength: merged.length,
      chainEndCrc32: 0x01020304,
      previousCrc32: 0xdeadbeef,
      headerBytes: 53 + 5 + 12 + 4,
    });
    expect(stored[9]).toBe(2);
  });

  it('re-encodes from its header: segmentObjectFieldsOf gives the fields of every kind', () => {
    for (const [fields, body] of [
      [COMPACTED, merged],
      [FIELDS, HELLO],
      [{ ...FIELDS, kind: 'snapshot', start: 0, end: 5, previousCrc32: 0 }, HELLO],
    ] as const) {
      const { header } = decodeSegmentObject(encodeSegmentObject(body, fields));
      const again = decodeSegmentObject(encodeSegmentObject(body, segmentObjectFieldsOf(header)));
      expect(again.header).toEqual(header);
    }
  });

  it('streams like the other kinds, bounded by its decoded length', async () => {
    const stored = encodeSegmentObject(merged, COMPACTED);
    const { header, body } = await decodeSegmentObjectStream(
      (async function* () {
        yield stored;
      })(),
    );
    const chunks: Uint8Array[] = [];
    for await (const chunk of body) chunks.push(chunk);
    expect(header.decodedLength).toBe(merged.length);
    expect(Buffer.concat(chunks)).toEqual(Buffer.from(merged));
  });

  it('refuses to be written without its fields, or with a wrong decoded length', () => {
    const { decodedLength: _d, ...noLength } = COMPACTED;
    expect(() => encodeSegmentObject(merged, noLength)).toThrow(/decodedLength/);
    const { chainEndCrc32: _c, ...noChainEnd } = COMPACTED;
    expect(() => encodeSegmentObject(merged, noChainEnd)).toThrow(/chainEndCrc32/);
    expect(() => encodeSegmentObject(merged, { ...COMPACTED, decodedLength: 5 })).toThrow(
      /decodedLength: 5 is not the body's length/,
    );
    expect(() => encodeSegmentObject(merged, { ...COMPACTED, commits: 1 })).toThrow(/commits/);
  });

  it('the other kinds refuse its fields, and are written as before', () => {
    expect(() => encodeSegmentObject(HELLO, { ...FIELDS, decodedLength: 5 })).toThrow(
      /decodedLength: only a compacted object/,
    );
    expect(() => encodeSegmentObject(HELLO, { ...FIELDS, chainEndCrc32: 1 })).toThrow(
      /chainEndCrc32: only a compacted object/,
    );
    expect(encodeSegmentObject(HELLO, { ...FIELDS, codec: 'identity' }).length).toBe(
      53 + 5 + 4 + HELLO.length,
    );
  });

  it('a body that decodes to more or fewer bytes than its decoded length is refused', () => {
    const stored = encodeSegmentObject(merged, COMPACTED);
    const headerBytes = 53 + 5 + 12 + 4;
    const longer = refixHeaderCrc(
      edited(stored, (_, v) => v.setBigUint64(53 + 5, BigInt(merged.length - 1), true)),
    );
    expect(() => decodeSegmentObject(longer)).toThrow(/decodedLength: body decodes to more than/);
    const shorter = refixHeaderCrc(
      edited(stored, (_, v) => v.setBigUint64(53 + 5, BigInt(merged.length + 7), true)),
    );
    expect(() => decodeSegmentObject(shorter)).toThrow(/decodedLength/);
    const garbage = Uint8Array.from(stored);
    garbage.fill(0x55, headerBytes);
    expect(() => decodeSegmentObject(garbage)).toThrow(/body: does not decode as zstd/);
  });
});
