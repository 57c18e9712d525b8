/**
 * age X25519 keys: recipients (`age1…`, public) and identities
 * (`AGE-SECRET-KEY-1…`, secret), parsed from their text, from `age-keygen`
 * files, or generated. A secret key is never part of an error message.
 */
import {
  createPrivateKey,
  createPublicKey,
  diffieHellman,
  generateKeyPairSync,
  type KeyObject,
} from 'node:crypto';
import { bech32Decode, bech32Encode } from './bech32.ts';
import { AgeError } from './errors.ts';

const RECIPIENT_PREFIX = 'age';
const IDENTITY_PREFIX = 'age-secret-key-';
// DER framing of a raw 32-byte X25519 key, as Node's key import wants it.
const PKCS8_PREFIX = Buffer.from('302e020100300506032b656e04220420', 'hex');
const SPKI_PREFIX = Buffer.from('302a300506032b656e032100', 'hex');

/** An X25519 public key: what a host that only writes backups holds. */
export interface AgeRecipient {
  /** The `age1…` text. */
  readonly text: string;
  readonly publicKey: Uint8Array;
}

/** An X25519 secret key, with the recipient it answers to. */
export interface AgeIdentity {
  readonly recipient: AgeRecipient;
  /** Where it came from, for messages (e.g. `keys.txt line 3`); never the key. */
  readonly source: string;
  readonly privateKey: KeyObject;
}

export function publicKeyObject(publicKey: Uint8Array): KeyObject {
  return createPublicKey({
    key: Buffer.concat([SPKI_PREFIX, publicKey]),
    format: 'der',
    type: 'spki',
  });
}

export function rawPublicKey(key: KeyObject): Uint8Array {
  return new Uint8Array(key.export({ format: 'der', type: 'spki' }).subarray(SPKI_PREFIX.length));
}

const recipientKeys = new WeakMap<AgeRecipient, KeyObject>();

/** A recipient's public key as a key object, made once per recipient: every object wraps to it. */
export function recipientKeyObject(recipient: AgeRecipient): KeyObject {
  let key = recipientKeys.get(recipient);
  if (key === undefined) {
    key = publicKeyObject(recipient.publicKey);
    recipientKeys.set(recipient, key);
  }
  return key;
}

/** X25519 of `privateKey` and `publicKey`; refuses the all-zero result of a low-order point. */
export function sharedSecret(
  privateKey: KeyObject,
  publicKey: Uint8Array | KeyObject,
): Uint8Array | null {
  const secret = diffieHellman({
    privateKey,
    publicKey: publicKey instanceof Uint8Array ? publicKeyObject(publicKey) : publicKey,
  });
  return secret.every((byte) => byte === 0) ? null : new Uint8Array(secret);
}

/** @throws AgeError `AGE_RECIPIENT_INVALID` naming the text (public, so safe to show). */
export function parseRecipient(text: string): AgeRecipient {
  const trimmed = text.trim();
  const decoded = bech32Decode(trimmed);
  if (
    decoded === null ||
    decoded.prefix !== RECIPIENT_PREFIX ||
    decoded.bytes.length !== 32 ||
    trimmed !== trimmed.toLowerCase()
  ) {
    // A secret key pasted where a recipient belongs must not be echoed back.
    const shown = trimmed.toLowerCase().startsWith(IDENTITY_PREFIX)
      ? 'a secret key (AGE-SECRET-KEY-1…) was given where a public recipient belongs'
      : JSON.stringify(trimmed.slice(0, 80));
    throw new AgeError(
      'AGE_RECIPIENT_INVALID',
      `not an age X25519 recipient (expected age1… as age-keygen prints it): ${shown}`,
    );
  }
  return { text: trimmed, publicKey: decoded.bytes };
}

/** The recipient whose X25519 public key is `publicKey` (32 bytes). */
export function recipientFromPublicKey(publicKey: Uint8Array): AgeRecipient {
  if (publicKey.length !== 32)
    throw new AgeError(
      'AGE_RECIPIENT_INVALID',
      `an X25519 public key is 32 bytes, not ${publicKey.length}`,
    );
  return { text: bech32Encode(RECIPIENT_PREFIX, publicKey), publicKey: new Uint8Array(publicKey) };
}

/**
 * @param source where the text came from, for the error (never the key itself).
 * @throws AgeError `AGE_IDENTITY_INVALID` naming `source` only.
 */
export function parseIdentity(text: string, source = 'an identity'): AgeIdentity {
  const trimmed = text.trim();
  const decoded = bech32Decode(trimmed);
  if (
    decoded === null ||
    decoded.prefix !== IDENTITY_PREFIX ||
    decoded.bytes.length !== 32 ||
    trimmed !== trimmed.toUpperCase()
  ) {
    throw new AgeError(
      'AGE_IDENTITY_INVALID',
      `${source} is not an age X25519 identity (expected AGE-SECRET-KEY-1… as age-keygen writes it)`,
    );
  }
  const privateKey = createPrivateKey({
    key: Buffer.concat([PKCS8_PREFIX, decoded.bytes]),
    format: 'der',
    type: 'pkcs8',
  });
  const publicKey = rawPublicKey(createPublicKey(privateKey));
  return {
    recipient: { text: bech32Encode(RECIPIENT_PREFIX, publicKey), publicKey },
    source,
    privateKey,
  };
}

/**
 * Every identity in an identity file as `age-keygen` writes it: one key a
 * line; blank lines and lines starting with `#` are skipped.
 * @param name the file's name, for errors (`name line N`).
 * @throws AgeError `AGE_IDENTITY_INVALID` for a line that is not a key, or a file with none.
 */
export function parseIdentityFile(content: string, name: string): AgeIdentity[] {
  const identities: AgeIdentity[] = [];
  for (const [index, line] of content.split(/\r?\n/).entries()) {
    const trimmed = line.trim();
    if (trimmed === '' || trimmed.startsWith('#')) continue;
    identities.push(parseIdentity(trimmed, `${name} line ${index + 1}`));
  }
  if (identities.length === 0)
    throw new AgeError('AGE_IDENTITY_INVALID', `${name} holds no age identity`);
  return identities;
}

/** A new X25519 key pair as text: the identity (secret) and its recipient (public). */
export function generateIdentity(): { identity: string; recipient: string } {
  const { privateKey, publicKey } = generateKeyPairSync('x25519');
  const secret = privateKey.export({ format: 'der', type: 'pkcs8' }).subarray(PKCS8_PREFIX.length);
  return {
    identity: bech32Encode(IDENTITY_PREFIX, new Uint8Array(secret)).toUpperCase(),
    recipient: bech32Encode(RECIPIENT_PREFIX, rawPublicKey(publicKey)),
  };
}
