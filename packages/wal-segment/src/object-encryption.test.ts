import { randomBytes } from 'node:crypto';
import { crc32, zstdDecompressSync } from 'node:zlib';
import { decryptSync, generateIdentity, parseIdentity, parseRecipient } from '@x/age-envelope';
import { describe, expect, it } from 'vitest';
import { SegmentObjectKeyError } from './object-encryption.ts';
import {
  decodeSegmentObject,
  encodeSegmentObject,
  encodeSegmentObjectAsync,
  readSegmentObjectHeader,
  SegmentObjectError,
  type SegmentObjectFields,
} from './segment-object.ts';
import {
  encodeSegmentObjectInMemory,
  encodeSegmentObjectStream,
} from './segment-object-encode-stream.ts';
import { decodeSegmentObjectStream } from './segment-object-stream.ts';

function keyPair() {
  const { identity, recipient } = generateIdentity();
  return { identity: parseIdentity(identity, 'test key'), recipient: parseRecipient(recipient) };
}
const alice = keyPair();
const bob = keyPair();
const mallory = keyPair();

function fields(length: number, start = 0, kind: 'segment' | 'snapshot' = 'segment') {
  return {
    codec: 'zstd',
    kind,
    generation: 7,
    start,
    end: start + length,
    commits: 3,
    previousCrc32: kind === 'snapshot' ? 0 : 0x1234,
    lineage: 'lineage-a',
  } satisfies SegmentObjectFields;
}

/** Text-like bytes that compress, across several 64 KiB age chunks. */
function body(length: number): Uint8Array {
  const out = new Uint8Array(length);
  const noise = randomBytes(length);
  for (let i = 0; i < length; i++) out[i] = 97 + (noise[i]! % 4);
  return out;
}

async function collect(chunks: AsyncIterable<Uint8Array>): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  for await (const chunk of chunks) parts.push(chunk);
  return new Uint8Array(Buffer.concat(parts));
}

async function* once(bytes: Uint8Array): AsyncGenerator<Uint8Array> {
  yield bytes;
}

function errorOf(run: () => unknown): unknown {
  try {
    run();
  } catch (error) {
    return error;
  }
  throw new Error('expected a throw');
}

