/**
 * CRC-32 combination: the CRC of `A ++ B` from the CRCs of `A` and `B` and
 * the length of `B`, without reading the bytes again (the method of zlib's
 * `crc32_combine`: multiplication by x^(8·len) modulo the CRC polynomial).
 * It lets one pass over a framed log yield both every frame's CRC and the
 * whole file's.
 */

/** The reflected CRC-32 polynomial (zlib's). */
const POLYNOMIAL = 0xedb88320;

/** a(x)·b(x) modulo the polynomial, in the reflected bit order. */
function multiplyModulo(a: number, b: number): number {
  let mask = 0x80000000;
  let product = 0;
  let factor = b;
  for (;;) {
    if ((a & mask) !== 0) {
      product ^= factor;
      if ((a & (mask - 1)) === 0) break;
    }
    mask >>>= 1;
    factor = factor & 1 ? (factor >>> 1) ^ POLYNOMIAL : factor >>> 1;
  }
  return product >>> 0;
}

/** POWERS[k] = x^(2^k) modulo the polynomial. */
const POWERS: number[] = (() => {
  const powers: number[] = [];
  let power = 0x40000000; // x^1
  for (let k = 0; k < 64; k++) {
    powers.push(power);
    power = multiplyModulo(power, power);
  }
  return powers;
})();

/** x^(8·bytes) modulo the polynomial: the operator that shifts a CRC past `bytes` bytes. */
function shiftOperator(bytes: number): number {
  let operator = 0x80000000; // x^0
  let remaining = bytes;
  let k = 3; // 8 bits per byte
  while (remaining > 0) {
    if (remaining % 2 === 1) operator = multiplyModulo(POWERS[k % 64]!, operator);
    remaining = Math.floor(remaining / 2);
    k++;
  }
  return operator;
}

let cachedLength = -1;
let cachedOperator = 0x80000000;

/**
 * CRC-32 of `A ++ B` given `crcA = crc32(A)`, `crcB = crc32(B)` and
 * `lengthB = B.length` (an integer in 0..2^53 − 1). A few hundred integer
 * operations; the operator for the last length is cached, since the frames of
 * one log often share a length.
 */
export function crc32Combine(crcA: number, crcB: number, lengthB: number): number {
  if (lengthB !== cachedLength) {
    cachedOperator = shiftOperator(lengthB);
    cachedLength = lengthB;
  }
  return (multiplyModulo(cachedOperator, crcA >>> 0) ^ crcB) >>> 0;
}
