/**
 * Streaming write of a stored-object envelope, for bodies too large to hold
 * in memory (a snapshot of a database of GiBs). The header states the
 * body's decoded length and CRC-32 before the body, so the writer reads the
 * body twice: once to learn them (the caller's first pass), then again
 * through this encoder, which compresses it chunk by chunk.
 *
 * Guarantee: the stream ends without error only when the second read gave
 * exactly the length and CRC-32 the header states; otherwise it throws
 * {@link SegmentObjectError} (`body`) BEFORE the last encoded bytes are
 * handed out, so an upload fed by it fails instead of completing an object
 * whose header lies (a zstd frame is incomplete until its last block).
 * Memory: the header and zstd's stream buffers.
 */
import { pipeline, Readable } from 'node:stream';
import { crc32, createZstdCompress } from 'node:zlib';
import {
  encodeSegmentObjectHeader,
  planSegmentObject,
  SegmentObjectError,
  type SegmentObjectFields,
  zstdOptions,
} from './segment-object.ts';

/**
 * The envelope of a body of `body.length` bytes whose CRC-32 is
 * `body.crc32` (both from a first read), encoding the bytes `body.read`
 * yields (the second read). `fields.end − fields.start` must be
 * `body.length`. Throws {@link SegmentObjectError} naming the field for an
 * invalid value (at once), or `body` when the second read differs from the
 * first (during the iteration, before its end).
 */
export function encodeSegmentObjectStream(
  body: { length: number; crc32: number; read: AsyncIterable<Uint8Array> },
  fields: SegmentObjectFields,
  options: { level?: number } = {},
): AsyncIterable<Uint8Array> {
  const plan = planSegmentObject({ length: body.length, crc32: () => body.crc32 }, fields, {
    ...options,
    bodyCrc32: body.crc32,
  });
  const header = encodeSegmentObjectHeader(plan);

  async function* checked(): AsyncGenerator<Uint8Array> {
    let length = 0;
    let crc = 0;
    for await (const chunk of body.read) {
      length += chunk.byteLength;
      if (length > plan.bodyLength) {
        throw new SegmentObjectError(
          'body',
          `changed between the reads: longer than the ${plan.bodyLength} bytes first read`,
        );
      }
      crc = crc32(chunk, crc);
      yield chunk;
    }
    if (length !== plan.bodyLength) {
      throw new SegmentObjectError(
        'body',
        `changed between the reads: ${length} bytes, not the ${plan.bodyLength} first read`,
      );
    }
    if (crc !== plan.bodyCrc32) {
      throw new SegmentObjectError(
        'body',
        'changed between the reads: its CRC-32 is not the one first read',
      );
    }
  }

  async function* encoded(): AsyncGenerator<Uint8Array> {
    yield header;
    if (plan.codec === 0) {
      yield* checked();
      return;
    }
    // The pipeline destroys the compressor with the input's error, so the
    // iteration below throws it instead of flushing the frame's end.
    const compressor = pipeline(
      Readable.from(checked()),
      createZstdCompress(zstdOptions(plan)),
      () => {},
    );
    for await (const chunk of compressor as AsyncIterable<Buffer>) {
      yield new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    }
  }

  return encoded();
}
