/**
 * The envelope header of a stored object, from the first bytes of a streamed
 * GET: the body (a snapshot can be GiBs) is not downloaded.
 */
import {
  readSegmentObjectHeader,
  SEGMENT_OBJECT_MAX_HEADER_BYTES,
  SEGMENT_OBJECT_MIN_HEADER_BYTES,
  type SegmentObjectHeader,
} from '@x/wal-segment';
import { messageOf } from './errors.ts';
import type { Requests } from './requests.ts';

/** @throws what `fail` makes when the object is missing or its header does not read. */
export async function readStoredHeader(
  requests: Requests,
  key: string,
  fail: (problem: string) => Error,
): Promise<SegmentObjectHeader> {
  let head = new Uint8Array(0);
  let wanted = SEGMENT_OBJECT_MIN_HEADER_BYTES;
  for await (const chunk of requests.getStream(key, () => fail('missing from the bucket'))) {
    head = new Uint8Array(Buffer.concat([head, chunk]));
    if (head.byteLength >= 6) {
      const claimed = new DataView(head.buffer, head.byteOffset).getUint16(4, true);
      wanted = Math.min(
        Math.max(claimed, SEGMENT_OBJECT_MIN_HEADER_BYTES),
        SEGMENT_OBJECT_MAX_HEADER_BYTES,
      );
    }
    // Leaving the loop ends the GET.
    if (head.byteLength >= wanted) break;
  }
  try {
    return readSegmentObjectHeader(head);
  } catch (error) {
    throw fail(messageOf(error));
  }
}
