import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  decrypt,
  decryptStream,
  decryptSync,
  encrypt,
  encryptStream,
  encryptSync,
} from './envelope.ts';
import { AgeError, type AgeErrorCode } from './errors.ts';
import { generateIdentity, parseIdentity, parseRecipient } from './keys.ts';

const pair = generateIdentity();
const identity = parseIdentity(pair.identity, 'test identity');
const recipient = parseRecipient(pair.recipient);

async function refusal(promise: Promise<unknown>): Promise<AgeErrorCode | string> {
  try {
    await promise;
    return 'opened';
  } catch (error) {
    if (!AgeError.isInstance(error)) throw error;
    expect(error.message).not.toContain(pair.identity);
    expect(error.retryable).toBe(false);
    return error.code;
  }
}

/** Where the header ends in an age file: after the line that starts with `--- `. */
function headerLength(sealed: Uint8Array): number {
  const text = Buffer.from(sealed).toString('latin1');
  return text.indexOf('\n', text.indexOf('\n--- ') + 1) + 1;
}

describe('encrypt and decrypt', () => {
  it('round-trips sizes around the 64 KiB chunk, as buffers and fed a few bytes at a time', async () => {
    for (const size of [0, 1, 65_535, 65_536, 65_537, 131_072, 300_000]) {
      const plaintext = randomBytes(size);
      const sealed = await encrypt(plaintext, [recipient]);
      expect(Buffer.from(await decrypt(sealed, [identity])).equals(plaintext), `${size}`).toBe(
        true,
      );
      const pieces = function* () {
        for (let offset = 0; offset < sealed.length; offset += 4093)
          yield sealed.subarray(offset, offset + 4093);
      };
      const parts: Uint8Array[] = [];
      for await (const part of decryptStream(pieces(), [identity])) parts.push(part);
      expect(Buffer.concat(parts).equals(plaintext), `${size} streamed`).toBe(true);
    }
  });

  it('streams in bounded pieces: no yielded piece is larger than one chunk', async () => {
    const source = async function* () {
      for (let index = 0; index < 40; index++) yield randomBytes(50_000);
    };
    let largest = 0;
    const sealedParts: Uint8Array[] = [];
    for await (const part of encryptStream(source(), [recipient])) {
      largest = Math.max(largest, part.length);
      sealedParts.push(part);
    }
    expect(largest).toBeLessThanOrEqual(65_536 + 16);
    let opened = 0;
    for await (const part of decryptStream(sealedParts, [identity])) {
      expect(part.length).toBeLessThanOrEqual(65_536);
      opened += part.length;
    }
    expect(opened).toBe(2_000_000);
  });

  it('refuses a changed header, MAC, nonce or chunk, a cut, an extension and swapped chunks', async () => {
    const plaintext = randomBytes(3 * 65_536 + 100);
    const sealed = await encrypt(plaintext, [recipient]);
    const header = headerLength(sealed);
    const flip = (offset: number) => {
      const copy = Uint8Array.from(sealed);
      copy[offset] = (copy[offset] as number) ^ 1;
      return copy;
    };
    // A MAC character changed to another base64 character (a flipped bit can
    // leave the alphabet, which is a malformed header instead).
    const otherMacCharacter = (offset: number) => {
      const copy = Uint8Array.from(sealed);
      copy[offset] = copy[offset] === 0x41 ? 0x42 : 0x41;
      return copy;
    };
    const chunk = 65_536 + 16;
    const payload = header + 16;
    // The stanza's share, and its body: the file key no longer unwraps.
    expect(await refusal(decrypt(flip(35), [identity]))).toBe('AGE_NO_MATCHING_IDENTITY');
    expect(await refusal(decrypt(otherMacCharacter(header - 10), [identity]))).toBe(
      'AGE_HEADER_MAC_INVALID',
    );
    expect(await refusal(decrypt(flip(header + 3), [identity]))).toBe('AGE_PAYLOAD_INVALID');
    expect(await refusal(decrypt(flip(payload + 5), [identity]))).toBe('AGE_PAYLOAD_INVALID');
    expect(await refusal(decrypt(flip(sealed.length - 1), [identity]))).toBe('AGE_PAYLOAD_INVALID');
    // Cut at a chunk boundary: the chunk left last was not sealed as the last.
    expect(await refusal(decrypt(sealed.subarray(0, payload + 3 * chunk), [identity]))).toBe(
      'AGE_PAYLOAD_INVALID',
    );
    expect(await refusal(decrypt(sealed.subarray(0, sealed.length - 1), [identity]))).toBe(
      'AGE_PAYLOAD_INVALID',
    );
    const extended = Buffer.concat([sealed, Buffer.from([0])]);
    expect(await refusal(decrypt(extended, [identity]))).toBe('AGE_PAYLOAD_INVALID');
    const swapped = Buffer.concat([
      sealed.subarray(0, payload),
      sealed.subarray(payload + chunk, payload + 2 * chunk),
      sealed.subarray(payload, payload + chunk),
      sealed.subarray(payload + 2 * chunk),
    ]);
    expect(await refusal(decrypt(swapped, [identity]))).toBe('AGE_PAYLOAD_INVALID');
    expect(await refusal(decrypt(sealed.subarray(0, header - 1), [identity]))).toBe(
      'AGE_HEADER_INVALID',
    );
    expect(await refusal(decrypt(sealed.subarray(0, header + 5), [identity]))).toBe(
      'AGE_PAYLOAD_INVALID',
    );
  });

  it('refuses what is not an age file, and an object for another key, naming the identities tried', async () => {
    expect(await refusal(decrypt(Buffer.from('SQLite format 3\0'), [identity]))).toBe(
      'AGE_HEADER_INVALID',
    );
    const other = generateIdentity();
    const sealed = await encrypt(Buffer.from('x'), [parseRecipient(other.recipient)]);
    const wrong = decrypt(sealed, [identity]);
    await expect(wrong).rejects.toThrow(pair.recipient);
    expect(await refusal(decrypt(sealed, [identity]))).toBe('AGE_NO_MATCHING_IDENTITY');
    expect(await refusal(decrypt(sealed, []))).toBe('AGE_NO_MATCHING_IDENTITY');
    expect(await refusal(encrypt(Buffer.from('x'), []))).toBe('AGE_RECIPIENT_INVALID');
  });

  it('each object gets its own file key: the same bytes twice encrypt differently', async () => {
    const a = await encrypt(Buffer.from('same'), [recipient]);
    const b = await encrypt(Buffer.from('same'), [recipient]);
    expect(Buffer.from(a).equals(Buffer.from(b))).toBe(false);
  });

  it('encryptSync seals parts as one plaintext after a prefix, and decryptSync opens it', () => {
    const plaintext = randomBytes(3 * 65_536 + 7);
    const prefix = Buffer.from('header bytes');
    for (const cuts of [[], [1], [65_535, 65_536], [65_536, 65_537, 131_072, 196_000], [7, 8, 9]]) {
      const parts = [0, ...cuts, plaintext.length]
        .slice(1)
        .map((end, index, ends) => plaintext.subarray(index === 0 ? 0 : ends[index - 1], end));
      const sealed = encryptSync(parts, [recipient], { prefix });
      expect(Buffer.from(sealed.subarray(0, prefix.length)).equals(prefix)).toBe(true);
      const opened = decryptSync(sealed.subarray(prefix.length), [identity]);
      expect(Buffer.from(opened).equals(plaintext), `cut at ${cuts}`).toBe(true);
    }
  });

  it('decryptSync refuses the payload cut or extended at any byte near a chunk end', () => {
    const sealed = encryptSync(randomBytes(2 * 65_536 + 20), [recipient]);
    const payloadEnd = sealed.length;
    const firstChunkEnd = headerLength(sealed) + 16 + 65_536 + 16;
    for (const length of [
      ...Array.from({ length: 40 }, (_, index) => firstChunkEnd - 20 + index),
      ...Array.from({ length: 40 }, (_, index) => payloadEnd - 39 + index),
    ]) {
      if (length === payloadEnd) continue;
      const cut = sealed.subarray(0, length);
      expect(() => decryptSync(cut, [identity]), `${length} bytes`).toThrow(AgeError);
      try {
        decryptSync(cut, [identity]);
      } catch (error) {
        expect((error as AgeError).code, `${length} bytes`).toBe('AGE_PAYLOAD_INVALID');
      }
    }
    const extended = Buffer.concat([sealed, Buffer.from([1, 2, 3])]);
    expect(() => decryptSync(extended, [identity])).toThrow(/does not authenticate/);
  });
});
