import { crc32 } from 'node:zlib';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { crc32Combine } from './crc32-combine.ts';

describe('crc32Combine', () => {
  it('gives the CRC of the concatenation', () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ maxLength: 3000 }),
        fc.uint8Array({ maxLength: 3000 }),
        (a, b) => {
          const whole = Buffer.concat([a, b]);
          expect(crc32Combine(crc32(a), crc32(b), b.length)).toBe(crc32(whole) >>> 0);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('handles empty parts and long ones', () => {
    const a = new Uint8Array([1, 2, 3]);
    expect(crc32Combine(crc32(a), 0, 0)).toBe(crc32(a) >>> 0);
    expect(crc32Combine(0, crc32(a), 3)).toBe(crc32(a) >>> 0);
    const big = new Uint8Array(5 * 1024 * 1024 + 3).fill(0xa5);
    expect(crc32Combine(crc32(a), crc32(big), big.length)).toBe(
      crc32(Buffer.concat([a, big])) >>> 0,
    );
  });
});
