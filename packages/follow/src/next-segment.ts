/**
 * The next link of a followed log: the `.seg` segment that starts where the
 * applied state's log ends, downloaded and checked the way a restore's
 * roll-forward checks it (its header names the key's generation and range,
 * the applied lineage, the stored CRC-32 of the object before it and the
 * generation's encryption; its body decodes to the stated length and CRC-32
 * and holds the stated number of commits) before one byte of it is applied.
 */
import { crc32 } from 'node:zlib';
import type { AgeIdentity } from '@x/age-envelope';
import { formatCrc32, parseSegmentKey } from '@x/manifest';
import {
  decodeSegmentEntryLinks,
  type GenerationEncryption,
  ObjectEncodingError,
} from '@x/restore';
import { commitLogCutter } from '@x/source-sqlite';
import { getCapped, isTooLarge, type ObjectStore } from '@x/store';
import { readSegmentObjectHeader } from '@x/wal-segment';

/** Where the applied log ends, and what the next segment must name. */
export interface FollowedChain {
  readonly lineage: string;
  readonly generation: number;
  /** The log offset the next segment starts at. */
  readonly end: number;
  /** The stored CRC-32 of the last object applied (a segment, or the snapshot). */
  readonly crc32: number;
  readonly encryption?: GenerationEncryption;
}

export interface NextSegment {
  readonly key: string;
  /** The decoded commit log bytes: whole commit records. */
  readonly body: Uint8Array;
  readonly commits: number;
  /** The chain after it. */
  readonly chain: FollowedChain;
  /** Stored bytes downloaded. */
  readonly bytes: number;
}

/**
 * The fine segment among `keys` that continues `chain`, read and checked;
 * `null` when none of them does (another kind of object, or one gone by the
 * time it is read): a restore of the latest state then decides.
 * @throws ObjectEncodingError, ObjectKeyError (a segment that fails a check)
 */
export async function readNextSegment(
  store: ObjectStore,
  prefix: string,
  keys: readonly string[],
  chain: FollowedChain,
  options: { readonly identities?: readonly AgeIdentity[]; readonly signal?: AbortSignal },
): Promise<NextSegment | null> {
  const next = keys
    .map((key) => ({ key, range: parseSegmentKey(prefix, key) }))
    .find(
      ({ range }) =>
        range?.layout === 'object' &&
        range.generation === chain.generation &&
        range.start === chain.end,
    );
  if (next === undefined || next.range === undefined) return null;
  const { key, range } = next;
  const logBytes = range.end - range.start;
  // The most a segment of this range can be stored as: zstd's bound and a header.
  const cap = logBytes + Math.ceil(logBytes / 128) + 64 * 1024;
  const found = await getCapped(
    store,
    key,
    cap,
    options.signal === undefined ? {} : { signal: options.signal },
  );
  if (found === null) return null;
  if (isTooLarge(found))
    throw new ObjectEncodingError(
      key,
      'size',
      `larger than ${cap} bytes, the most its range can be stored as`,
    );
  const stored = found.body;
  let commits: number;
  try {
    commits = readSegmentObjectHeader(stored).commits;
  } catch (error) {
    throw new ObjectEncodingError(
      key,
      'header',
      error instanceof Error ? error.message : String(error),
      {
        cause: error,
      },
    );
  }
  const storedCrc = crc32(stored);
  const decoded = decodeSegmentEntryLinks(
    prefix,
    {
      key,
      size: stored.byteLength,
      crc32: formatCrc32(storedCrc),
      frames: commits,
      lineage: chain.lineage,
    },
    stored,
    chain.crc32,
    {
      identities: options.identities ?? [],
      ...(chain.encryption === undefined ? {} : { encryption: chain.encryption }),
    },
  );
  const cutter = commitLogCutter(Number.MAX_SAFE_INTEGER);
  cutter.push(decoded.body);
  if (cutter.commitsSeen !== commits)
    throw new ObjectEncodingError(
      key,
      'commits',
      `the header says ${commits}, the body holds ${cutter.commitsSeen} whole commits`,
    );
  return {
    key,
    body: decoded.body,
    commits,
    bytes: stored.byteLength,
    chain: { ...chain, end: range.end, crc32: storedCrc },
  };
}
