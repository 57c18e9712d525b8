/**
 * One generation, one encryption: the writer encrypts every object of a
 * restore point (snapshot, segments, and the archives, chain and side files
 * it names, whichever generation uploaded them) to one recipient set, or
 * none of them, and starts a new generation to change that. So every object
 * a restore point names must state what its first object (its snapshot,
 * else its first segment, else its first file) states; one that differs
 * (plaintext among encrypted objects, the reverse, other recipients) was not
 * written with it and is refused as `encryption`.
 */
import type { AgeIdentity } from '@x/age-envelope';
import {
  type Manifest,
  parseArchiveKey,
  parseSegmentKey,
  parseSideKey,
  parseSnapshotKey,
} from '@x/manifest';
import type { ObjectStore } from '@x/store';
import type { ObjectEncryption, SegmentObjectHeader } from '@x/wal-segment';
import { ObjectEncodingError } from './restore-errors.ts';
import { readStoredHeader } from './stored-header.ts';

/** What one object states about its encryption. */
export interface GenerationEncryption {
  /** The object it was read from. */
  readonly key: string;
  readonly encryption: ObjectEncryption;
  /** Its recipients (`age1…`), sorted; empty when `encryption` is `none`. */
  readonly recipients: readonly string[];
}

/** What opening an envelope object needs besides its bytes. */
export interface ObjectOpenOptions {
  /** The age identities that open encrypted objects. */
  readonly identities?: readonly AgeIdentity[];
  /** The encryption of the object's generation, which it must state too. */
  readonly encryption?: GenerationEncryption;
}

export function encryptionOfHeader(key: string, header: SegmentObjectHeader): GenerationEncryption {
  return {
    key,
    encryption: header.encryption,
    recipients: header.recipients.map((recipient) => recipient.text).sort(),
  };
}

/** An object of a raw layout (see {@link isRawLayout}): plaintext. */
export function plaintext(key: string): GenerationEncryption {
  return { key, encryption: 'none', recipients: [] };
}

function describe(state: GenerationEncryption): string {
  return state.encryption === 'none'
    ? 'not encrypted'
    : `encrypted to ${state.recipients.join(', ')}`;
}

/**
 * @throws ObjectEncodingError (`encryption`) naming `found.key` when it
 *   states another encryption or recipient set than `expected`.
 */
export function checkSameEncryption(
  found: GenerationEncryption,
  expected: GenerationEncryption | undefined,
): void {
  if (expected === undefined || found.key === expected.key) return;
  const same =
    found.encryption === expected.encryption &&
    found.recipients.length === expected.recipients.length &&
    found.recipients.every((recipient, index) => recipient === expected.recipients[index]);
  if (!same)
    throw new ObjectEncodingError(
      found.key,
      'encryption',
      `it is ${describe(found)}, its generation's first object ${expected.key} is ${describe(expected)}: one generation is encrypted to one recipient set or not at all`,
    );
}

/**
 * The object whose encryption `manifest`'s generation holds to: its
 * snapshot, else its first segment, else its first file; `undefined` when
 * it names nothing.
 */
export function generationLeadKey(prefix: string, manifest: Manifest): string | undefined {
  const snapshot = manifest.files.find(
    (file) => parseSnapshotKey(prefix, file.key)?.generation === manifest.walGeneration,
  );
  return snapshot?.key ?? manifest.segments[0]?.key ?? manifest.files[0]?.key;
}

/** Every object `manifest` names, files first: each must state its generation's encryption. */
export function restorePointKeys(manifest: Manifest): string[] {
  return [...manifest.files, ...manifest.segments].map((entry) => entry.key);
}

/** The layout a snapshot, segment, archive or side-file key names; `undefined` for any other key. */
function layoutOf(prefix: string, key: string): string | undefined {
  return (
    parseSnapshotKey(prefix, key) ??
    parseSegmentKey(prefix, key) ??
    parseArchiveKey(prefix, key) ??
    parseSideKey(prefix, key)
  )?.layout;
}

/**
 * True for a key of a raw layout, the file's bytes as they are: an earlier
 * release's `.snapshot` and `.segment`, and the archives and side files of
 * a backup in clear.
 */
export function isRawLayout(prefix: string, key: string): boolean {
  return layoutOf(prefix, key) === 'raw';
}

/** True for a key of an object stored in the envelope (`.snap`, `.seg`, `.bko`): it has a header. */
export function isEnvelopeKey(prefix: string, key: string): boolean {
  const layout = layoutOf(prefix, key);
  return layout === 'object' || layout === 'compacted';
}

/**
 * The encryption of `manifest`'s generation, from its lead object's header
 * (one partial GET; none for a raw object); `undefined` when there is no
 * lead object or its header cannot be read (its download reports why).
 */
export async function generationEncryption(
  store: ObjectStore,
  prefix: string,
  manifest: Manifest,
  signal?: AbortSignal,
): Promise<GenerationEncryption | undefined> {
  const key = generationLeadKey(prefix, manifest);
  return key === undefined ? undefined : storedEncryption(store, prefix, key, signal);
}

/**
 * What the object at `key` states about its encryption, from its header
 * (one partial GET; none for a raw object); `undefined` when it is missing
 * or has no valid header.
 */
export async function storedEncryption(
  store: ObjectStore,
  prefix: string,
  key: string,
  signal?: AbortSignal,
): Promise<GenerationEncryption | undefined> {
  if (isRawLayout(prefix, key)) return plaintext(key);
  const header = await readStoredHeader(store, key, signal);
  return header === undefined ? undefined : encryptionOfHeader(key, header);
}
