/**
 * Recognising an age secret key (`AGE-SECRET-KEY-1…`) in text, so that a
 * message about a value never shows it back and the redactor removes one
 * that reaches a print anyway. Case-insensitive: bech32 text is valid in
 * either case, and a key pasted in lower case is still the key.
 */

/** The key's prefix: what a message must not be built around. */
const PREFIX = /AGE-SECRET-KEY-/i;

/**
 * A key, or enough of one to matter: the prefix and at least 8 of its bech32
 * characters (the prefix is kept, so a log shows that a key was there; a
 * message's own `AGE-SECRET-KEY-1…` stays as written).
 */
export const AGE_SECRET_KEY_SHAPE = /(AGE-SECRET-KEY-)[0-9A-Z]{8,}/gi;

/** Whether `text` holds (the start of) an age secret key anywhere. */
export function holdsAgeSecretKey(text: string): boolean {
  return PREFIX.test(text);
}
