/**
 * Streaming read of a stored-object envelope, for objects too large to hold
 * in memory (snapshots can be GiBs): the header is parsed from the first
 * bytes, the body is decoded chunk by chunk through a zstd stream, counted
 * and CRC-checked in passing.
 *
 * Guarantees: decoded bytes never exceed end − start (the stream is stopped
 * at the first byte beyond, with `end`); the iteration ends without error
 * only when the decoded length is end − start and the decoded CRC-32 is the
 * header's. Decoded chunks are handed out BEFORE those final checks (that
 * is what streaming means): a caller writes them to a staging file and uses
 * it only once the iteration completed. Memory: a header (≤ 4096 bytes) and
 * the zstd stream's buffers.
 */
import { pipeline, Readable } from 'node:stream';
import { crc32, createZstdDecompress } from 'node:zlib';
import { checkIdentities, openBodyStream, openProblem, readBinding } from './object-encryption.ts';
import {
  readSegmentObjectHeader,
  SEGMENT_OBJECT_MAX_HEADER_BYTES,
  SEGMENT_OBJECT_MIN_HEADER_BYTES,
  type SegmentObjectDecodeOptions,
  SegmentObjectError,
  type SegmentObjectHeader,
} from './segment-object.ts';

export interface SegmentObjectStream {
  readonly header: SegmentObjectHeader;
  /** The decoded body, in order; throws {@link SegmentObjectError} (`body`, `end`, `bodyCrc32`). */
  readonly body: AsyncIterable<Uint8Array>;
}

/**
 * Reads the header from the start of `stored` (a stream of the object's
 * bytes), then returns it with the body's decoded chunks.
 * @throws SegmentObjectError for the header (as {@link readSegmentObjectHeader}).
 */
export async function decodeSegmentObjectStream(
  stored: AsyncIterable<Uint8Array>,
  options: SegmentObjectDecodeOptions = {},
): Promise<SegmentObjectStream> {
  const iterator = stored[Symbol.asyncIterator]();
  let head = new Uint8Array(0);
  let wanted = SEGMENT_OBJECT_MIN_HEADER_BYTES;
  // Read until the header length is known and the whole header is here.
  while (head.byteLength < wanted) {
    const next = await iterator.next();
    if (next.done) break;
    head = new Uint8Array(Buffer.concat([head, next.value]));
    if (head.byteLength >= 6) {
      const claimed = new DataView(head.buffer, head.byteOffset).getUint16(4, true);
      wanted = Math.min(
        Math.max(claimed, SEGMENT_OBJECT_MIN_HEADER_BYTES),
        SEGMENT_OBJECT_MAX_HEADER_BYTES,
      );
    }
  }
  const header = readSegmentObjectHeader(head);
  const headerBytes = head.slice(0, header.headerBytes);
  const identities = options.identities ?? [];
  if (header.encryption !== 'none') checkIdentities(header.recipients, identities);
  const rest = head.subarray(header.headerBytes);
  async function* remaining(): AsyncGenerator<Uint8Array> {
    if (rest.byteLength > 0) yield rest;
    for (;;) {
      const next = await iterator.next();
      if (next.done) return;
      yield next.value;
    }
  }
  if (header.encryption === 'none')
    return { header, body: decodedBody(header, remaining(), () => header.bodyCrc32) };
  const opened = openBodyStream(remaining(), identities);
  const bodyCrc32 = (): number => {
    const bound = readBinding(headerBytes, opened.binding());
    if ('problem' in bound) throw new SegmentObjectError('body', bound.problem);
    return bound.bodyCrc32;
  };
  return { header, body: decodedBody(header, decrypted(opened.encoded), bodyCrc32) };
}

/** The decrypted stream, its failures reported as the `body` field's. */
async function* decrypted(source: AsyncIterable<Uint8Array>): AsyncGenerator<Uint8Array> {
  try {
    yield* source;
  } catch (error) {
    throw new SegmentObjectError('body', openProblem(error), { cause: error });
  }
}

/** Decoded bytes per chunk: zlib's default (16 KiB) costs a callback and a file write per 16 KiB. */
const DECODE_CHUNK_BYTES = 1024 * 1024;

async function* decodedBody(
  header: SegmentObjectHeader,
  encoded: AsyncIterable<Uint8Array>,
  expectedCrc32: () => number,
): AsyncGenerator<Uint8Array> {
  const expected = header.decodedLength;
  const field = header.kind === 'compacted' ? 'decodedLength' : 'end';
  const name = header.kind === 'compacted' ? 'decodedLength' : 'end − start';
  let length = 0;
  let crc = 0;
  const check = (chunk: Uint8Array): void => {
    length += chunk.byteLength;
    if (length > expected) {
      throw new SegmentObjectError(field, `body decodes to more than ${name} (${expected}) bytes`);
    }
    crc = crc32(chunk, crc);
  };
  if (header.codec === 'identity') {
    for await (const chunk of encoded) {
      check(chunk);
      yield chunk;
    }
  } else {
    const decompress = createZstdDecompress({ chunkSize: DECODE_CHUNK_BYTES });
    // pipeline, not pipe: an error of the input (a body that does not
    // decrypt) must end the iteration below, not leave it waiting.
    const decoded = pipeline(Readable.from(encoded), decompress, () => {});
    try {
      for await (const chunk of decoded as AsyncIterable<Buffer>) {
        const bytes = new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength);
        check(bytes);
        yield bytes;
      }
    } catch (error) {
      if (SegmentObjectError.isInstance(error)) throw error;
      throw new SegmentObjectError('body', `does not decode as zstd: ${(error as Error).message}`, {
        cause: error,
      });
    } finally {
      decompress.destroy();
    }
  }
  if (length !== expected) {
    throw new SegmentObjectError(
      field,
      `body decodes to ${length} bytes, not ${name} (${expected})`,
    );
  }
  const expectedCrc = expectedCrc32();
  if (crc !== expectedCrc) {
    throw new SegmentObjectError(
      'bodyCrc32',
      `decoded body CRC-32 ${crc.toString(16).padStart(8, '0')} is not the header's (${expectedCrc.toString(16).padStart(8, '0')})`,
    );
  }
}
