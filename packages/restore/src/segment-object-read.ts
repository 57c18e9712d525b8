/**
 * Reading a `.seg` segment (the stored-object envelope of `@x/wal-segment`)
 * the way restore and verify must: the stored bytes were already checked
 * against the manifest's size and CRC-32; here the header, the decoded body
 * and the agreement of header, key, manifest entry and the generation's
 * encryption are checked before a single decoded byte is handed on. An
 * encrypted body is opened with the age identities given.
 *
 * Guarantees: {@link decodeSegmentEntry} returns the decoded WAL bytes only
 * when every check passed; otherwise it throws {@link ObjectEncodingError}
 * naming the key and the field, or `ObjectKeyError` when none of the
 * identities opens it. Decoding is bounded by the range the key
 * names (a decompression bomb cannot allocate more). Limit: the object is
 * decoded whole in memory (segments are at most the worker's
 * `maxSegmentBytes`, 32 MiB by default).
 */
import { crc32 } from 'node:zlib';
import type { AgeIdentity } from '@x/age-envelope';
import { type Manifest, parseSegmentKey, parseSnapshotKey, type SegmentEntry } from '@x/manifest';
import {
  decodeSegmentObject,
  readSegmentObjectHeader,
  SegmentObjectError,
  type SegmentObjectHeader,
  SegmentObjectKeyError,
  segmentHeaderDisagreements,
} from '@x/wal-segment';
import {
  checkSameEncryption,
  encryptionOfHeader,
  type GenerationEncryption,
  type ObjectOpenOptions,
} from './generation-encryption.ts';
import { keyErrorOf } from './object-keys.ts';
import { ObjectEncodingError } from './restore-errors.ts';

/**
 * The refusal of an envelope header that disagrees with its key or its
 * manifest entry: `mismatch(field, found, expected, of)` throws
 * {@link ObjectEncodingError} for `key`, naming the field and both values.
 */
export function headerMismatch(
  key: string,
): (field: string, found: unknown, expected: unknown, of: string) => never {
  return (field, found, expected, of) => {
    throw new ObjectEncodingError(
      key,
      field,
      `the header says ${String(found)}, the ${of} says ${String(expected)}`,
    );
  };
}

/**
 * `read()` with the envelope's refusals as restore's: {@link ObjectEncodingError}
 * naming `key` and the field, or `ObjectKeyError` when no identity opens it.
 */
export function readEnvelope<T>(key: string, identities: readonly AgeIdentity[], read: () => T): T {
  try {
    return read();
  } catch (error) {
    if (SegmentObjectKeyError.isInstance(error)) throw keyErrorOf(key, error, identities);
    if (SegmentObjectError.isInstance(error))
      throw new ObjectEncodingError(key, error.field, error.problem, { cause: error });
    throw error;
  }
}

/**
 * True when `key` is a segment stored in the envelope (`.seg`, fine or
 * compacted), which must be decoded.
 */
export function isSegmentObject(prefix: string, key: string): boolean {
  const layout = parseSegmentKey(prefix, key)?.layout;
  return layout === 'object' || layout === 'compacted';
}

/**
 * Bytes a segment occupies once decoded at most (its key's range), or its
 * stored size for a raw one. A compacted object decodes to at most its
 * range: its one record holds a subset of the pages of the records it
 * replaced, each once.
 */
export function decodedSize(prefix: string, segment: SegmentEntry): number {
  const range = parseSegmentKey(prefix, segment.key);
  return range === undefined ? segment.size : range.end - range.start;
}

/**
 * The chain CRC the segment at `index` of the manifest must carry: the
 * stored CRC-32 of the segment before it, or for the first one the
 * generation's snapshot object's (0 when the restore point has none).
 * `undefined` after a compacted object: the link is then its header's chain
 * end (the CRC-32 of the last fine segment it replaced), not in the
 * manifest; each entry is still held to the manifest's own size and CRC-32.
 */
export function expectedPreviousCrc32(
  prefix: string,
  manifest: Manifest,
  index: number,
): number | undefined {
  if (index > 0) {
    const before = manifest.segments[index - 1]!;
    if (parseSegmentKey(prefix, before.key)?.layout === 'compacted') return undefined;
    return Number.parseInt(before.crc32, 16);
  }
  const snapshot = manifest.files.find(
    (file) => parseSnapshotKey(prefix, file.key)?.generation === manifest.walGeneration,
  );
  return snapshot === undefined ? 0 : Number.parseInt(snapshot.crc32, 16);
}

/**
 * Decodes the stored bytes of `segment` (already checked against its size
 * and CRC-32) and checks the header against the key (kind: fine or
 * compacted, generation, start, end), the entry (commits = frames, lineage) and, when given, the chain
 * (`previousCrc32`).
 * @throws ObjectEncodingError
 */
