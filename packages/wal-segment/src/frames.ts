/**
 * The framed WAL format of a store directory, one frame per commit:
 * u32 little-endian payload length L (1 ≤ L ≤ 2^32 − 1), u32 little-endian
 * CRC-32 (IEEE, as zlib) of the payload, then the L payload bytes.
 *
 * The readable log is the longest prefix of whole, valid frames. The first
 * frame that is partial, declares length 0 or fails its CRC ends it: it and
 * every byte after it are a torn tail, never counted, never shipped. Length 0
 * is refused so that a zero-filled tail (what some file systems expose after
 * a crash) does not read as endless empty commits.
 */
import { crc32 } from 'node:zlib';
import { crc32Combine } from './crc32-combine.ts';

/**
 * Payloads shorter than this are checksummed a second time for the stream's
 * CRC instead of combining CRCs (combining costs a few hundred integer
 * operations per frame, whatever the frame's size).
 */
const DIRECT_CRC_BELOW_BYTES = 4096;

/** Bytes before each frame's payload: length and CRC-32. */
export const FRAME_HEADER_BYTES = 8;

/** The largest payload the u32 length field can describe. */
export const MAX_FRAME_PAYLOAD_BYTES = 0xffffffff;

/** One frame holding `payload` (1 to 2^32 − 1 bytes). Throws RangeError for an empty or oversized payload. */
export function encodeFrame(payload: Uint8Array): Uint8Array {
  if (payload.byteLength === 0) {
    throw new RangeError('a frame payload must not be empty (length 0 marks the end of the log)');
  }
  if (payload.byteLength > MAX_FRAME_PAYLOAD_BYTES) {
    throw new RangeError(`a frame payload is at most ${MAX_FRAME_PAYLOAD_BYTES} bytes`);
  }
  const frame = new Uint8Array(FRAME_HEADER_BYTES + payload.byteLength);
  const view = new DataView(frame.buffer);
  view.setUint32(0, payload.byteLength, true);
  view.setUint32(4, crc32(payload) >>> 0, true);
  frame.set(payload, FRAME_HEADER_BYTES);
  return frame;
}

/** The complete, valid prefix of a framed log. */
export interface CompleteFrames {
  /** Bytes in the prefix: the offset just past its last valid frame. */
  length: number;
  /** Frames (commits) in the prefix. */
  frames: number;
}

/**
 * The longest prefix of `bytes` made of whole, valid frames, and how many
 * frames it holds. Reads nothing past `bytes`; never throws for any input.
 */
export function completeFrames(bytes: Uint8Array): CompleteFrames {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const total = bytes.byteLength;
  let offset = 0;
  let frames = 0;
  while (total - offset >= FRAME_HEADER_BYTES) {
    const length = view.getUint32(offset, true);
    if (length === 0 || length > total - offset - FRAME_HEADER_BYTES) break;
    const payloadStart = offset + FRAME_HEADER_BYTES;
    const actual = crc32(bytes.subarray(payloadStart, payloadStart + length)) >>> 0;
    if (actual !== view.getUint32(offset + 4, true)) break;
    offset = payloadStart + length;
    frames++;
  }
  return { length: offset, frames };
}

/**
 * Counts frames over a byte stream fed in chunks. Chunks may split the
 * stream anywhere (inside a header, inside a payload): after the same bytes,
 * the counts are the same as {@link completeFrames} over the whole stream.
 * Memory is constant: payloads are checksummed as they pass, never buffered.
 *
 * It also keeps the CRC-32 of every byte pushed ({@link crc32}), the whole
 * file's, from the same pass: each payload's CRC is combined into it rather
 * than computed a second time.
 */
export class FrameCounter {
  readonly #header = new Uint8Array(FRAME_HEADER_BYTES);
  #headerFill = 0;
  #inPayload = false;
  #payloadLength = 0;
  #remaining = 0;
  #expectedCrc = 0;
  #runningCrc = 0;
  #frames = 0;
  #completeLength = 0;
  #consumed = 0;
  #ended = false;
  /** CRC-32 of the bytes pushed, up to the start of the current payload (or everything once ended). */
  #streamCrc = 0;
  /** CRC-32 of bytes `0..completeLength`. */
  #completeCrc = 0;

