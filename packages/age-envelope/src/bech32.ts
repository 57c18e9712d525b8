/**
 * Bech32 (BIP 173), the text form of age keys: `age1…` recipients and
 * `AGE-SECRET-KEY-1…` identities. Without BIP 173's 90-character limit,
 * which age does not apply.
 */
const CHARSET = 'qpzry9x8gf2tvdw0s3jn54khce6mua7l';
const GENERATORS = [0x3b6a57b2, 0x26508e6d, 0x1ea119fa, 0x3d4233dd, 0x2a1462b3];

function polymod(values: readonly number[]): number {
  let checksum = 1;
  for (const value of values) {
    const top = checksum >>> 25;
    checksum = ((checksum & 0x1ffffff) << 5) ^ value;
    for (let bit = 0; bit < 5; bit++) if ((top >>> bit) & 1) checksum ^= GENERATORS[bit] as number;
  }
  return checksum;
}

function expandPrefix(prefix: string): number[] {
  const codes = [...prefix].map((char) => char.charCodeAt(0));
  return [...codes.map((code) => code >>> 5), 0, ...codes.map((code) => code & 31)];
}

/** Regroups bits: 8-bit bytes to 5-bit words (`pad`), or back (no padding allowed). */
function regroup(data: readonly number[], from: number, to: number, pad: boolean): number[] | null {
  let accumulator = 0;
  let bits = 0;
  const out: number[] = [];
  const mask = (1 << to) - 1;
  for (const value of data) {
    accumulator = (accumulator << from) | value;
    bits += from;
    while (bits >= to) {
      bits -= to;
      out.push((accumulator >>> bits) & mask);
    }
  }
  if (pad) {
    if (bits > 0) out.push((accumulator << (to - bits)) & mask);
  } else if (bits >= from || ((accumulator << (to - bits)) & mask) !== 0) {
    return null;
  }
  return out;
}

/** `prefix` (lower case) and `bytes` as Bech32, in lower case. */
export function bech32Encode(prefix: string, bytes: Uint8Array): string {
  const words = regroup([...bytes], 8, 5, true) as number[];
  const checksum = polymod([...expandPrefix(prefix), ...words, 0, 0, 0, 0, 0, 0]) ^ 1;
  const checksumWords = Array.from(
    { length: 6 },
    (_, index) => (checksum >>> (5 * (5 - index))) & 31,
  );
  return `${prefix}1${[...words, ...checksumWords].map((word) => CHARSET[word]).join('')}`;
}

/**
 * The prefix (lower case) and bytes of a Bech32 string, or `null` when it is
 * not one: mixed case, a character outside the set, or a wrong checksum.
 */
export function bech32Decode(text: string): { prefix: string; bytes: Uint8Array } | null {
  if (text !== text.toLowerCase() && text !== text.toUpperCase()) return null;
  const lower = text.toLowerCase();
  const separator = lower.lastIndexOf('1');
  if (separator < 1 || separator + 7 > lower.length) return null;
  const prefix = lower.slice(0, separator);
  const words: number[] = [];
  for (const char of lower.slice(separator + 1)) {
    const word = CHARSET.indexOf(char);
    if (word < 0) return null;
    words.push(word);
  }
  if (polymod([...expandPrefix(prefix), ...words]) !== 1) return null;
  const bytes = regroup(words.slice(0, -6), 5, 8, false);
  return bytes === null ? null : { prefix, bytes: Uint8Array.from(bytes) };
}
