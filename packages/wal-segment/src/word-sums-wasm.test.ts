/**
 * The WebAssembly kernel of the WAL checksum gives the sums a plain
 * reference loop gives, for any length (across its 64 KiB chunks) and any
 * start; and `sqliteWalChecksum`, which hands it whole 8-word blocks and does
 * the rest itself, agrees with the reference for every length, alignment and
 * byte order. (The inputs are Node Buffers, whose `slice` is a view: an
 * unaligned one once checksummed the wrong bytes.)
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { sqliteWalChecksum } from './sqlite-wal.ts';
import { WORD_SUMS_BLOCK_BYTES, WORD_SUMS_CHUNK_BYTES, wasmWordSums } from './word-sums-wasm.ts';

/** SQLite's checksum as its file-format document states it, one word at a time. */
function reference(
  bytes: Uint8Array,
  littleEndian: boolean,
  initial: readonly [number, number],
): [number, number] {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let [s0, s1] = initial;
  for (let at = 0; at < bytes.byteLength; at += 8) {
    s0 = (s0 + view.getUint32(at, littleEndian) + s1) >>> 0;
    s1 = (s1 + view.getUint32(at + 4, littleEndian) + s0) >>> 0;
  }
  return [s0, s1];
}

const STARTS: [number, number][] = [
  [0, 0],
  [0xffffffff, 0x80000001],
  [0x12345678, 0x9abcdef0],
];

describe('wasmWordSums', () => {
  it('runs here (Node compiles the kernel; no silent fallback to the slower loop)', () => {
    expect(wasmWordSums).not.toBeNull();
  });

  it('gives the reference sums for lengths within, at and across its chunks', () => {
    const kernel = wasmWordSums!;
    for (const length of [
      WORD_SUMS_BLOCK_BYTES,
      4096,
      WORD_SUMS_CHUNK_BYTES - WORD_SUMS_BLOCK_BYTES,
      WORD_SUMS_CHUNK_BYTES,
      WORD_SUMS_CHUNK_BYTES + WORD_SUMS_BLOCK_BYTES,
      3 * WORD_SUMS_CHUNK_BYTES + 4096,
    ]) {
      const bytes = randomBytes(length);
      for (const start of STARTS) {
        kernel.add(bytes, start[0] | 0, start[1] | 0);
        expect(
          [kernel.sums[0]! >>> 0, kernel.sums[1]! >>> 0],
          `${length} bytes from ${start}`,
        ).toEqual(reference(bytes, true, start));
      }
    }
  });

  it('adds nothing for no bytes', () => {
    const kernel = wasmWordSums!;
    kernel.add(new Uint8Array(0), 5, 6);
    expect([...kernel.sums]).toEqual([5, 6]);
  });

  it('refuses a length that is not whole blocks, naming it', () => {
    expect(() => wasmWordSums!.add(new Uint8Array(40), 0, 0)).toThrow(
      /multiples of 32 bytes, not 40/,
    );
  });
});

describe('sqliteWalChecksum', () => {
  it('agrees with the reference for every length, alignment and byte order', () => {
    const backing = randomBytes(2 * WORD_SUMS_CHUNK_BYTES + 64);
    // Lengths below, at and above where the kernel takes over, with tails of
    // every size of less than a block; offsets aligned and not.
    const lengths = [0, 8, 248, 256, 264, 4096, 4104, 4128, 65_536 + 24, 2 * WORD_SUMS_CHUNK_BYTES];
    for (const length of lengths) {
      for (const offset of [0, 4, 1, 3]) {
        const bytes = backing.subarray(offset, offset + length);
        for (const start of STARTS) {
          for (const order of ['little-endian', 'big-endian'] as const) {
            expect(
              sqliteWalChecksum(bytes, order, start),
              `${length} bytes at +${offset}, ${order}, from ${start}`,
            ).toEqual(reference(bytes, order === 'little-endian', start));
          }
        }
      }
    }
  });
});
