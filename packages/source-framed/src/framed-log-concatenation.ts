/**
 * The framed store's log compaction: a run's commit-log bodies concatenated,
 * frame for frame, in order. A frame is an opaque commit, so nothing can be
 * dropped; compaction buys fewer objects and a larger zstd input, and every
 * commit inside stays exactly restorable. A body that is not whole, valid
 * frames throws {@link FramedLogConcatenationError} (the worker leaves the
 * run as it is). Held in memory, at most {@link MAX_FRAMED_COMPACTED_LOG_BYTES},
 * the bound the worker plans runs by. See the package README, _Compaction_.
 */
import type { LogCompactor } from '@x/engine';
import { completeFrames } from '@x/wal-segment';

/** The most log one framed compacted object covers: 64 MiB (twice a default segment). */
export const MAX_FRAMED_COMPACTED_LOG_BYTES = 64 * 1024 * 1024;

/** A body fed to the concatenation is not a whole, valid framed log, or the result would exceed its bound. */
export class FramedLogConcatenationError extends Error {
  /** Whether the same call, made again later, may succeed with nothing else changed. */
  get retryable(): boolean {
    return false;
  }

  readonly code = 'FRAMED_LOG_CONCATENATION';
  constructor(message: string) {
    super(message);
    this.name = 'FramedLogConcatenationError';
  }
}

export class FramedLogConcatenation implements LogCompactor {
  readonly #bodies: Uint8Array[] = [];
  readonly #maxBytes: number;
  #bytes = 0;
  #commits = 0;

  constructor(maxBytes: number = MAX_FRAMED_COMPACTED_LOG_BYTES) {
    this.#maxBytes = maxBytes;
  }

  get commits(): number {
    return this.#commits;
  }

  add(body: Uint8Array): void {
    const { length, frames } = completeFrames(body);
    if (length !== body.byteLength)
      throw new FramedLogConcatenationError(
        `body ${this.#bodies.length + 1}: ${body.byteLength - length} of its ${body.byteLength} bytes after its last valid frame (offset ${length}) are not a whole, valid frame`,
      );
    if (this.#bytes + length > this.#maxBytes)
      throw new FramedLogConcatenationError(
        `the run holds more than ${this.#maxBytes} bytes of log (${this.#bytes + length} with body ${this.#bodies.length + 1})`,
      );
    this.#bodies.push(body);
    this.#bytes += length;
    this.#commits += frames;
  }

  finish(): Uint8Array {
    if (this.#bodies.length === 0) throw new FramedLogConcatenationError('nothing was fed');
    const merged = new Uint8Array(this.#bytes);
    let offset = 0;
    for (const body of this.#bodies) {
      merged.set(body, offset);
      offset += body.byteLength;
    }
    return merged;
  }
}
