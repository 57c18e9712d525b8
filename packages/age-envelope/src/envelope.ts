/**
 * Encrypting to age recipients and decrypting with age identities, as
 * streams (bounded memory: one 64 KiB chunk at a time) or whole buffers.
 * The output is an age v1 file: `age -d -i key.txt` opens it.
 */
import { randomBytes } from 'node:crypto';
import { AgeError } from './errors.ts';
import { checkHeaderMac, type ParsedHeader, readHeader, writeHeader } from './header.ts';
import type { AgeIdentity, AgeRecipient } from './keys.ts';
import {
  CHUNK_BYTES,
  NONCE_BYTES,
  openChunkInto,
  openChunkPieces,
  payloadKey,
  sealChunk,
  sealChunkInto,
  TAG_BYTES,
} from './payload.ts';
import { isX25519Stanza, unwrapFileKey, wrapFileKey } from './x25519-stanza.ts';

/** A header this long without its end is refused rather than buffered further. */
const MAX_HEADER_BYTES = 1024 * 1024;
const SEALED_CHUNK_BYTES = CHUNK_BYTES + TAG_BYTES;

type Source = AsyncIterable<Uint8Array> | Iterable<Uint8Array>;

/** A plaintext given whole, or as parts read in order (never joined). */
export type Plaintext = Uint8Array | readonly Uint8Array[];

/** Takes the first `length` bytes off `parts` (splitting one if needed), leaving the rest. */
function takeBytes(parts: Uint8Array[], length: number): Uint8Array[] {
  const taken: Uint8Array[] = [];
  let wanted = length;
  while (wanted > 0) {
    const part = parts[0] as Uint8Array;
    if (part.length <= wanted) {
      taken.push(part);
      parts.shift();
      wanted -= part.length;
    } else {
      taken.push(part.subarray(0, wanted));
      parts[0] = part.subarray(wanted);
      wanted = 0;
    }
  }
  return taken;
}

/**
 * Seals a plaintext given piece by piece: the header and nonce first, then
 * each full 64 KiB chunk once more data follows it (the last chunk carries
 * the last-chunk flag, so it is sealed only at `end`).
 */
class PayloadSealer {
  readonly #key: Buffer;
  #parts: Uint8Array[] = [];
  #queued = 0;
  #counter = 0;
  readonly start: Uint8Array;

  constructor(recipients: readonly AgeRecipient[]) {
    if (recipients.length === 0)
      throw new AgeError('AGE_RECIPIENT_INVALID', 'encrypting needs at least one age recipient');
    const fileKey = randomBytes(16);
    const header = writeHeader(
      recipients.map((recipient) => wrapFileKey(fileKey, recipient)),
      fileKey,
    );
    const nonce = randomBytes(NONCE_BYTES);
    this.start = Buffer.concat([header, nonce]);
    this.#key = payloadKey(fileKey, nonce);
  }