  /** Feeds the next bytes of the stream. Bytes after the end of the log are ignored. */
  push(chunk: Uint8Array): void {
    const total = chunk.byteLength;
    this.#consumed += total;
    let i = 0;
    if (this.#ended) {
      this.#streamCrc = crc32(chunk, this.#streamCrc) >>> 0;
      return;
    }
    while (i < total && !this.#ended) {
      if (this.#inPayload) {
        const take = Math.min(this.#remaining, total - i);
        const piece = chunk.subarray(i, i + take);
        if (take === this.#payloadLength && take < DIRECT_CRC_BELOW_BYTES) {
          // A small payload whole in this chunk: checksumming it twice (it is in
          // cache) costs less than combining.
          this.#runningCrc = crc32(piece);
          this.#streamCrc = crc32(piece, this.#streamCrc) >>> 0;
        } else {
          this.#runningCrc = crc32(piece, this.#runningCrc);
        }
        i += take;
        this.#remaining -= take;
        if (this.#remaining === 0) {
          this.#inPayload = false;
          if (!(this.#payloadLength < DIRECT_CRC_BELOW_BYTES && take === this.#payloadLength)) {
            this.#streamCrc = crc32Combine(this.#streamCrc, this.#runningCrc, this.#payloadLength);
          }
          if (this.#runningCrc >>> 0 !== this.#expectedCrc) {
            this.#ended = true;
          } else {
            this.#frames++;
            this.#completeLength += FRAME_HEADER_BYTES + this.#payloadLength;
            this.#completeCrc = this.#streamCrc;
          }
        }
        continue;
      }
      let length: number;
      let expected: number;
      if (this.#headerFill === 0 && total - i >= FRAME_HEADER_BYTES) {
        // The usual case: the whole header is in this chunk.
        length =
          (chunk[i]! | (chunk[i + 1]! << 8) | (chunk[i + 2]! << 16) | (chunk[i + 3]! << 24)) >>> 0;
        expected =
          (chunk[i + 4]! | (chunk[i + 5]! << 8) | (chunk[i + 6]! << 16) | (chunk[i + 7]! << 24)) >>>
          0;
        this.#streamCrc = crc32(chunk.subarray(i, i + FRAME_HEADER_BYTES), this.#streamCrc) >>> 0;
        i += FRAME_HEADER_BYTES;
      } else {
        const take = Math.min(FRAME_HEADER_BYTES - this.#headerFill, total - i);
        this.#header.set(chunk.subarray(i, i + take), this.#headerFill);
        this.#streamCrc = crc32(chunk.subarray(i, i + take), this.#streamCrc) >>> 0;
        this.#headerFill += take;
        i += take;
        if (this.#headerFill < FRAME_HEADER_BYTES) break;
        this.#headerFill = 0;
        const h = this.#header;
        length = (h[0]! | (h[1]! << 8) | (h[2]! << 16) | (h[3]! << 24)) >>> 0;
        expected = (h[4]! | (h[5]! << 8) | (h[6]! << 16) | (h[7]! << 24)) >>> 0;
      }
      if (length === 0) {
        this.#ended = true;
        break;
      }
      // From here the payload's bytes go into #runningCrc, combined into the stream's at its end.
      this.#inPayload = true;
      this.#payloadLength = length;
      this.#remaining = length;
      this.#expectedCrc = expected;
      this.#runningCrc = 0;
    }
    // Bytes after the end of the log still belong to the stream's CRC.
    if (this.#ended && i < total) {
      this.#streamCrc = crc32(chunk.subarray(i), this.#streamCrc) >>> 0;
    }
  }

  /** Whole, valid frames so far. */
  get frames(): number {
    return this.#frames;
  }

  /** Bytes of whole, valid frames so far: the offset just past the last one. */
  get completeLength(): number {
    return this.#completeLength;
  }

  /**
   * CRC-32 of every byte pushed so far, valid or not (the CRC of the file
   * when it was pushed whole), computed in the same pass as the frame CRCs.
   */
  get crc32(): number {
    if (this.#inPayload) {
      const received = this.#payloadLength - this.#remaining;
      return crc32Combine(this.#streamCrc, this.#runningCrc, received);
    }
    return this.#streamCrc >>> 0;
  }

  /** CRC-32 of the bytes `0..completeLength` (the whole, valid frames). */
  get completeCrc32(): number {
    return this.#completeCrc >>> 0;
  }

  /** Bytes pushed so far (valid or not). */
  get consumed(): number {
    return this.#consumed;
  }

  /**
   * True once a frame was found invalid (length 0, or a CRC that does not
   * match): the log ends at {@link completeLength} and no later byte can
   * count. A partial frame at the end of the input is not an end: more bytes
   * may complete it.
   */
  get ended(): boolean {
    return this.#ended;
  }
}
