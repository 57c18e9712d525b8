/**
 * The envelope header of a stored object from the first bytes of its
 * stream, the body left unread: headers are in clear, so who can open an
 * object is known before anything is downloaded. One GET, at most a header
 * (4 KiB) and the store's first chunk read.
 */
import type { ObjectStore } from '@x/store';
import {
  readSegmentObjectHeader,
  SEGMENT_OBJECT_MAX_HEADER_BYTES,
  SEGMENT_OBJECT_MIN_HEADER_BYTES,
  SegmentObjectError,
  type SegmentObjectHeader,
} from '@x/wal-segment';

/** Bytes the header at the front of `head` claims, bounded as the envelope bounds it. */
function wantedBytes(head: Uint8Array): number {
  if (head.byteLength < 6) return SEGMENT_OBJECT_MIN_HEADER_BYTES;
  const claimed = new DataView(head.buffer, head.byteOffset).getUint16(4, true);
  return Math.min(
    Math.max(claimed, SEGMENT_OBJECT_MIN_HEADER_BYTES),
    SEGMENT_OBJECT_MAX_HEADER_BYTES,
  );
}

/**
 * The header of the object at `key`; `undefined` when the object is missing
 * or does not start with a valid header (its download says why).
 * Store errors and aborts propagate.
 */
export async function readStoredHeader(
  store: ObjectStore,
  key: string,
  signal?: AbortSignal,
): Promise<SegmentObjectHeader | undefined> {
  const found = await store.getStream(key, signal === undefined ? {} : { signal });
  if (found === null) return undefined;
  const iterator = found.body[Symbol.asyncIterator]();
  let head = new Uint8Array(0);
  try {
    while (head.byteLength < wantedBytes(head)) {
      const next = await iterator.next();
      if (next.done) break;
      head = new Uint8Array(Buffer.concat([head, next.value]));
    }
  } finally {
    try {
      await iterator.return?.();
    } catch {
      // The rest of the body is not wanted; a transport that fails to close
      // an unread stream holds nothing of ours.
    }
  }
  try {
    return readSegmentObjectHeader(head);
  } catch (error) {
    if (SegmentObjectError.isInstance(error)) return undefined;
    throw error;
  }
}
