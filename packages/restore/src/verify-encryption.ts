/**
 * verify's share of the encryption rules (generation-encryption.ts): a file
 * object (`.snap`, `.bko`) no identity opens is still read whole for its
 * size and CRC-32, and the objects a restore point names must state what
 * its first object states. Headers are in clear: both hold without a key.
 */
import type { FileEntry, Manifest } from '@x/manifest';
import type { ObjectStore } from '@x/store';
import { downloadFileObject } from './file-object-read.ts';
import {
  checkSameEncryption,
  type GenerationEncryption,
  generationLeadKey,
  isRawLayout,
  type ObjectOpenOptions,
  plaintext,
  restorePointKeys,
} from './generation-encryption.ts';
import { ObjectEncodingError, ObjectKeyError } from './restore-errors.ts';
import { downloadVerified, type VerifiedDownloadOptions } from './verified-download.ts';

/**
 * Reads a file object as restore does, its decoded bytes discarded. One no
 * identity opens is read again whole for its size and CRC-32, then its
 * `ObjectKeyError` is thrown.
 */
export async function verifyFileObject(
  store: ObjectStore,
  prefix: string,
  entry: FileEntry,
  options: VerifiedDownloadOptions & ObjectOpenOptions,
): Promise<GenerationEncryption> {
  try {
    return await downloadFileObject(store, prefix, entry, () => {}, options);
  } catch (error) {
    if (!ObjectKeyError.isInstance(error)) throw error;
    await downloadVerified(store, entry, () => {}, options);
    throw error;
  }
}

/** What a locked object's refusal says about its encryption. */
export function encryptionOfLocked(error: ObjectKeyError): GenerationEncryption | undefined {
  const [object] = error.objects;
  return object === undefined
    ? undefined
    : { key: object.key, encryption: 'age-x25519', recipients: object.recipients };
}

/**
 * The objects `manifest` names that state another encryption than its
 * generation's first object, from `stated` (what each header read said);
 * objects not read are not judged.
 */
export function mixedEncryption(
  prefix: string,
  manifest: Manifest,
  stated: ReadonlyMap<string, GenerationEncryption>,
): ObjectEncodingError[] {
  const stateOf = (key: string) => (isRawLayout(prefix, key) ? plaintext(key) : stated.get(key));
  const lead = generationLeadKey(prefix, manifest);
  const expected = lead === undefined ? undefined : stateOf(lead);
  if (expected === undefined) return [];
  const keys = restorePointKeys(manifest);
  const refused: ObjectEncodingError[] = [];
  for (const key of keys) {
    const found = stateOf(key);
    if (found === undefined) continue;
    try {
      checkSameEncryption(found, expected);
    } catch (error) {
      if (!ObjectEncodingError.isInstance(error)) throw error;
      refused.push(error);
    }
  }
  return refused;
}
