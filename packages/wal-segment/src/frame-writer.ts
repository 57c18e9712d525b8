/**
 * Appending frames to a framed WAL file, for engines that adopt the format
 * and for tests and benchmarks.
 */
import { type FileHandle, open } from 'node:fs/promises';
import { FrameWriterError } from './errors.ts';
import { encodeFrame, FrameCounter } from './frames.ts';

const SCAN_CHUNK_BYTES = 4 * 1024 * 1024;

/**
 * Appends frames to one file. Opening scans the existing file and truncates
 * a torn tail (a partial or invalid last frame) so new frames follow the last
 * valid one; appends are not durable until {@link sync} (fdatasync) returns.
 * Calls are serialised: each starts after the previous one settled. After a
 * failed write or sync the writer refuses further calls (the file may end in
 * a partial frame): reopen it.
 */
export class FrameWriter {
  readonly path: string;
  #handle: FileHandle;
  #length: number;
  #durableLength: number;
  #queue: Promise<unknown> = Promise.resolve();
  #failure: FrameWriterError | undefined;
  #closed = false;

  private constructor(path: string, handle: FileHandle, length: number) {
    this.path = path;
    this.#handle = handle;
    this.#length = length;
    this.#durableLength = length;
  }

  /**
   * Opens (creating when missing) the framed file at `path`. A torn tail is
   * truncated away and the truncation fsynced before this returns.
   */
  static async open(path: string, options: { signal?: AbortSignal } = {}): Promise<FrameWriter> {
    options.signal?.throwIfAborted();
    // 'a+': created when missing; every write goes to the end of the file.
    const handle = await open(path, 'a+');
    try {
      const counter = new FrameCounter();
      const buffer = Buffer.allocUnsafe(SCAN_CHUNK_BYTES);
      let position = 0;
      for (;;) {
        options.signal?.throwIfAborted();
        const { bytesRead } = await handle.read(buffer, 0, buffer.byteLength, position);
        if (bytesRead === 0) break;
        counter.push(buffer.subarray(0, bytesRead));
        position += bytesRead;
        if (counter.ended) break;
      }
      const size = (await handle.stat()).size;
      if (counter.completeLength < size) {
        await handle.truncate(counter.completeLength);
        await handle.datasync();
      }
      return new FrameWriter(path, handle, counter.completeLength);
    } catch (error) {
      await handle.close();
      throw error;
    }
  }

  /** Bytes of whole frames written (not necessarily durable). */
  get length(): number {
    return this.#length;
  }

  /** Bytes known durable: the length when the last {@link sync} started (or when opened). */
  get durableLength(): number {
    return this.#durableLength;
  }

  #enqueue<T>(operation: () => Promise<T>): Promise<T> {
    const next = this.#queue.then(() => {
      if (this.#failure !== undefined) throw this.#failure;
      return operation();
    });
    // The queue only orders calls; each caller sees its own call's outcome.
    this.#queue = next.catch(() => undefined);
    return next;
  }

  /** Appends one frame holding `payload` (see `encodeFrame` for the limits). Not durable until {@link sync}. */
  append(payload: Uint8Array): Promise<void> {
    const frame = encodeFrame(payload);
    return this.#enqueue(async () => {
      try {
        let written = 0;
        while (written < frame.byteLength) {
          const { bytesWritten } = await this.#handle.write(frame, written);
          written += bytesWritten;
        }
      } catch (error) {
        this.#failure = new FrameWriterError(this.path, 'append failed', { cause: error });
        throw this.#failure;
      }
      this.#length += frame.byteLength;
    });
  }

  /** Makes every frame appended so far durable (fdatasync). */
  sync(): Promise<void> {
    return this.#enqueue(async () => {
      const length = this.#length;
      try {
        await this.#handle.datasync();
      } catch (error) {
        this.#failure = new FrameWriterError(this.path, 'fsync failed', { cause: error });
        throw this.#failure;
      }
      this.#durableLength = length;
    });
  }

  /** Closes the file. Does not sync: call {@link sync} first for durability. */
  close(): Promise<void> {
    // Runs even after a failure: the file handle is released either way.
    const next = this.#queue.then(async () => {
      if (this.#closed) return;
      this.#closed = true;
      this.#failure ??= new FrameWriterError(this.path, 'the writer is closed');
      await this.#handle.close();
    });
    this.#queue = next.catch(() => undefined);
    return next;
  }
}
