/**
 * Whether the age identities given open an encrypted object, and the
 * refusal when they do not ({@link ObjectKeyError}): before a restore
 * downloads anything, the headers of the objects it needs are read (in
 * clear) so the refusal names every object locked, not only the first.
 */
import type { AgeIdentity } from '@x/age-envelope';
import type { ObjectStore } from '@x/store';
import type { SegmentObjectKeyError } from '@x/wal-segment';
import {
  encryptionOfHeader,
  type GenerationEncryption,
  isEnvelopeKey,
} from './generation-encryption.ts';
import { type IdentityGiven, type LockedObject, ObjectKeyError } from './restore-errors.ts';
import { readStoredHeader } from './stored-header.ts';

/** Headers read at once, and at most, to name the locked objects of a refused restore. */
const PARALLEL_HEADER_READS = 8;
const MAX_HEADER_READS = 256;

export function identitiesGiven(identities: readonly AgeIdentity[]): IdentityGiven[] {
  return identities.map((identity) => ({
    source: identity.source,
    recipient: identity.recipient.text,
  }));
}

/** True when `state` is plaintext or one of `identities` is one of its recipients. */
export function opens(identities: readonly AgeIdentity[], state: GenerationEncryption): boolean {
  if (state.encryption === 'none') return true;
  const wanted = new Set(state.recipients);
  return identities.some((identity) => wanted.has(identity.recipient.text));
}

/** The refusal of the one object `key` that `error` (from `@x/wal-segment`) could not open. */
export function keyErrorOf(
  key: string,
  error: SegmentObjectKeyError,
  identities: readonly AgeIdentity[],
): ObjectKeyError {
  return new ObjectKeyError(
    [{ key, recipients: [...error.recipients].sort() }],
    identitiesGiven(identities),
    { cause: error },
  );
}

/**
 * The refusal of a restore whose generation `lead` states recipients none
 * of `identities` answers to, naming every one of `keys` found locked (up
 * to {@link MAX_HEADER_READS} headers read; the rest counted as unchecked).
 */
export async function lockedObjectsError(
  store: ObjectStore,
  prefix: string,
  lead: GenerationEncryption,
  keys: readonly string[],
  identities: readonly AgeIdentity[],
  signal?: AbortSignal,
): Promise<ObjectKeyError> {
  const others = [...new Set(keys)].filter((key) => key !== lead.key && isEnvelopeKey(prefix, key));
  const read = others.slice(0, MAX_HEADER_READS);
  const found: (GenerationEncryption | undefined)[] = new Array(read.length);
  let next = 0;
  const reader = async (): Promise<void> => {
    while (next < read.length) {
      const index = next;
      next += 1;
      const header = await readStoredHeader(store, read[index]!, signal);
      found[index] = header === undefined ? undefined : encryptionOfHeader(read[index]!, header);
    }
  };
  await Promise.all(Array.from({ length: Math.min(PARALLEL_HEADER_READS, read.length) }, reader));
  const locked: LockedObject[] = [lead, ...found]
    .filter((state): state is GenerationEncryption => state !== undefined)
    .filter((state) => !opens(identities, state))
    .map((state) => ({ key: state.key, recipients: state.recipients }));
  return new ObjectKeyError(locked, identitiesGiven(identities), {
    unchecked: others.length - read.length,
  });
}
