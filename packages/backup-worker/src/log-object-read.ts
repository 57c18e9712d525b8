/**
 * One entry of a restore point's log read back (from the bucket, or from the
 * bytes this tenure stored) and checked as a restore checks it: stored size
 * and CRC-32 against the entry, its recipients against the worker's, the
 * envelope's own checks (opened with the worker's identities), and its
 * header against the key and entry. For compaction's inputs and a restart's
 * proof (generation-continuation.ts); each failure is the caller's error
 * (`fail`).
 */
import { crc32Hex, parseSegmentKey, type SegmentEntry } from '@x/manifest';
import {
  decodeSegmentObject,
  readSegmentObjectHeader,
  type SegmentObjectHeader,
  segmentHeaderDisagreements,
} from '@x/wal-segment';
import { messageOf } from './errors.ts';
import type { ObjectKeys } from './object-keys.ts';
import type { Requests } from './requests.ts';

export interface CheckedLogObject {
  readonly header: SegmentObjectHeader;
  /** The decoded body: whole log frames. */
  readonly body: Uint8Array;
}

export async function readCheckedLogObject(options: {
  readonly requests: Requests;
  readonly prefix: string;
  /** The generation the entry belongs to. */
  readonly generation: number;
  readonly entry: SegmentEntry;
  /** Opens the object; its recipients must be exactly the ones the worker writes to. */
  readonly keys: ObjectKeys;
  /** The object's stored bytes when at hand (this tenure wrote them); otherwise a GET. */
  readonly stored?: Uint8Array | undefined;
  readonly fail: (key: string, problem: string) => Error;
}): Promise<CheckedLogObject> {
  const { requests, prefix, generation, entry, keys, fail } = options;
  const range = parseSegmentKey(prefix, entry.key);
  if (range === undefined || range.layout === 'raw')
    throw fail(entry.key, 'not a segment in the object envelope');
  const object =
    options.stored === undefined ? await requests.get(entry.key) : { body: options.stored };
  if (object === null) throw fail(entry.key, 'missing from the bucket');
  if (object.body.byteLength !== entry.size || crc32Hex(object.body) !== entry.crc32)
    throw fail(
      entry.key,
      `holds ${object.body.byteLength} bytes of CRC-32 ${crc32Hex(object.body)}, its entry says ${entry.size} of ${entry.crc32}`,
    );
  const opened = (): CheckedLogObject => {
    // Recipients first: an object this worker cannot or must not open says why.
    const recipients = keys.disagreement(
      readSegmentObjectHeader(object.body).recipients,
      'the object',
    );
    if (recipients !== null) throw new Error(recipients);
    return decodeSegmentObject(object.body, { identities: keys.identities });
  };
  let decoded: CheckedLogObject;
  try {
    decoded = opened();
  } catch (error) {
    throw fail(entry.key, messageOf(error));
  }
  const problems = segmentHeaderDisagreements(decoded.header, {
    kind: range.layout === 'compacted' ? 'compacted' : 'segment',
    generation,
    start: range.start,
    end: range.end,
    commits: entry.frames,
    lineage: entry.lineage,
  }).map(({ field, found, expected }) => `${field} ${found}, not ${expected}`);
  if (problems.length > 0)
    throw fail(entry.key, `its header disagrees with its key and entry: ${problems.join(', ')}`);
  return decoded;
}
