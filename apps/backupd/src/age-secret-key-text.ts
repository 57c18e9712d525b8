/**
 * Recognising an age secret key (`AGE-SECRET-KEY-1…`) in text, so that a
 * message about a value never shows it back and the redactor removes one
 * that reaches a print anyway. Case-insensitive: bech32 text is valid in
 * either case, and a key pasted in lower case is still the key.
 */

/** The key's prefix: what a message must not be built around. */
const PREFIX = /AGE-SECRET-KEY-/i;

/** A whole key: the prefix and its bech32 characters (kept, so a log shows that a key was there). */
export const AGE_SECRET_KEY_SHAPE = /(AGE-SECRET-KEY-)[0-9A-Z]+/gi;

/** Whether `text` holds (the start of) an age secret key anywhere. */
export function holdsAgeSecretKey(text: string): boolean {
  return PREFIX.test(text);
}