  push(chunk: Uint8Array): Uint8Array[] {
    this.#parts.push(chunk);
    this.#queued += chunk.length;
    const sealed: Uint8Array[] = [];
    while (this.#queued > CHUNK_BYTES) {
      const pieces = takeBytes(this.#parts, CHUNK_BYTES);
      this.#queued -= CHUNK_BYTES;
      sealed.push(sealChunk(this.#key, this.#counter++, false, pieces));
    }
    return sealed;
  }

  end(): Uint8Array {
    const pieces = this.#parts;
    this.#parts = [];
    this.#queued = 0;
    return sealChunk(this.#key, this.#counter, true, pieces);
  }

  /**
   * `prefix`, then the whole age file of `plaintext`, in one buffer (nothing
   * may have been pushed).
   */
  sealWhole(plaintext: readonly Uint8Array[], prefix: Uint8Array): Uint8Array {
    const length = plaintext.reduce((sum, part) => sum + part.length, 0);
    const chunks = Math.max(1, Math.ceil(length / CHUNK_BYTES));
    const out = new Uint8Array(prefix.length + this.start.length + length + chunks * TAG_BYTES);
    out.set(prefix, 0);
    out.set(this.start, prefix.length);
    let at = prefix.length + this.start.length;
    const parts = [...plaintext];
    let left = length;
    for (let index = 0; index < chunks; index++) {
      const pieces = takeBytes(parts, Math.min(CHUNK_BYTES, left));
      left -= Math.min(CHUNK_BYTES, left);
      at = sealChunkInto(this.#key, index, index === chunks - 1, pieces, out, at);
    }
    return out;
  }
}

/**
 * The age file of `source` for `recipients` (each can decrypt it alone).
 * @throws AgeError `AGE_RECIPIENT_INVALID` when `recipients` is empty.
 */
export async function* encryptStream(
  source: Source,
  recipients: readonly AgeRecipient[],
): AsyncIterable<Uint8Array> {
  const sealer = new PayloadSealer(recipients);
  yield sealer.start;
  for await (const chunk of source) yield* sealer.push(chunk);
  yield sealer.end();
}

/**
 * {@link encrypt} without waiting: the whole age file of `plaintext`, after
 * `options.prefix` when given (so a caller's own header and the age file
 * share one buffer).
 */
export function encryptSync(
  plaintext: Plaintext,
  recipients: readonly AgeRecipient[],
  options: { prefix?: Uint8Array } = {},
): Uint8Array {
  const sealer = new PayloadSealer(recipients);
  const parts = plaintext instanceof Uint8Array ? [plaintext] : plaintext;
  return sealer.sealWhole(parts, options.prefix ?? new Uint8Array(0));
}

/** The file key the header wraps for one of `identities`. */
function openHeader(header: ParsedHeader, identities: readonly AgeIdentity[]): Uint8Array {
  for (const stanza of header.stanzas) {
    for (const identity of identities) {
      const fileKey = unwrapFileKey(stanza, identity);
      if (fileKey === null) continue;
      checkHeaderMac(header, fileKey);
      return fileKey;
    }
  }
  const x25519 = header.stanzas.filter(isX25519Stanza).length;
  const others = header.stanzas.length - x25519;
  throw new AgeError(
    'AGE_NO_MATCHING_IDENTITY',
    `none of the ${identities.length} age identities given (${identities.map((identity) => identity.recipient.text).join(', ') || 'none'}) opens this object: it is encrypted to ${x25519} X25519 recipient${x25519 === 1 ? '' : 's'}${others > 0 ? ` and ${others} of another type` : ''}`,
  );
}

/**
 * The plaintext of an age file, chunk by chunk, each authenticated before
 * it is yielded.
 * @throws AgeError: `AGE_HEADER_INVALID`, `AGE_NO_MATCHING_IDENTITY`,
 * `AGE_HEADER_MAC_INVALID`, `AGE_PAYLOAD_INVALID` (from the iteration).
 */
export async function* decryptStream(
  source: Source,
  identities: readonly AgeIdentity[],
): AsyncIterable<Uint8Array> {
  const input = (async function* () {
    yield* source;
  })()[Symbol.asyncIterator]();
  let pending = Buffer.alloc(0);
  let ended = false;
  const readMore = async (): Promise<boolean> => {
    const next = await input.next();
    if (next.done) {
      ended = true;
      return false;
    }
    pending = Buffer.concat([pending, next.value]);
    return true;
  };
  // Reads until `wanted` bytes are pending (or the input ends), joining them once.
  const fill = async (wanted: number): Promise<void> => {
    const parts: Uint8Array[] = [pending];
    let length = pending.length;
    while (length < wanted && !ended) {
      const next = await input.next();
      if (next.done) ended = true;
      else {
        parts.push(next.value);
        length += next.value.length;
      }
    }
    if (parts.length > 1) pending = Buffer.concat(parts, length);
  };

  let header: ParsedHeader | null = null;
  while (header === null) {
    header = readHeader(pending, ended);
    if (header !== null) break;
    if (pending.length > MAX_HEADER_BYTES)
      throw new AgeError('AGE_HEADER_INVALID', 'not a valid age v1 file: no header end in 1 MiB');
    await readMore();
  }
  const fileKey = openHeader(header, identities);
  pending = pending.subarray(header.length);
  await fill(NONCE_BYTES);
  if (pending.length < NONCE_BYTES)
    throw new AgeError('AGE_PAYLOAD_INVALID', 'the age payload ends before its nonce');
  const key = payloadKey(fileKey, pending.subarray(0, NONCE_BYTES));

  // The payload's pieces are queued as they come, never joined: a chunk is
  // opened from the pieces that hold it.
  const queued: Uint8Array[] = [pending.subarray(NONCE_BYTES)];
  let queuedBytes = queued[0]?.length ?? 0;
  for (let counter = 0; ; counter++) {
    // One byte past a full chunk tells whether this chunk is the last.
    while (queuedBytes <= SEALED_CHUNK_BYTES && !ended) {
      const next = await input.next();
      if (next.done) ended = true;
      else {
        queued.push(next.value);
        queuedBytes += next.value.length;
      }
    }
    const last = queuedBytes <= SEALED_CHUNK_BYTES;
    const sealedBytes = last ? queuedBytes : SEALED_CHUNK_BYTES;
    if (sealedBytes < TAG_BYTES)
      throw new AgeError('AGE_PAYLOAD_INVALID', `age payload chunk ${counter} is cut short`);
    const body = takeBytes(queued, sealedBytes - TAG_BYTES);
    const tag = Buffer.concat(takeBytes(queued, TAG_BYTES));
    queuedBytes -= sealedBytes;
    const plain = openChunkPieces(key, counter, last, body, tag);
    if (last && sealedBytes === TAG_BYTES && counter > 0)
      throw new AgeError(
        'AGE_PAYLOAD_INVALID',
        `age payload chunk ${counter} is an empty last chunk`,
      );
    for (const piece of plain) if (piece.length > 0) yield piece;
    if (last) return;
  }
}

async function collect(chunks: AsyncIterable<Uint8Array>): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  for await (const chunk of chunks) parts.push(chunk);
  return new Uint8Array(Buffer.concat(parts));
}

/** `plaintext` as an age file for `recipients`. */
export function encrypt(
  plaintext: Uint8Array,
  recipients: readonly AgeRecipient[],
): Promise<Uint8Array> {
  return collect(encryptStream([plaintext], recipients));
}

/** The plaintext of the age file `ciphertext`, opened with one of `identities`. */
export function decrypt(
  ciphertext: Uint8Array,
  identities: readonly AgeIdentity[],
): Promise<Uint8Array> {
  return collect(decryptStream([ciphertext], identities));
}

/** {@link decrypt} without waiting: the plaintext of the whole age file `ciphertext`. */
export function decryptSync(
  ciphertext: Uint8Array,
  identities: readonly AgeIdentity[],
): Uint8Array {
  const header = readHeader(ciphertext, true);
  if (header === null) throw new AgeError('AGE_HEADER_INVALID', 'not a valid age v1 file');
  const fileKey = openHeader(header, identities);
  let offset = header.length;
  if (ciphertext.length < offset + NONCE_BYTES)
    throw new AgeError('AGE_PAYLOAD_INVALID', 'the age payload ends before its nonce');
  const key = payloadKey(fileKey, ciphertext.subarray(offset, offset + NONCE_BYTES));
  offset += NONCE_BYTES;
  const sealedBytes = ciphertext.length - offset;
  const chunks = Math.max(1, Math.ceil(sealedBytes / SEALED_CHUNK_BYTES));
  if (sealedBytes - (chunks - 1) * SEALED_CHUNK_BYTES < TAG_BYTES)
    throw new AgeError('AGE_PAYLOAD_INVALID', `age payload chunk ${chunks - 1} is cut short`);
  const plain = new Uint8Array(sealedBytes - chunks * TAG_BYTES);
  let written = 0;
  for (let counter = 0; ; counter++) {
    const last = ciphertext.length - offset <= SEALED_CHUNK_BYTES;
    const end = last ? ciphertext.length : offset + SEALED_CHUNK_BYTES;
    const before = written;
    written = openChunkInto(key, counter, last, ciphertext.subarray(offset, end), plain, written);
    if (last && written === before && counter > 0)
      throw new AgeError(
        'AGE_PAYLOAD_INVALID',
        `age payload chunk ${counter} is an empty last chunk`,
      );
    offset = end;
    if (last) return plain;
  }
}
