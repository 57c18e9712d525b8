/**
 * Reading the part of a framed WAL file that is ready to ship.
 */
import { open } from 'node:fs/promises';
import { FRAME_HEADER_BYTES, FrameCounter } from './frames.ts';

/** Bytes per read call, so an abort is noticed within one read of this size. */
const READ_CHUNK_BYTES = 16 * 1024 * 1024;

/** A range of whole, valid frames read from a WAL file. */
export interface NewSegment {
  /** File offset of the first byte: the cursor passed in. */
  start: number;
  /** File offset just past the last whole, valid frame. `end > start`. */
  end: number;
  /** The file's bytes `start..end`. */
  bytes: Uint8Array;
  /** Frames (commits) in `bytes`. */
  frames: number;
  /** CRC-32 of `bytes`, from the same pass that validated the frames. */
  crc32: number;
}

export interface ReadNewSegmentOptions {
  signal?: AbortSignal;
  /**
   * Read at most this many bytes (the segment then ends at the last whole
   * frame within them; call again from its end for the rest). A single frame
   * larger than this is still read whole. Default: no limit.
   */
  maxBytes?: number;
}

function checkOffset(name: string, value: number): void {
  if (!Number.isSafeInteger(value) || value < 0) {
    throw new RangeError(`${name} must be an integer in 0..2^53-1, got ${value}`);
  }
}

/**
 * The bytes of `path` from `cursor` up to the last whole, valid frame that
 * ends at or before `durableLength`, or null when there is no such frame.
 *
 * `cursor` must be a frame boundary (0, or the `end` of a previous segment).
 * Only the range `cursor..durableLength` is read (less when the file is
 * shorter, or with `maxBytes`): nothing past `durableLength` is ever looked
 * at, so bytes the engine has not made durable are never shipped. A partial
 * frame or a frame whose CRC fails ends the segment, and every later call
 * from that end returns null: the log ends there.
 *
 * Throws the file system's error (ENOENT, EACCES) and the signal's reason
 * when aborted; RangeError for offsets that are not integers in 0..2^53 − 1.
 */
export async function readNewSegment(
  path: string,
  cursor: number,
  durableLength: number,
  options: ReadNewSegmentOptions = {},
): Promise<NewSegment | null> {
  checkOffset('cursor', cursor);
  checkOffset('durableLength', durableLength);
  if (
    options.maxBytes !== undefined &&
    (!Number.isSafeInteger(options.maxBytes) || options.maxBytes < 1)
  ) {
    throw new RangeError(`maxBytes must be a positive integer, got ${options.maxBytes}`);
  }
  options.signal?.throwIfAborted();
  if (durableLength <= cursor) return null;
  const handle = await open(path, 'r');
  try {
    const available = Math.min(durableLength, (await handle.stat()).size) - cursor;
    if (available < FRAME_HEADER_BYTES) return null;
    let want = Math.min(available, options.maxBytes ?? available);
    if (want < available) {
      // With a cap, the first frame is read whole even when larger than the cap.
      const header = Buffer.alloc(FRAME_HEADER_BYTES);
      await readFully(handle, header, cursor, options.signal);
      const first = FRAME_HEADER_BYTES + header.readUInt32LE(0);
      if (first > want) want = Math.min(first, available);
    }
    const buffer = Buffer.allocUnsafe(want);
    const read = await readFully(handle, buffer, cursor, options.signal);
    const counter = new FrameCounter();
    counter.push(buffer.subarray(0, read));
    const length = counter.completeLength;
    if (length === 0) return null;
    return {
      start: cursor,
      end: cursor + length,
      bytes: buffer.subarray(0, length),
      frames: counter.frames,
      crc32: counter.completeCrc32,
    };
  } finally {
    await handle.close();
  }
}

/** Reads into `buffer` from `position` until it is full or the file ends; returns the bytes read. */
async function readFully(
  handle: import('node:fs/promises').FileHandle,
  buffer: Uint8Array,
  position: number,
  signal: AbortSignal | undefined,
): Promise<number> {
  let filled = 0;
  while (filled < buffer.byteLength) {
    signal?.throwIfAborted();
    const length = Math.min(READ_CHUNK_BYTES, buffer.byteLength - filled);
    const { bytesRead } = await handle.read(buffer, filled, length, position + filled);
    if (bytesRead === 0) break;
    filled += bytesRead;
  }
  return filled;
}