export function decodeSegmentEntry(
  prefix: string,
  segment: SegmentEntry,
  stored: Uint8Array,
  previousCrc32?: number,
  options: ObjectOpenOptions = {},
): Uint8Array {
  return decodeSegmentEntryLinks(prefix, segment, stored, previousCrc32, options).body;
}

/** A decoded `.seg` body with the chain links its header states. */
export interface DecodedSegmentEntry {
  readonly body: Uint8Array;
  /** The CRC-32 of the stored object before it in the chain. */
  readonly previousCrc32: number;
  /** A compacted object's chain end (the last fine segment it replaced); `null` for a fine one. */
  readonly chainEndCrc32: number | null;
  /** The CRC-32 of `body` (checked against the header's, or an encrypted body's binding). */
  readonly bodyCrc32: number;
  /** What its header states about its encryption. */
  readonly encryption: GenerationEncryption;
}

/**
 * Checks the link after a compacted entry, which the manifest cannot give:
 * the entry after it must name the compacted object's chain end as its
 * `previous`. A compacted object that does not end where the next entry
 * begins (another run's, or one whose chain end was forged) is refused.
 * @throws ObjectEncodingError naming the entry after it
 */
export function checkLinkAfterCompacted(
  key: string,
  previousCrc32: number,
  chainEndCrc32: number,
): void {
  if (previousCrc32 !== chainEndCrc32)
    headerMismatch(key)(
      'previousCrc32',
      previousCrc32.toString(16).padStart(8, '0'),
      chainEndCrc32.toString(16).padStart(8, '0'),
      'compacted object before it (its chain end)',
    );
}

/**
 * A compacted object's header states its decoded length itself (a merge is
 * shorter than the log it stands for), so zstd is bounded by that field,
 * not by the key. A merge never holds more than the log it replaced: a
 * header claiming more is refused before anything is decompressed, which
 * keeps a decompression bomb within the key's range, as for a fine segment,
 * and a body longer than its range from being taken for that range's log.
 * @throws ObjectEncodingError naming `decodedLength`
 */
function checkCompactedLength(
  key: string,
  range: { readonly start: number; readonly end: number },
  header: SegmentObjectHeader,
): void {
  const logBytes = range.end - range.start;
  if (header.decodedLength > logBytes)
    throw new ObjectEncodingError(
      key,
      'decodedLength',
      `${header.decodedLength} is more than the log its key stands for (end − start = ${logBytes}): a merge never holds more than the log it replaced`,
    );
}

/**
 * {@link decodeSegmentEntry}, also returning the header's chain links. The
 * header is checked (key, entry, chain, the generation's encryption) before
 * the body is opened.
 * @throws ObjectEncodingError, ObjectKeyError (none of `options.identities` opens it)
 */
export function decodeSegmentEntryLinks(
  prefix: string,
  segment: SegmentEntry,
  stored: Uint8Array,
  previousCrc32?: number,
  options: ObjectOpenOptions = {},
): DecodedSegmentEntry {
  const range = parseSegmentKey(prefix, segment.key);
  if (range === undefined || range.layout === 'raw') {
    throw new ObjectEncodingError(segment.key, 'key', 'not a .seg segment key of this prefix');
  }
  const kind = range.layout === 'compacted' ? 'compacted' : 'segment';
  const identities = options.identities ?? [];
  const header = readEnvelope(segment.key, identities, () => readSegmentObjectHeader(stored));
  const encryption = encryptionOfHeader(segment.key, header);
  checkSameEncryption(encryption, options.encryption);
  const mismatch = headerMismatch(segment.key);
  const [disagreement] = segmentHeaderDisagreements(header, {
    kind,
    generation: range.generation,
    start: range.start,
    end: range.end,
    commits: segment.frames,
    lineage: segment.lineage,
  });
  if (disagreement !== undefined) {
    const { field, found, expected } = disagreement;
    mismatch(
      field,
      found,
      expected,
      field === 'commits' || field === 'lineage' ? 'manifest entry' : 'key',
    );
  }
  if (previousCrc32 !== undefined && header.previousCrc32 !== previousCrc32) {
    mismatch(
      'previousCrc32',
      header.previousCrc32.toString(16).padStart(8, '0'),
      previousCrc32.toString(16).padStart(8, '0'),
      'previous object in the chain',
    );
  }
  if (kind === 'compacted') checkCompactedLength(segment.key, range, header);
  const { body } = readEnvelope(segment.key, identities, () =>
    decodeSegmentObject(stored, { identities }),
  );
  return {
    body,
    previousCrc32: header.previousCrc32,
    chainEndCrc32: header.chainEndCrc32,
    // An encrypted header states no CRC (its binding does, checked by the decoder).
    bodyCrc32: header.encryption === 'none' ? header.bodyCrc32 : crc32(body),
    encryption,
  };
}
