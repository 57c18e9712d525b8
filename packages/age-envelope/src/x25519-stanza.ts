/**
 * The X25519 recipient stanza: the file key wrapped for one public key,
 * with a fresh ephemeral key per stanza (age's construction: X25519, then
 * HKDF-SHA256 over the ephemeral share and the recipient, then
 * ChaCha20-Poly1305 with a zero nonce).
 */
import { createCipheriv, createDecipheriv, generateKeyPairSync, hkdfSync } from 'node:crypto';
import { fromBase64, type Stanza, toBase64 } from './header.ts';
import {
  type AgeIdentity,
  type AgeRecipient,
  rawPublicKey,
  recipientKeyObject,
  sharedSecret,
} from './keys.ts';

const STANZA_TYPE = 'X25519';
const INFO = 'age-encryption.org/v1/X25519';
const ZERO_NONCE = new Uint8Array(12);
const TAG_BYTES = 16;

function wrapKey(secret: Uint8Array, share: Uint8Array, recipient: Uint8Array): Buffer {
  const salt = Buffer.concat([share, recipient]);
  return Buffer.from(hkdfSync('sha256', secret, salt, INFO, 32));
}

export function wrapFileKey(fileKey: Uint8Array, recipient: AgeRecipient): Stanza {
  const ephemeral = generateKeyPairSync('x25519');
  const share = rawPublicKey(ephemeral.publicKey);
  const secret = sharedSecret(ephemeral.privateKey, recipientKeyObject(recipient));
  // Only a low-order public key gives zero, and parseRecipient's keys come from age-keygen.
  if (secret === null) throw new Error('X25519 recipient is a low-order point');
  const cipher = createCipheriv(
    'chacha20-poly1305',
    wrapKey(secret, share, recipient.publicKey),
    ZERO_NONCE,
    {
      authTagLength: TAG_BYTES,
    },
  );
  const body = Buffer.concat([cipher.update(fileKey), cipher.final(), cipher.getAuthTag()]);
  return { type: STANZA_TYPE, args: [toBase64(share)], body: new Uint8Array(body) };
}

/** The file key if `stanza` is an X25519 stanza `identity` opens, else `null`. */
export function unwrapFileKey(stanza: Stanza, identity: AgeIdentity): Uint8Array | null {
  if (stanza.type !== STANZA_TYPE || stanza.args.length !== 1) return null;
  const share = fromBase64(stanza.args[0] as string);
  if (share === null || share.length !== 32 || stanza.body.length !== 16 + TAG_BYTES) return null;
  const secret = sharedSecret(identity.privateKey, share);
  if (secret === null) return null;
  const decipher = createDecipheriv(
    'chacha20-poly1305',
    wrapKey(secret, share, identity.recipient.publicKey),
    ZERO_NONCE,
    { authTagLength: TAG_BYTES },
  );
  decipher.setAuthTag(stanza.body.subarray(16));
  try {
    return new Uint8Array(
      Buffer.concat([decipher.update(stanza.body.subarray(0, 16)), decipher.final()]),
    );
  } catch {
    return null;
  }
}

export function isX25519Stanza(stanza: Stanza): boolean {
  return stanza.type === STANZA_TYPE;
}
