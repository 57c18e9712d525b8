/**
 * The age payload: a 16-byte nonce, then the plaintext in 64 KiB chunks,
 * each sealed with ChaCha20-Poly1305 under a key derived from the file key
 * and the nonce; a chunk's nonce is its 11-byte counter and a last-chunk
 * flag, so a cut, reordered or extended payload fails to open.
 */
import { createCipheriv, createDecipheriv, hkdfSync } from 'node:crypto';
import { AgeError } from './errors.ts';

export const CHUNK_BYTES = 64 * 1024;
export const TAG_BYTES = 16;
export const NONCE_BYTES = 16;

export function payloadKey(fileKey: Uint8Array, nonce: Uint8Array): Buffer {
  return Buffer.from(hkdfSync('sha256', fileKey, nonce, 'payload', 32));
}

function chunkNonce(counter: number, last: boolean): Buffer {
  const nonce = Buffer.alloc(12);
  nonce.writeUIntBE(counter, 5, 6);
  nonce[11] = last ? 1 : 0;
  return nonce;
}

/** The plaintext of one chunk: pieces read in order, never joined. */
export type ChunkPieces = readonly Uint8Array[];

export function sealChunk(
  key: Buffer,
  counter: number,
  last: boolean,
  pieces: ChunkPieces,
): Buffer {
  const length = pieces.reduce((sum, piece) => sum + piece.length, 0);
  const out = Buffer.allocUnsafe(length + TAG_BYTES);
  sealChunkInto(key, counter, last, pieces, out, 0);
  return out;
}

/** Seals `pieces` into `out` at `offset` (their length + `TAG_BYTES` bytes); returns the end. */
export function sealChunkInto(
  key: Buffer,
  counter: number,
  last: boolean,
  pieces: ChunkPieces,
  out: Uint8Array,
  offset: number,
): number {
  const cipher = createCipheriv('chacha20-poly1305', key, chunkNonce(counter, last), {
    authTagLength: TAG_BYTES,
  });
  let at = offset;
  const write = (part: Uint8Array) => {
    out.set(part, at);
    at += part.length;
  };
  for (const piece of pieces) write(cipher.update(piece));
  write(cipher.final());
  write(cipher.getAuthTag());
  return at;
}

/**
 * Opens one sealed chunk into `out` at `offset` (its length − `TAG_BYTES`
 * bytes); returns the end.
 * @throws AgeError `AGE_PAYLOAD_INVALID` naming the chunk.
 */
export function openChunkInto(
  key: Buffer,
  counter: number,
  last: boolean,
  sealed: Uint8Array,
  out: Uint8Array,
  offset: number,
): number {
  const plain = openChunk(key, counter, last, sealed);
  out.set(plain, offset);
  return offset + plain.length;
}

/** @throws AgeError `AGE_PAYLOAD_INVALID` naming the chunk. */
export function openChunk(key: Buffer, counter: number, last: boolean, sealed: Uint8Array): Buffer {
  if (sealed.length < TAG_BYTES)
    throw new AgeError('AGE_PAYLOAD_INVALID', `age payload chunk ${counter} is cut short`);
  const body = sealed.subarray(0, sealed.length - TAG_BYTES);
  const [plain] = openChunkPieces(key, counter, last, [body], sealed.subarray(body.length));
  return plain ?? Buffer.alloc(0);
}

/**
 * Opens one sealed chunk given as the pieces of its ciphertext and its tag;
 * the plaintext comes back piece for piece, only once the tag checks.
 * @throws AgeError `AGE_PAYLOAD_INVALID` naming the chunk.
 */
export function openChunkPieces(
  key: Buffer,
  counter: number,
  last: boolean,
  body: ChunkPieces,
  tag: Uint8Array,
): Buffer[] {
  const decipher = createDecipheriv('chacha20-poly1305', key, chunkNonce(counter, last), {
    authTagLength: TAG_BYTES,
  });
  decipher.setAuthTag(tag);
  try {
    const plain = body.map((piece) => decipher.update(piece));
    // A stream cipher's final() adds no bytes; it is where the tag is checked.
    decipher.final();
    return plain;
  } catch {
    throw new AgeError(
      'AGE_PAYLOAD_INVALID',
      `age payload chunk ${counter} does not authenticate${last ? ' as the last chunk' : ''}: the object was changed, cut short or extended`,
    );
  }
}
