import { randomBytes } from 'node:crypto';
import { crc32 } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import {
  decodeSegmentObject,
  encodeSegmentObject,
  readSegmentObjectHeader,
  SegmentObjectError,
  type SegmentObjectFields,
} from './segment-object.ts';
import {
  encodeSegmentObjectInMemory,
  encodeSegmentObjectStream,
} from './segment-object-encode-stream.ts';
import { decodeSegmentObjectStream } from './segment-object-stream.ts';

/** A database-like body: mostly repeated pages with small differences. */
function pages(bytes: number): Uint8Array {
  const body = new Uint8Array(bytes);
  for (let i = 0; i < bytes; i += 4096) body[i] = (i / 4096) & 0xff;
  return body;
}

function snapshotFields(length: number, codec: 'zstd' | 'identity' = 'zstd'): SegmentObjectFields {
  return {
    codec,
    kind: 'snapshot',
    generation: 5,
    start: 0,
    end: length,
    commits: 12,
    previousCrc32: 0,
    lineage: 'lineage-1',
  };
}

async function* chunks(bytes: Uint8Array, size: number): AsyncGenerator<Uint8Array> {
  for (let at = 0; at < bytes.byteLength; at += size) yield bytes.slice(at, at + size);
}

async function collect(body: AsyncIterable<Uint8Array>): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  for await (const chunk of body) parts.push(chunk);
  return new Uint8Array(Buffer.concat(parts));
}

/** Everything the stream hands out until it throws, and what it threw. */
async function collectUntilError(
  body: AsyncIterable<Uint8Array>,
): Promise<{ bytes: Uint8Array; error: unknown }> {
  const parts: Uint8Array[] = [];
  try {
    for await (const chunk of body) parts.push(chunk);
  } catch (error) {
    return { bytes: new Uint8Array(Buffer.concat(parts)), error };
  }
  return { bytes: new Uint8Array(Buffer.concat(parts)), error: null };
}

describe('encodeSegmentObjectStream', () => {
  for (const codec of ['zstd', 'identity'] as const) {
    it(`writes the envelope encodeSegmentObject writes, decodable whole and streamed (${codec})`, async () => {
      const body = pages(1 << 20);
      const fields = snapshotFields(body.length, codec);
      const stored = await collect(
        encodeSegmentObjectStream(
          { length: body.length, crc32: crc32(body), read: chunks(body, 65_536 + 3) },
          fields,
        ),
      );
      const header = readSegmentObjectHeader(stored);
      expect(header).toEqual(readSegmentObjectHeader(encodeSegmentObject(body, fields)));
      expect(Buffer.from(decodeSegmentObject(stored).body).equals(body)).toBe(true);
      const streamed = await decodeSegmentObjectStream(chunks(stored, 1000));
      expect(Buffer.from(await collect(streamed.body)).equals(body)).toBe(true);
      if (codec === 'zstd') expect(stored.length).toBeLessThan(body.length / 50);
      else expect(stored.length).toBe(body.length + header.headerBytes);
    });
  }

  it('encodes an empty body (a snapshot of an empty file)', async () => {
    const stored = await collect(
      encodeSegmentObjectStream(
        { length: 0, crc32: 0, read: chunks(new Uint8Array(0), 1) },
        snapshotFields(0),
      ),
    );
    expect(decodeSegmentObject(stored).body.length).toBe(0);
  });

  const changes: [string, (body: Uint8Array) => Uint8Array][] = [
    [
      'one byte changed',
      (body) => {
        const changed = body.slice();
        changed[123_457] = (changed[123_457] ?? 0) ^ 1;
        return changed;
      },
    ],
    ['one byte longer', (body) => new Uint8Array(Buffer.concat([body, Uint8Array.of(7)]))],
    ['one byte shorter', (body) => body.slice(0, -1)],
  ];
  for (const [name, change] of changes) {
    it(`fails before its last bytes when the second read differs from the first (${name})`, async () => {
      const body = pages(256 * 1024);
      const { bytes, error } = await collectUntilError(
        encodeSegmentObjectStream(
          { length: body.length, crc32: crc32(body), read: chunks(change(body), 4096) },
          snapshotFields(body.length),
        ),
      );
      expect(SegmentObjectError.isInstance(error)).toBe(true);
      expect((error as SegmentObjectError).field).toBe('body');
      expect((error as SegmentObjectError).message).toMatch(/changed between the reads/);
      // What was handed out is no complete object: it does not decode.
      expect(() => decodeSegmentObject(bytes)).toThrow(SegmentObjectError);
    });
  }

  it('refuses fields that do not span the body, at once', () => {
    expect(() =>
      encodeSegmentObjectStream(
        { length: 10, crc32: 0, read: chunks(new Uint8Array(10), 1) },
        snapshotFields(11),
      ),
    ).toThrow(/end − start \(11\) is not the body's length \(10\)/);
  });
});

describe('encodeSegmentObjectInMemory', () => {
  for (const codec of ['zstd', 'identity'] as const) {
    it(`builds the whole envelope from one read when it fits (${codec})`, async () => {
      const body = pages(1 << 20);
      const result = await encodeSegmentObjectInMemory(
        chunks(body, 70_001),
        body.length,
        snapshotFields(body.length, codec),
        { maxStoredBytes: 2 << 20 },
      );
      expect(result.length).toBe(body.length);
      expect(result.crc32).toBe(crc32(body));
      const stored = new Uint8Array(Buffer.concat(result.stored!));
      expect(Buffer.from(decodeSegmentObject(stored).body).equals(body)).toBe(true);
      expect(readSegmentObjectHeader(stored)).toEqual(
        readSegmentObjectHeader(encodeSegmentObject(body, snapshotFields(body.length, codec))),
      );
    });
  }

  it('past the limit keeps nothing but still gives the length and CRC-32 for a streamed second read', async () => {
    // Incompressible: the stored body is about as large as the body.
    const body = new Uint8Array(randomBytes(512 * 1024));
    const result = await encodeSegmentObjectInMemory(
      chunks(body, 4096),
      body.length,
      snapshotFields(body.length),
      { maxStoredBytes: 64 * 1024 },
    );
    expect(result.stored).toBeNull();
    expect(result).toMatchObject({ length: body.length, crc32: crc32(body) });
    const stored = await collect(
      encodeSegmentObjectStream(
        { length: result.length, crc32: result.crc32, read: chunks(body, 4096) },
        snapshotFields(body.length),
      ),
    );
    expect(Buffer.from(decodeSegmentObject(stored).body).equals(body)).toBe(true);
  });

  it('refuses a read of another length than declared (field body)', async () => {
    const body = pages(64 * 1024);
    await expect(
      encodeSegmentObjectInMemory(
        chunks(body, 4096),
        body.length + 1,
        snapshotFields(body.length + 1),
        {
          maxStoredBytes: 1 << 20,
        },
      ),
    ).rejects.toThrow(/body: read 65536 bytes, not the 65537 declared/);
  });
});
