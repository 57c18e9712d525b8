import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Crc32, crc32, crc32Hex, formatCrc32, isCrc32Hex, parseCrc32Hex } from './crc32.ts';

const text = (value: string): Uint8Array => new TextEncoder().encode(value);

describe('crc32', () => {
  it('matches the published check value of CRC-32/ISO-HDLC', () => {
    expect(crc32(text('123456789'))).toBe(0xcbf43926);
    expect(crc32Hex(text('123456789'))).toBe('cbf43926');
    expect(crc32(new Uint8Array(0))).toBe(0);
  });

  it('formats as 8 lowercase hex digits, zero-padded', () => {
    expect(formatCrc32(0)).toBe('00000000');
    expect(formatCrc32(0xabc)).toBe('00000abc');
    expect(formatCrc32(0xffffffff)).toBe('ffffffff');
    expect(() => formatCrc32(-1)).toThrow(RangeError);
    expect(() => formatCrc32(2 ** 32)).toThrow(RangeError);
    expect(() => formatCrc32(1.5)).toThrow(RangeError);
  });

  it('accepts only the form it writes', () => {
    expect(isCrc32Hex('cbf43926')).toBe(true);
    for (const bad of ['CBF43926', '0xcbf439', 'cbf4392', 'cbf439260', ' cbf4392', 'cbf4392g', 5]) {
      expect(isCrc32Hex(bad)).toBe(false);
    }
    expect(parseCrc32Hex('CBF43926')).toBeUndefined();
  });

  it('round-trips every u32 through formatCrc32 and parseCrc32Hex', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 0xffffffff }), (value) => {
        expect(parseCrc32Hex(formatCrc32(value))).toBe(value);
      }),
      { numRuns: 500 },
    );
  });

  it('gives the same CRC however the bytes are split into chunks', () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ maxLength: 2000 }),
        fc.array(fc.nat(), { maxLength: 10 }),
        (bytes, cuts) => {
          const points = [...new Set(cuts.map((cut) => cut % (bytes.length + 1)))].sort(
            (a, b) => a - b,
          );
          const streaming = new Crc32();
          let previous = 0;
          for (const point of [...points, bytes.length]) {
            streaming.update(bytes.subarray(previous, point));
            previous = point;
          }
          expect(streaming.digest()).toBe(crc32(bytes));
          expect(streaming.hex()).toBe(crc32Hex(bytes));
          expect(streaming.size).toBe(bytes.length);
          expect(crc32(bytes.subarray(7), crc32(bytes.subarray(0, 7)))).toBe(crc32(bytes));
        },
      ),
      { numRuns: 200 },
    );
  });
});