describe('encrypted envelopes (age-x25519)', () => {
  const plain = body(300_000);
  const sealed = encodeSegmentObject(plain, fields(plain.length), {
    recipients: [alice.recipient, bob.recipient],
  });

  it('states encryption and recipients in clear, and no CRC of the content', () => {
    const header = readSegmentObjectHeader(sealed);
    expect(header.encryption).toBe('age-x25519');
    expect(header.recipients.map((r) => r.text)).toEqual([
      alice.recipient.text,
      bob.recipient.text,
    ]);
    expect(header.bodyCrc32).toBe(0);
    expect(sealed[8]).toBe(1);
    // The body is an age file, and no run of the zstd body shows through.
    const rest = Buffer.from(sealed.subarray(header.headerBytes));
    expect(rest.subarray(0, 21).toString()).toBe('age-encryption.org/v1');
    expect(rest.includes(Buffer.from(plain.subarray(1000, 1032)))).toBe(false);
  });

  it('opens with either recipient, sync and streaming', async () => {
    for (const key of [alice, bob]) {
      expect(decodeSegmentObject(sealed, { identities: [key.identity] }).body).toEqual(plain);
      const stream = await decodeSegmentObjectStream(once(sealed), { identities: [key.identity] });
      expect(await collect(stream.body)).toEqual(plain);
    }
  });

  it('writes the same readable object from every encoder', async () => {
    const recipients = [alice.recipient];
    const f = fields(plain.length, 0, 'snapshot');
    const encodings = [
      encodeSegmentObject(plain, f, { recipients }),
      await encodeSegmentObjectAsync(plain, f, { recipients }),
      await collect(
        encodeSegmentObjectStream(
          { length: plain.length, crc32: crc32(plain), read: once(plain) },
          f,
          { recipients },
        ),
      ),
      new Uint8Array(
        Buffer.concat(
          (
            await encodeSegmentObjectInMemory(once(plain), plain.length, f, {
              maxStoredBytes: 1 << 24,
              recipients,
            })
          ).stored!,
        ),
      ),
    ];
    for (const stored of encodings) {
      const decoded = decodeSegmentObject(stored, { identities: [alice.identity] });
      expect(decoded.body).toEqual(plain);
      expect(decoded.header.kind).toBe('snapshot');
    }
  });

  it('refuses a missing or wrong identity with a key error naming the recipients only', async () => {
    for (const identities of [[], [mallory.identity]]) {
      const error = errorOf(() => decodeSegmentObject(sealed, { identities }));
      expect(SegmentObjectKeyError.isInstance(error)).toBe(true);
      const message = (error as Error).message;
      expect(message).toContain(alice.recipient.text);
      expect(message).toContain(bob.recipient.text);
      expect(message).not.toMatch(/AGE-SECRET-KEY/i);
      await expect(decodeSegmentObjectStream(once(sealed), { identities })).rejects.toSatisfy(
        SegmentObjectKeyError.isInstance,
      );
    }
  });

  it('refuses a body cut at every chunk boundary, and a changed byte', async () => {
    const header = readSegmentObjectHeader(sealed);
    const ageStart = header.headerBytes;
    const payloadStart =
      Buffer.from(sealed).indexOf('\n', Buffer.from(sealed).indexOf('--- ', ageStart)) + 1 + 16;
    const cuts = [sealed.length - 1, ageStart + 10, payloadStart];
    for (let at = payloadStart + 65_536 + 16; at < sealed.length; at += 65_536 + 16) cuts.push(at);
    for (const cut of cuts) {
      const cutShort = sealed.subarray(0, cut);
      const error = errorOf(() => decodeSegmentObject(cutShort, { identities: [alice.identity] }));
      expect(SegmentObjectError.isInstance(error), `cut at ${cut}`).toBe(true);
      expect((error as SegmentObjectError).field).toBe('body');
      const stream = await decodeSegmentObjectStream(once(cutShort), {
        identities: [alice.identity],
      });
      await expect(collect(stream.body)).rejects.toSatisfy(
        (e: unknown) => SegmentObjectError.isInstance(e) && e.field === 'body',
      );
    }
    const changed = new Uint8Array(sealed);
    changed[payloadStart + 70_000]! ^= 1;
    expect(
      (
        errorOf(() =>
          decodeSegmentObject(changed, { identities: [alice.identity] }),
        ) as SegmentObjectError
      ).field,
    ).toBe('body');
  });

  it('refuses a body moved under another header (a swap between objects)', async () => {
    const other = encodeSegmentObject(plain, fields(plain.length, plain.length), {
      recipients: [alice.recipient, bob.recipient],
    });
    const headerA = readSegmentObjectHeader(sealed).headerBytes;
    const headerB = readSegmentObjectHeader(other).headerBytes;
    const swapped = new Uint8Array(
      Buffer.concat([sealed.subarray(0, headerA), other.subarray(headerB)]),
    );
    const error = errorOf(() => decodeSegmentObject(swapped, { identities: [alice.identity] }));
    expect((error as SegmentObjectError).field).toBe('body');
    expect((error as Error).message).toContain('another header');
    const stream = await decodeSegmentObjectStream(once(swapped), { identities: [alice.identity] });
    await expect(collect(stream.body)).rejects.toThrow(/another header/);
  });

  it('refuses encryption with the identity codec, and too many recipients', () => {
    const small = body(10);
    expect(
      (
        errorOf(() =>
          encodeSegmentObject(
            small,
            { ...fields(10), codec: 'identity' },
            { recipients: [alice.recipient] },
          ),
        ) as SegmentObjectError
      ).field,
    ).toBe('encryption');
    expect(
      (
        errorOf(() =>
          encodeSegmentObject(small, fields(10), { recipients: Array(33).fill(alice.recipient) }),
        ) as SegmentObjectError
      ).field,
    ).toBe('recipients');
  });

  it('keeps reading plaintext objects, identities given or not', () => {
    const clear = encodeSegmentObject(plain, fields(plain.length));
    expect(readSegmentObjectHeader(clear).encryption).toBe('none');
    expect(decodeSegmentObject(clear, { identities: [alice.identity] }).body).toEqual(plain);
  });

  it('decrypts to the zstd body and its skippable binding: zstd gives the bytes back', () => {
    // What `age -d | zstd -d` does, with the package's own age reader.
    const header = readSegmentObjectHeader(sealed);
    const plaintext = decryptSync(sealed.subarray(header.headerBytes), [alice.identity]);
    expect(new Uint8Array(zstdDecompressSync(plaintext))).toEqual(plain);
  });
});

describe('what encryption costs in stored bytes', () => {
  it('adds a fixed age header, 16 bytes per 64 KiB and 32 bytes per recipient to an object', () => {
    for (const length of [100, 65_536, 1_000_000]) {
      const plain = body(length);
      const clear = encodeSegmentObject(plain, fields(length), { level: 3 });
      for (const recipients of [[alice.recipient], [alice.recipient, bob.recipient]]) {
        const sealed = encodeSegmentObject(plain, fields(length), { level: 3, recipients });
        const compressed = clear.length - readSegmentObjectHeader(clear).headerBytes;
        const chunks = Math.max(1, Math.ceil((compressed + 44) / 65_536));
        // Per recipient: 33 header bytes (count byte aside) and a 98-byte age stanza.
        const fixed = 1 + 22 + 16 + 48 + 44 + recipients.length * (32 + 98);
        expect(sealed.length - clear.length).toBe(fixed + 16 * chunks);
      }
    }
  });
});
