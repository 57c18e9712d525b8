import { describe, expect, it } from 'vitest';
import { bech32Decode, bech32Encode } from './bech32.ts';
import { AgeError } from './errors.ts';
import { generateIdentity, parseIdentity, parseIdentityFile, parseRecipient } from './keys.ts';

function codeOf(action: () => unknown): string {
  try {
    action();
    return 'accepted';
  } catch (error) {
    return AgeError.isInstance(error) ? error.code : String(error);
  }
}

describe('age keys', () => {
  it('decodes the BIP 173 test vector and round-trips bytes', () => {
    expect(bech32Decode('A12UEL5L')).toEqual({ prefix: 'a', bytes: new Uint8Array() });
    const bytes = Uint8Array.from({ length: 32 }, (_, index) => index * 7);
    expect(bech32Decode(bech32Encode('age', bytes))?.bytes).toEqual(bytes);
    expect(bech32Decode('a12uel5m')).toBeNull();
    expect(bech32Decode('A12uel5l')).toBeNull();
  });

  it('parses a generated pair, and an identity file with comments and blank lines', () => {
    const pair = generateIdentity();
    expect(pair.recipient).toMatch(/^age1[02-9ac-hj-np-z]{58}$/);
    expect(pair.identity).toMatch(/^AGE-SECRET-KEY-1[02-9AC-HJ-NP-Z]{58}$/);
    expect(parseIdentity(pair.identity).recipient.text).toBe(pair.recipient);
    const file = `# created: now\n# public key: ${pair.recipient}\n\n${pair.identity}\n`;
    const [parsed] = parseIdentityFile(file, 'key.txt');
    expect(parsed?.source).toBe('key.txt line 4');
    expect(parsed?.recipient.text).toBe(pair.recipient);
  });

  it('refuses malformed keys with typed errors that never show a secret', () => {
    const pair = generateIdentity();
    expect(codeOf(() => parseRecipient('age1qqqq'))).toBe('AGE_RECIPIENT_INVALID');
    expect(codeOf(() => parseRecipient(pair.recipient.toUpperCase()))).toBe(
      'AGE_RECIPIENT_INVALID',
    );
    expect(codeOf(() => parseRecipient(pair.identity))).toBe('AGE_RECIPIENT_INVALID');
    const damaged = `${pair.identity.slice(0, -1)}${pair.identity.endsWith('Q') ? 'P' : 'Q'}`;
    for (const text of [damaged, pair.identity.toLowerCase(), pair.recipient]) {
      try {
        parseIdentity(text, 'keys.txt line 2');
        expect.unreachable();
      } catch (error) {
        expect(AgeError.isInstance(error) && error.code).toBe('AGE_IDENTITY_INVALID');
        expect((error as Error).message).toContain('keys.txt line 2');
        expect((error as Error).message).not.toContain(text);
      }
    }
    expect(codeOf(() => parseIdentityFile('# nothing here\n', 'empty.txt'))).toBe(
      'AGE_IDENTITY_INVALID',
    );
  });
});
