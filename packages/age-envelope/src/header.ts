/**
 * The age v1 header: the version line, one stanza per recipient, and a MAC
 * line. Writing gives the bytes; reading is strict (canonical unpadded
 * base64, 64-column bodies, the exact line structure), as the format asks,
 * so one file has one encoding.
 */
import { createHmac, hkdfSync, timingSafeEqual } from 'node:crypto';
import { AgeError } from './errors.ts';

export const VERSION_LINE = 'age-encryption.org/v1';
const COLUMNS = 64;

export interface Stanza {
  readonly type: string;
  readonly args: readonly string[];
  readonly body: Uint8Array;
}

/** Unpadded standard base64, as age writes it. */
export function toBase64(bytes: Uint8Array): string {
  return Buffer.from(bytes).toString('base64').replace(/=+$/, '');
}

/** Strict unpadded base64: `null` unless `text` is exactly what `toBase64` gives for its bytes. */
export function fromBase64(text: string): Uint8Array | null {
  if (!/^[A-Za-z0-9+/]*$/.test(text) || text.length % 4 === 1) return null;
  const bytes = new Uint8Array(Buffer.from(text, 'base64'));
  return toBase64(bytes) === text ? bytes : null;
}

function macKey(fileKey: Uint8Array): Buffer {
  return Buffer.from(hkdfSync('sha256', fileKey, new Uint8Array(0), 'header', 32));
}

/** The header's text before the MAC: the version line, the stanzas, and `---`. */
function headerBeforeMac(stanzas: readonly Stanza[]): string {
  const lines = [VERSION_LINE];
  for (const stanza of stanzas) {
    lines.push(['->', stanza.type, ...stanza.args].join(' '));
    const body = toBase64(stanza.body);
    for (let start = 0; ; start += COLUMNS) {
      const line = body.slice(start, start + COLUMNS);
      lines.push(line);
      if (line.length < COLUMNS) break;
    }
  }
  lines.push('---');
  return lines.join('\n');
}

/** The whole header, MAC line and its newline included. */
export function writeHeader(stanzas: readonly Stanza[], fileKey: Uint8Array): Uint8Array {
  const before = headerBeforeMac(stanzas);
  const mac = createHmac('sha256', macKey(fileKey)).update(before).digest();
  return new TextEncoder().encode(`${before} ${toBase64(mac)}\n`);
}

export interface ParsedHeader {
  readonly stanzas: readonly Stanza[];
  /** The bytes the MAC covers (up to and including `---`). */
  readonly macInput: Uint8Array;
  readonly mac: Uint8Array;
  /** How many bytes of the input the header takes, its final newline included. */
  readonly length: number;
}

function invalid(detail: string): AgeError {
  return new AgeError('AGE_HEADER_INVALID', `not a valid age v1 file: ${detail}`);
}

const ARGUMENT = /^[\x21-\x7e]+$/;

/**
 * Reads the header at the start of `bytes`.
 * @returns `null` when `bytes` ends before the header does (read more).
 * @throws AgeError `AGE_HEADER_INVALID` naming what is wrong.
 */
export function readHeader(bytes: Uint8Array, final: boolean): ParsedHeader | null {
  let offset = 0;
  const nextLine = (): string | null => {
    const end = bytes.indexOf(0x0a, offset);
    if (end < 0) {
      if (final) throw invalid('the header ends before its MAC line');
      return null;
    }
    const line = Buffer.from(bytes.subarray(offset, end)).toString('latin1');
    offset = end + 1;
    return line;
  };
  const version = nextLine();
  if (version === null) return null;
  if (version !== VERSION_LINE) throw invalid(`the first line is not "${VERSION_LINE}"`);
  const stanzas: Stanza[] = [];
  for (;;) {
    const lineStart = offset;
    const line = nextLine();
    if (line === null) return null;
    if (line.startsWith('--- ') || line === '---') {
      const mac = fromBase64(line.slice(4));
      if (mac === null || mac.length !== 32) throw invalid('the MAC line is malformed');
      if (stanzas.length === 0) throw invalid('it has no recipient stanza');
      return { stanzas, macInput: bytes.slice(0, lineStart + 3), mac, length: offset };
    }
    if (!line.startsWith('-> '))
      throw invalid('a line between stanzas is not a stanza or MAC line');
    const [type, ...args] = line.slice(3).split(' ');
    if (type === undefined || !ARGUMENT.test(type) || args.some((arg) => !ARGUMENT.test(arg)))
      throw invalid('a stanza line has an empty or non-printable argument');
    const parts: string[] = [];
    for (;;) {
      const bodyLine = nextLine();
      if (bodyLine === null) return null;
      if (bodyLine.length > COLUMNS) throw invalid('a stanza body line is longer than 64 columns');
      parts.push(bodyLine);
      if (bodyLine.length < COLUMNS) break;
    }
    const body = fromBase64(parts.join(''));
    if (body === null) throw invalid('a stanza body is not canonical unpadded base64');
    stanzas.push({ type, args, body });
  }
}

/** @throws AgeError `AGE_HEADER_MAC_INVALID` when the header is not the one written with `fileKey`. */
export function checkHeaderMac(header: ParsedHeader, fileKey: Uint8Array): void {
  const expected = createHmac('sha256', macKey(fileKey)).update(header.macInput).digest();
  if (!timingSafeEqual(expected, header.mac))
    throw new AgeError(
      'AGE_HEADER_MAC_INVALID',
      'the age header was changed after it was written (its MAC does not match)',
    );
}
