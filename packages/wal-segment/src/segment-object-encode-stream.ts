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
import { encryptStream } from '@x/age-envelope';
import { bindingFrame, sealObject } from './object-encryption.ts';
import {
  encodeSegmentObjectHeader,
  planSegmentObject,
  type SegmentObjectEncodeOptions,
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
  options: Pick<SegmentObjectEncodeOptions, 'level' | 'recipients'> = {},
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

  async function* compressed(): AsyncGenerator<Uint8Array> {
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

  async function* bound(): AsyncGenerator<Uint8Array> {
    yield* compressed();
    yield bindingFrame(header, plan.bodyCrc32);
  }

  async function* encoded(): AsyncGenerator<Uint8Array> {
    yield header;
    if (plan.codec === 0) yield* checked();
    else if (plan.recipients.length === 0) yield* compressed();
    // The age stream seals its last chunk only after the binding, so a
    // second read that differs still fails the upload before it completes.
    else yield* encryptStream(bound(), plan.recipients);
  }

  return encoded();
}

/** What {@link encodeSegmentObjectInMemory} read, and the envelope when it fitted. */
export interface BufferedSegmentObject {
  /** Decoded length and CRC-32 of everything read. */
  readonly length: number;
  readonly crc32: number;
  /** The envelope (header first, then the zstd body), or `null` when it would pass `maxStoredBytes`. */
  readonly stored: Uint8Array[] | null;
}

/**
 * One read of a body of `declaredLength` bytes: its length and CRC-32, and,
 * while the compressed body stays within `maxStoredBytes`, the whole zstd
 * envelope in memory (`fields.end − fields.start` must be `declaredLength`;
 * the header is built from what was read). Past the limit it stops
 * compressing and only finishes the length and CRC-32, so the caller can
 * stream the body in a second read ({@link encodeSegmentObjectStream}) with
 * them. The read ends as soon as the body is consumed: a source that holds
 * something for the read (a SQLite snapshot pins its reader) holds it for
 * the read and the compression only, not for an upload.
 * @throws SegmentObjectError (`body`) when the read's length is not `declaredLength`; as
 *   {@link encodeSegmentObjectStream} for invalid fields.
 */
export async function encodeSegmentObjectInMemory(
  body: AsyncIterable<Uint8Array>,
  declaredLength: number,
  fields: SegmentObjectFields,
  options: { maxStoredBytes: number } & Pick<SegmentObjectEncodeOptions, 'level' | 'recipients'>,
): Promise<BufferedSegmentObject> {
  // Checks the fields (and that they span declaredLength) before reading.
  const planned = planSegmentObject({ length: declaredLength, crc32: () => 0 }, fields, {
    ...options,
    bodyCrc32: 0,
  });
  let compressor: ReturnType<typeof createZstdCompress> | null =
    planned.codec === 0 ? null : createZstdCompress(zstdOptions(planned));
  const output: Uint8Array[] = [];
  let outputBytes = 0;
  let overflow = false;
  const collected = compressor === null ? null : collect(compressor);
  async function collect(stream: ReturnType<typeof createZstdCompress>): Promise<void> {
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      outputBytes += chunk.byteLength;
      if (outputBytes > options.maxStoredBytes) {
        overflow = true;
        stream.destroy();
        return;
      }
      output.push(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength));
    }
  }
  let length = 0;
  let crc = 0;
  for await (const chunk of body) {
    length += chunk.byteLength;
    crc = crc32(chunk, crc);
    if (compressor === null) {
      if (!overflow) {
        outputBytes += chunk.byteLength;
        if (outputBytes > options.maxStoredBytes) overflow = true;
        else output.push(chunk);
      }
    } else if (!overflow) {
      if (!compressor.write(chunk)) await once(compressor, 'drain', overflow);
    }
  }
  if (compressor !== null && !overflow) compressor.end();
  await collected?.catch(() => undefined);
  if (overflow) compressor?.destroy();
  compressor = null;
  if (length !== declaredLength) {
    throw new SegmentObjectError(
      'body',
      `read ${length} bytes, not the ${declaredLength} declared`,
    );
  }
  if (overflow) return { length, crc32: crc, stored: null };
  const header = encodeSegmentObjectHeader({ ...planned, bodyCrc32: crc });
  if (planned.recipients.length === 0) return { length, crc32: crc, stored: [header, ...output] };
  return { length, crc32: crc, stored: [sealObject(header, output, crc, planned.recipients)] };
}

/** Resolves at the stream's `drain`, or at once when it was destroyed (an overflow). */
function once(
  stream: ReturnType<typeof createZstdCompress>,
  event: 'drain',
  overflowed: boolean,
): Promise<void> {
  if (overflowed || stream.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      stream.off(event, done);
      stream.off('close', done);
      resolve();
    };
    stream.on(event, done);
    stream.on('close', done);
  });
}
