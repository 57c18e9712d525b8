/**
 * The WAL cutter for logs made of `@x/wal-segment` frames (`u32 LE length`,
 * `u32 LE CRC-32`, payload): it counts commits frame by frame (or by a frame
 * weight, for engines whose frames may batch commits) and keeps the bytes up
 * to the end of the wanted commit. Any materializer whose WAL file is such a
 * log uses it: the framed store directory and the SQLite engine's commit log.
 */

import { crc32 } from 'node:zlib';
import type { WalCutter } from '@x/engine';
import { FRAME_HEADER_BYTES } from '@x/wal-segment';

/**
 * Finds frame boundaries (`u32 LE length`, `u32 LE CRC-32`, payload) in a
 * stream of chunks and keeps the bytes up to the end of the wanted frame.
 *
 * The log ends where `@x/wal-segment` says it ends: at the first frame that
 * declares length 0 or fails its CRC. Such a frame and everything after it
 * are never counted or kept, so the counts agree with `completeFrames` and
 * with what the engine reads when it opens the restored `wal.bin`.
 */
/**
 * How many commits each frame stands for, read from the first `headerBytes`
 * bytes of its payload (for logs whose frames may batch several commits).
 * Without it, every frame is one commit.
 */
export interface FrameWeight {
  readonly headerBytes: number;
  /** Commits the frame stands for (at least 1); throws on a header it cannot read. */
  commitsOf(payloadHeader: Uint8Array): number;
}

export class FramedWalCutter implements WalCutter {
  readonly #wanted: number;
  readonly #weight: FrameWeight | undefined;
  #seen = 0;
  #kept = 0;
  #straddled: { first: number; last: number } | null = null;
  #payloadHeader: Uint8Array = new Uint8Array(0);
  #payloadHeaderFilled = 0;
  #keeping: boolean;
  #ended = false;
  readonly #header = new Uint8Array(FRAME_HEADER_BYTES);
  #headerFilled = 0;
  #inPayload = false;
  #remaining = 0;
  #expectedCrc = 0;
  #runningCrc = 0;

  constructor(commits: number, weight?: FrameWeight) {
    this.#wanted = commits;
    this.#keeping = commits > 0;
    this.#weight = weight;
    if (weight) this.#payloadHeader = new Uint8Array(weight.headerBytes);
  }

  /** The batch frame the wanted commit fell inside (its first and last commit), if it did. */
  get straddledBatch(): { readonly first: number; readonly last: number } | null {
    return this.#straddled;
  }

  get commitsSeen(): number {
    return this.#seen;
  }

  get commitsKept(): number {
    return this.#kept;
  }

  push(chunk: Uint8Array): number {
    const wasKeeping = this.#keeping;
    let keepEnd = 0;
    let index = 0;
    const length = chunk.byteLength;
    while (index < length && !this.#ended) {
      if (this.#inPayload) {
        const take = Math.min(this.#remaining, length - index);
        this.#runningCrc = crc32(chunk.subarray(index, index + take), this.#runningCrc);
        if (this.#payloadHeaderFilled < this.#payloadHeader.byteLength) {
          const copy = Math.min(take, this.#payloadHeader.byteLength - this.#payloadHeaderFilled);
          this.#payloadHeader.set(chunk.subarray(index, index + copy), this.#payloadHeaderFilled);
          this.#payloadHeaderFilled += copy;
        }
        index += take;
        this.#remaining -= take;
        if (this.#remaining > 0) break;
        this.#inPayload = false;
        if (this.#runningCrc >>> 0 !== this.#expectedCrc) {
          this.#ended = true;
          break;
        }
        // A frame ended at `index`.
        const commits = this.#commitsOfFrame();
        if (commits === null) {
          this.#ended = true;
          break;
        }
        this.#seen += commits;
        if (this.#keeping) {
          if (this.#kept + commits > this.#wanted) {
            // The wanted commit is inside a batch: it cannot be cut out of
            // it, so the log stops before the batch (restore refuses).
            this.#straddled = { first: this.#kept + 1, last: this.#kept + commits };
            this.#keeping = false;
          } else {
            this.#kept += commits;
            keepEnd = index;
            if (this.#kept >= this.#wanted) this.#keeping = false;
          }
        }
        continue;
      }
      let payloadLength: number;
      if (this.#headerFilled === 0 && length - index >= FRAME_HEADER_BYTES) {
        // The common case: the whole header is in this chunk.
        payloadLength = readU32(chunk, index);
        this.#expectedCrc = readU32(chunk, index + 4);
        index += FRAME_HEADER_BYTES;
      } else {
        const take = Math.min(FRAME_HEADER_BYTES - this.#headerFilled, length - index);
        this.#header.set(chunk.subarray(index, index + take), this.#headerFilled);
        this.#headerFilled += take;
        index += take;
        if (this.#headerFilled < FRAME_HEADER_BYTES) break;
        this.#headerFilled = 0;
        payloadLength = readU32(this.#header, 0);
        this.#expectedCrc = readU32(this.#header, 4);
      }
      if (payloadLength === 0) {
        this.#ended = true;
        break;
      }
      this.#inPayload = true;
      this.#remaining = payloadLength;
      this.#runningCrc = 0;
      this.#payloadHeaderFilled = 0;
    }
    if (!wasKeeping) return 0;
    if (this.#keeping && !this.#ended) return length;
    // Stopped in this chunk: at the wanted frame, or at the end of the log.
    return keepEnd;
  }

  /** The commits of the frame just read; `null` when its header does not say (the log ends there). */
  #commitsOfFrame(): number | null {
    const weight = this.#weight;
    if (!weight) return 1;
    if (this.#payloadHeaderFilled < weight.headerBytes) return null;
    try {
      const commits = weight.commitsOf(this.#payloadHeader);
      return Number.isSafeInteger(commits) && commits >= 1 ? commits : null;
    } catch {
      // A frame whose header names no commit count is where the log ends,
      // as for a frame failing its CRC; restore then refuses the point by
      // its commit count, naming it.
      return null;
    }
  }
}

function readU32(bytes: Uint8Array, at: number): number {
  return (
    (bytes[at]! | (bytes[at + 1]! << 8) | (bytes[at + 2]! << 16) | (bytes[at + 3]! << 24)) >>> 0
  );
}
