/**
 * CRC-32 (IEEE 802.3, the zlib/PNG/gzip polynomial) on `node:zlib`'s native
 * implementation. Values are unsigned 32-bit integers; their text form in
 * manifests and keys is exactly 8 lowercase hex digits.
 */
import { crc32 as zlibCrc32 } from 'node:zlib';

const CRC32_HEX = /^[0-9a-f]{8}$/;

/**
 * CRC-32 of `bytes`, continuing from `previous` (the CRC of everything before
 * `bytes`; 0 to start). `crc32(b, crc32(a)) === crc32(a ++ b)`.
 */
export function crc32(bytes: Uint8Array, previous = 0): number {
  return zlibCrc32(bytes, previous) >>> 0;
}

/** A CRC-32 as exactly 8 lowercase hex digits. Throws RangeError for a value that is not a u32. */
export function formatCrc32(value: number): string {
  if (!Number.isInteger(value) || value < 0 || value > 0xffffffff) {
    throw new RangeError(`not a CRC-32 value (an integer 0..2^32-1): ${value}`);
  }
  return value.toString(16).padStart(8, '0');
}

/** `formatCrc32(crc32(bytes))`. */
export function crc32Hex(bytes: Uint8Array): string {
  return formatCrc32(crc32(bytes));
}

/** True for exactly 8 lowercase hex digits, the only text form this package writes or accepts. */
export function isCrc32Hex(text: unknown): text is string {
  return typeof text === 'string' && CRC32_HEX.test(text);
}

/**
 * The inverse of {@link formatCrc32}: the value of 8 lowercase hex digits, or
 * undefined for anything else (uppercase, a `0x` prefix, other lengths).
 */
export function parseCrc32Hex(text: string): number | undefined {
  return isCrc32Hex(text) ? Number.parseInt(text, 16) : undefined;
}

/**
 * A CRC-32 computed over a sequence of chunks: the result does not depend on
 * how the bytes were split.
 */
export class Crc32 {
  #value = 0;
  #bytes = 0;

  /** Adds `chunk` to the checksummed bytes. */
  update(chunk: Uint8Array): this {
    this.#value = crc32(chunk, this.#value);
    this.#bytes += chunk.byteLength;
    return this;
  }

  /** The CRC-32 of every byte passed to {@link update} so far. */
  digest(): number {
    return this.#value;
  }

  /** {@link digest} as 8 lowercase hex digits. */
  hex(): string {
    return formatCrc32(this.#value);
  }

  /** How many bytes were checksummed. */
  get size(): number {
    return this.#bytes;
  }
}
