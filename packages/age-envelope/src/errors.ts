/**
 * The one error class of age envelopes: a `code` says what failed, the
 * message names the object or key by position or public form, never by
 * secret. Nothing here is worth retrying unchanged.
 */
const MARKER = Symbol.for('x.age-envelope.error');

export type AgeErrorCode =
  /** A recipient is not an `age1…` X25519 public key. */
  | 'AGE_RECIPIENT_INVALID'
  /** An identity is not an `AGE-SECRET-KEY-1…` X25519 secret key. */
  | 'AGE_IDENTITY_INVALID'
  /** The bytes are not an age v1 file, or its header is malformed. */
  | 'AGE_HEADER_INVALID'
  /** No identity given opens any of the file's recipient stanzas. */
  | 'AGE_NO_MATCHING_IDENTITY'
  /** The header was changed after it was written (its MAC does not match). */
  | 'AGE_HEADER_MAC_INVALID'
  /** The payload was changed, cut short or extended. */
  | 'AGE_PAYLOAD_INVALID';

export class AgeError extends Error {
  readonly code: AgeErrorCode;

  constructor(code: AgeErrorCode, message: string) {
    super(message);
    this.name = 'AgeError';
    this.code = code;
    Object.defineProperty(this, MARKER, { value: true });
  }

  /** Always `false`: the same bytes and keys fail the same way. */
  get retryable(): boolean {
    return false;
  }

  /** True for an `AgeError` of any copy of this package. */
  static isInstance(value: unknown): value is AgeError {
    return typeof value === 'object' && value !== null && MARKER in value;
  }
}
