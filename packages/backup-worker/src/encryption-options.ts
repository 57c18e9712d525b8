/**
 * What the `encryption` option accepts. Messages name recipients by their
 * public `age1…` text and identities by position and source, never by a
 * secret.
 */
import { createPublicKey, KeyObject } from 'node:crypto';
import { type AgeRecipient, recipientFromPublicKey } from '@x/age-envelope';
import { BackupError } from './errors.ts';
import { type EncryptionOptions, MAX_ENCRYPTION_RECIPIENTS } from './worker-options.ts';

/** DER prefix of an X25519 SubjectPublicKeyInfo: the raw key follows it. */
const SPKI_PREFIX_BYTES = 12;

/** Why `encryption` is not usable (a sentence for `invalid encryption…`), or `undefined`. */
export function encryptionOptionsProblem(options: EncryptionOptions): string | undefined {
  if (typeof options !== 'object' || options === null) return 'encryption: not an object';
  const { recipients, identities = [] } = options;
  if (!Array.isArray(recipients) || recipients.length === 0)
    return 'encryption.recipients: at least one age recipient (age1…) is needed';
  if (recipients.length > MAX_ENCRYPTION_RECIPIENTS)
    return `encryption.recipients: ${recipients.length} recipients, at most ${MAX_ENCRYPTION_RECIPIENTS} (one of an object's 32 is kept for the tenure key)`;
  const seen = new Set<string>();
  for (const [index, recipient] of recipients.entries()) {
    if (!isRecipient(recipient))
      return `encryption.recipients[${index}]: not an age X25519 recipient (make it with parseRecipient)`;
    if (seen.has(recipient.text)) return `encryption.recipients: ${recipient.text} is listed twice`;
    seen.add(recipient.text);
  }
  if (!Array.isArray(identities)) return 'encryption.identities: not an array';
  for (const [index, identity] of identities.entries()) {
    const problem = identityProblem(identity);
    if (problem !== undefined) return `encryption.identities[${index}]: ${problem}`;
  }
  return undefined;
}

function isRecipient(value: unknown): value is AgeRecipient {
  const recipient = value as AgeRecipient | null | undefined;
  if (
    typeof recipient?.text !== 'string' ||
    !(recipient.publicKey instanceof Uint8Array) ||
    recipient.publicKey.length !== 32
  )
    return false;
  return recipientFromPublicKey(recipient.publicKey).text === recipient.text;
}

function identityProblem(value: unknown): string | undefined {
  const identity = value as
    | { recipient?: unknown; privateKey?: unknown; source?: unknown }
    | null
    | undefined;
  const key = identity?.privateKey;
  if (
    !(key instanceof KeyObject) ||
    key.type !== 'private' ||
    key.asymmetricKeyType !== 'x25519' ||
    !isRecipient(identity?.recipient)
  )
    return 'not an age X25519 identity (make it with parseIdentity or parseIdentityFile)';
  const publicKey = createPublicKey(key)
    .export({ format: 'der', type: 'spki' })
    .subarray(SPKI_PREFIX_BYTES);
  if (!Buffer.from(identity.recipient.publicKey).equals(publicKey))
    return `its recipient ${identity.recipient.text} is not its secret key's`;
  return undefined;
}

/** The options error for `encryption`, as the worker's other options report theirs. */
export function invalidEncryption(problem: string): BackupError {
  return new BackupError(`invalid ${problem}`);
}
