/**
 * Streams one object while checking it against what a manifest records.
 *
 * The size the store reports is compared before the first byte is read, the
 * running size while reading (a longer body is cut off at once), and the
 * CRC-32 at the end. Callers write the chunks to staging only and treat
 * them as usable once this resolves; any refusal is an
 * {@link ObjectCorruptError} or {@link ObjectMissingError} naming the key.
 * Memory use is one chunk of the store's stream at a time.
 */
import { Crc32, formatCrc32 } from '@x/manifest';
import type { ObjectStore } from '@x/store';
import { ObjectCorruptError, ObjectMissingError } from './restore-errors.ts';

export interface ExpectedObject {
  readonly key: string;
  readonly size: number;
  readonly crc32: string;
}

export interface VerifiedDownloadOptions {
  readonly signal?: AbortSignal;
  /** The manifest that names the object, for the missing-object error. */
  readonly manifestKey: string;
  /** Called after each chunk with the bytes of this object read so far. */
  readonly onBytes?: (bytesRead: number) => void;
}

/**
 * Reads `expected.key`, hands each chunk to `sink` in order, and resolves
 * once size and CRC-32 matched. `sink` may return a promise: the next chunk
 * is read while it runs, but the next call of `sink` waits for it, so calls
 * never overlap and come in order.
 */
export async function downloadVerified(
  store: ObjectStore,
  expected: ExpectedObject,
  sink: (chunk: Uint8Array) => void | Promise<void>,
  options: VerifiedDownloadOptions,
): Promise<void> {
  const { signal } = options;
  const result = await store.getStream(expected.key, signal === undefined ? {} : { signal });
  if (result === null) throw new ObjectMissingError(expected.key, options.manifestKey);
  const body = result.body;
  if (result.size !== expected.size) {
    // Release the stream without reading it.
    await closeQuietly(body);
    throw new ObjectCorruptError(expected.key, 'size', String(expected.size), String(result.size));
  }
  const hash = new Crc32();
  let read = 0;
  // The sink of one chunk runs while the next is read: at most two chunks
  // are held, and the sink still sees them one at a time, in order.
  let pending: Promise<void> | undefined;
  try {
    for await (const chunk of body) {
      signal?.throwIfAborted();
      read += chunk.byteLength;
      if (read > expected.size) {
        throw new ObjectCorruptError(
          expected.key,
          'size',
          String(expected.size),
          `more than ${expected.size}`,
        );
      }
      hash.update(chunk);
      await pending;
      pending = Promise.resolve(sink(chunk));
      // Marks it handled while the next chunk is read; awaited (and rethrown) above.
      pending.catch(() => {});
      options.onBytes?.(read);
    }
    await pending;
  } catch (error) {
    // The chunk being written may fail too; the first failure is the one reported.
    await pending?.catch(() => {});
    throw error;
  }
  if (read !== expected.size) {
    throw new ObjectCorruptError(expected.key, 'size', String(expected.size), String(read));
  }
  const actual = formatCrc32(hash.digest());
  if (actual !== expected.crc32.toLowerCase()) {
    throw new ObjectCorruptError(expected.key, 'crc32', expected.crc32.toLowerCase(), actual);
  }
}

async function closeQuietly(body: AsyncIterable<Uint8Array>): Promise<void> {
  const iterator = body[Symbol.asyncIterator]();
  try {
    await iterator.return?.();
  } catch {
    // Closing an unread stream can fail on some transports; the refusal that
    // follows is what matters, and the stream holds nothing of ours.
  }
}
