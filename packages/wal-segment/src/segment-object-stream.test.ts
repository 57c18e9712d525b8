import { crc32, zstdCompressSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import {
  encodeSegmentObject,
  SegmentObjectError,
  type SegmentObjectFields,
} from './segment-object.ts';
import { decodeSegmentObjectStream } from './segment-object-stream.ts';

const SNAPSHOT: SegmentObjectFields = {
  codec: 'zstd',
  kind: 'snapshot',
  generation: 3,
  start: 0,
  end: 0,
  commits: 9,
  previousCrc32: 0,
  lineage: 'lin',
};

/** The header length of SNAPSHOT's envelope: 57 fixed bytes and the lineage. */
const H = 57 + SNAPSHOT.lineage.length;

/** A database-like body: mostly repeated pages with small differences. */
function pages(bytes: number): Uint8Array {
  const body = new Uint8Array(bytes);
  for (let i = 0; i < bytes; i += 4096) body[i] = (i / 4096) & 0xff;
  return body;
}

/** `bytes` as a stream of chunks of `size`. */
async function* chunks(bytes: Uint8Array, size: number): AsyncGenerator<Uint8Array> {
  for (let at = 0; at < bytes.byteLength; at += size) yield bytes.subarray(at, at + size);
}

async function collect(body: AsyncIterable<Uint8Array>): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  for await (const chunk of body) parts.push(chunk);
  return new Uint8Array(Buffer.concat(parts));
}

async function refusal(run: () => Promise<unknown>): Promise<SegmentObjectError> {
  const error = await run().then(
    () => undefined,
    (caught: unknown) => caught,
  );
  expect(SegmentObjectError.isInstance(error), String(error)).toBe(true);
  return error as SegmentObjectError;
}

/** The header of an object claiming `claimed` decoded bytes around zstd of `real`. */
function mismatched(real: Uint8Array, claimed: number): Uint8Array {
  const header = encodeSegmentObject(new Uint8Array(claimed), { ...SNAPSHOT, end: claimed }).slice(
    0,
    H,
  );
  const view = new DataView(header.buffer);
  view.setUint32(48, crc32(real), true);
  view.setUint32(H - 4, crc32(header.subarray(0, H - 4)), true);
  return new Uint8Array(Buffer.concat([header, zstdCompressSync(real)]));
}

describe('decodeSegmentObjectStream', () => {
  it('decodes any chunking of a zstd or identity object to the body', async () => {
    const body = pages(1024 * 1024 + 123);
    for (const codec of ['zstd', 'identity'] as const) {
      const stored = encodeSegmentObject(body, { ...SNAPSHOT, codec, end: body.length });
      for (const size of [1, 7, 61, 4096, stored.length]) {
        if (size === 1 && codec === 'identity') continue; // a million awaits: covered by 7
        const { header, body: decoded } = await decodeSegmentObjectStream(chunks(stored, size));
        expect(header).toMatchObject({ ...SNAPSHOT, codec, end: body.length });
        expect(await collect(decoded)).toEqual(body);
      }
    }
  });

  it('refuses a bad header before reading the body', async () => {
    const stored = encodeSegmentObject(pages(8192), { ...SNAPSHOT, end: 8192 });
    const flipped = Uint8Array.from(stored);
    flipped[13] = flipped[13]! ^ 1;
    expect((await refusal(() => decodeSegmentObjectStream(chunks(flipped, 10)))).field).toBe(
      'headerCrc32',
    );
    expect(
      (await refusal(() => decodeSegmentObjectStream(chunks(stored.subarray(0, 30), 10)))).field,
    ).toBe('headerBytes');
  });

  it('stops a decompression bomb at end − start, naming end', async () => {
    // 64 MiB of zeros claimed as 4 KiB: refused after at most one chunk past the claim.
    const bomb = mismatched(new Uint8Array(64 * 1024 * 1024), 4096);
    const { body } = await decodeSegmentObjectStream(chunks(bomb, 1024));
    let handedOut = 0;
    const error = await refusal(async () => {
      for await (const chunk of body) handedOut += chunk.byteLength;
    });
    expect(error.field).toBe('end');
    expect(handedOut).toBeLessThanOrEqual(4096);
  });

  it('refuses a body that decodes short, or to other bytes, or does not decode', async () => {
    const real = pages(10_000);
    const short = mismatched(real, 10_001);
    const shortError = await refusal(async () =>
      collect((await decodeSegmentObjectStream(chunks(short, 999))).body),
    );
    expect(shortError.field, shortError.problem).toBe('end');
    const other = Uint8Array.from(mismatched(real, 10_000));
    new DataView(other.buffer).setUint32(48, 1, true);
    new DataView(other.buffer).setUint32(H - 4, crc32(other.subarray(0, H - 4)), true);
    expect(
      (
        await refusal(async () =>
          collect((await decodeSegmentObjectStream(chunks(other, 999))).body),
        )
      ).field,
    ).toBe('bodyCrc32');
    const garbage = Uint8Array.from(mismatched(real, 10_000));
    garbage.fill(0x55, H);
    expect(
      (
        await refusal(async () =>
          collect((await decodeSegmentObjectStream(chunks(garbage, 999))).body),
        )
      ).field,
    ).toBe('body');
  });
});
