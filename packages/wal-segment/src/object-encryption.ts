/**
 * The encrypted body of an envelope (encryption 1, `age-x25519`): an age v1
 * file whose plaintext is the zstd body followed by a zstd skippable frame,
 * the binding. The binding holds the SHA-256 of the object's header and the
 * decoded body's CRC-32, so a body moved under another header is refused
 * once it is opened, and `age -d | zstd -d` still gives the bytes back
 * (zstd skips skippable frames). The layout is in docs/format.md.
 */
import { createHash } from 'node:crypto';
import {
  type AgeIdentity,
  type AgeRecipient,
  decryptStream,
  decryptSync,
  encryptSync,
} from '@x/age-envelope';
import { hasMarker } from './errors.ts';

export type ObjectEncryption = 'none' | 'age-x25519';

/** At most this many recipients per object (each takes 32 bytes of the header). */
export const MAX_OBJECT_RECIPIENTS = 32;

const BINDING_MAGIC = 0x184d2a5b;
const BINDING_CONTENT_BYTES = 32 + 4;
/** Bytes the binding frame adds to the plaintext. */
export const BINDING_BYTES = 8 + BINDING_CONTENT_BYTES;

const KEY_ERROR_MARKER = Symbol.for('x.wal-segment.error.SegmentObjectKeyError');

/**
 * An encrypted object cannot be opened with the identities given: none was
 * given, or none is one of its recipients. Names the recipients (public
 * keys) and where each identity came from, never a secret.
 */
export class SegmentObjectKeyError extends Error {
  get retryable(): boolean {
    return false;
  }

  readonly code = 'SEGMENT_OBJECT_KEY_MISSING';
  /** The object's recipients, `age1…`. */
  readonly recipients: readonly string[];

  constructor(recipients: readonly string[], identities: readonly AgeIdentity[]) {
    const given =
      identities.length === 0
        ? 'no age identity was given'
        : `none of the age identities given (${identities.map((identity) => `${identity.recipient.text} from ${identity.source}`).join(', ')}) is one of them`;
    super(`encrypted to ${recipients.join(', ')}: ${given}`);
    this.name = 'SegmentObjectKeyError';
    this.recipients = recipients;
    (this as unknown as Record<symbol, boolean>)[KEY_ERROR_MARKER] = true;
  }

  static isInstance(value: unknown): value is SegmentObjectKeyError {
    return hasMarker(value, KEY_ERROR_MARKER);
  }
}

/** The binding frame for an object whose header bytes are `header`. */
export function bindingFrame(header: Uint8Array, bodyCrc32: number): Uint8Array {
  const out = new Uint8Array(BINDING_BYTES);
  const view = new DataView(out.buffer);
  view.setUint32(0, BINDING_MAGIC, true);
  view.setUint32(4, BINDING_CONTENT_BYTES, true);
  out.set(createHash('sha256').update(header).digest(), 8);
  view.setUint32(40, bodyCrc32, true);
  return out;
}

/**
 * The decoded body's CRC-32 the binding states.
 * @returns a problem to report instead when the binding is not this header's.
 */
export function readBinding(
  header: Uint8Array,
  binding: Uint8Array,
): { bodyCrc32: number } | { problem: string } {
  if (binding.length !== BINDING_BYTES) return { problem: 'the decrypted body has no binding' };
  const view = new DataView(binding.buffer, binding.byteOffset, binding.byteLength);
  if (
    view.getUint32(0, true) !== BINDING_MAGIC ||
    view.getUint32(4, true) !== BINDING_CONTENT_BYTES
  )
    return { problem: 'the decrypted body does not end with its binding' };
  const digest = createHash('sha256').update(header).digest();
  if (!digest.equals(binding.subarray(8, 40)))
    return {
      problem: 'the encrypted body was written under another header (moved or swapped)',
    };
  return { bodyCrc32: view.getUint32(40, true) };
}

/** Refuses before decrypting when no identity is one of the object's recipients. */
export function checkIdentities(
  recipients: readonly AgeRecipient[],
  identities: readonly AgeIdentity[],
): void {
  const wanted = new Set(recipients.map((recipient) => recipient.text));
  if (!identities.some((identity) => wanted.has(identity.recipient.text)))
    throw new SegmentObjectKeyError(
      recipients.map((recipient) => recipient.text),
      identities,
    );
}

/**
 * The whole object: `header`, then the age file of the encoded body (given
 * as parts, never joined) followed by its binding.
 */
export function sealObject(
  header: Uint8Array,
  encoded: readonly Uint8Array[],
  bodyCrc32: number,
  recipients: readonly AgeRecipient[],
): Uint8Array {
  return encryptSync([...encoded, bindingFrame(header, bodyCrc32)], recipients, {
    prefix: header,
  });
}

/** What opening failed on, as a message for the `body` field. */
export function openProblem(error: unknown): string {
  return `does not decrypt: ${(error as Error).message}`;
}

/** The plaintext of an encrypted body, split into the encoded body and the binding. */
export function openBody(
  sealed: Uint8Array,
  identities: readonly AgeIdentity[],
): { encoded: Uint8Array; binding: Uint8Array } {
  const plaintext = decryptSync(sealed, identities);
  const split = Math.max(0, plaintext.length - BINDING_BYTES);
  return { encoded: plaintext.subarray(0, split), binding: plaintext.subarray(split) };
}

/** Decrypted bytes handed on per piece: large pieces keep zstd's and the writer's calls few. */
const OPENED_PIECE_BYTES = 1024 * 1024;

/**
 * The decrypted stream of an encrypted body without its binding, in pieces
 * of about {@link OPENED_PIECE_BYTES}; `binding()` gives the binding once
 * the stream has ended.
 */
export function openBodyStream(
  sealed: AsyncIterable<Uint8Array>,
  identities: readonly AgeIdentity[],
): { encoded: AsyncIterable<Uint8Array>; binding: () => Uint8Array } {
  let held = new Uint8Array(0);
  let ended = false;
  async function* encoded(): AsyncGenerator<Uint8Array> {
    let parts: Uint8Array[] = [];
    let length = 0;
    const take = (): Uint8Array => {
      const joined = Buffer.concat([held, ...parts], held.length + length);
      parts = [];
      length = 0;
      const split = Math.max(0, joined.length - BINDING_BYTES);
      held = joined.subarray(split);
      return joined.subarray(0, split);
    };
    for await (const chunk of decryptStream(sealed, identities)) {
      parts.push(chunk);
      length += chunk.length;
      if (length >= OPENED_PIECE_BYTES) yield take();
    }
    const rest = take();
    if (rest.length > 0) yield rest;
    ended = true;
  }
  return {
    encoded: encoded(),
    binding: () => (ended ? held : new Uint8Array(0)),
  };
}
