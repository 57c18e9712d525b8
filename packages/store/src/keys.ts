/**
 * Key rules shared by every store: a key one backend accepts, all accept, and
 * none names a path outside a store's root. A key is `/`-separated segments.
 * Refused with {@link InvalidKeyError}: the empty key; a leading `/` (reads as
 * absolute), an empty segment or a trailing `/` (names no object); `.` and
 * `..` segments; control characters (U+0000–U+001F, U+007F); a backslash (a
 * separator on some systems); a lone surrogate (not encodable); more than
 * {@link MAX_KEY_BYTES} bytes of UTF-8. Pure: the format packages use these
 * rules through `@x/store/keys`, so a key a format builds every store takes.
 */
import { InvalidKeyError } from './errors.ts';

/** The longest key, in UTF-8 bytes (S3's and GCS's limit). */
export const MAX_KEY_BYTES = 1024;

function hasControlCharacter(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code < 0x20 || code === 0x7f) return true;
  }
  return false;
}

/** Why `key` is not a valid object key (the rules above), or `undefined`. Never throws. */
export function keyProblem(key: string): string | undefined {
  if (typeof key !== 'string') return 'not a string';
  if (key.length === 0) return 'empty';
  if (!key.isWellFormed()) return 'contains a lone surrogate (not valid Unicode)';
  if (hasControlCharacter(key)) return 'contains NUL or a control character';
  if (key.includes('\\')) return 'contains a backslash';
  if (Buffer.byteLength(key, 'utf8') > MAX_KEY_BYTES)
    return `longer than ${MAX_KEY_BYTES} bytes of UTF-8`;
  if (key.startsWith('/')) return 'starts with "/"';
  for (const segment of key.split('/')) {
    if (segment === '') return 'has an empty path segment ("//" or a trailing "/")';
    if (segment === '.' || segment === '..') return `has a "${segment}" segment`;
  }
  return undefined;
}

/** Throws {@link InvalidKeyError} unless `key` is a valid object key. */
export function validateKey(key: string): void {
  const problem = keyProblem(key);
  if (problem !== undefined) throw new InvalidKeyError(String(key), problem);
}

/** True when `key` is a valid object key. */
export function isValidKey(key: string): boolean {
  return keyProblem(key) === undefined;
}

/**
 * A prefix is either empty (the whole store) or a valid key, optionally with
 * one trailing `/`. Returns it normalised without the trailing `/`.
 */
export function normalizePrefix(prefix: string): string {
  if (prefix === '') return '';
  const trimmed = prefix.endsWith('/') ? prefix.slice(0, -1) : prefix;
  const problem = keyProblem(trimmed);
  if (problem !== undefined) throw new InvalidKeyError(prefix, `invalid prefix: ${problem}`);
  return trimmed;
}

/** `prefix + "/" + key`, or `key` alone for the empty prefix. */
export function joinKey(prefix: string, key: string): string {
  return prefix === '' ? key : `${prefix}/${key}`;
}

/**
 * Compares keys by their UTF-8 bytes, the order S3, GCS and Azure list in.
 * (JavaScript's `<` compares UTF-16 code units, which differs above U+FFFF.)
 */
export function compareKeys(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}
