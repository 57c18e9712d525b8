/**
 * Reading an object whose size the caller does not trust (bucket contents
 * are untrusted input): at most `limit` bytes are ever read or held.
 */
import type { CallOptions, GetResult, ObjectStore } from './object-store.ts';

/** What {@link getCapped} returns for an object larger than the limit. */
export interface TooLarge {
  readonly tooLarge: true;
  /** The size the store reported, or the bytes seen before giving up. */
  readonly size: number;
}

/**
 * Reads `key` in full when it holds at most `limit` bytes.
 * @returns the object; `null` when missing; `{ tooLarge: true }` past the
 *   limit (the body is abandoned after at most `limit + 1` bytes, whatever
 *   size the store announced).
 * @throws what `getStream` throws.
 */
export async function getCapped(
  store: ObjectStore,
  key: string,
  limit: number,
  options: CallOptions = {},
): Promise<GetResult | TooLarge | null> {
  const found = await store.getStream(key, options);
  if (found === null) return null;
  const iterator = found.body[Symbol.asyncIterator]();
  if (found.size > limit) {
    await iterator.return?.();
    return { tooLarge: true, size: found.size };
  }
  const chunks: Uint8Array[] = [];
  let total = 0;
  while (true) {
    const next = await iterator.next();
    if (next.done) break;
    total += next.value.byteLength;
    if (total > limit) {
      await iterator.return?.();
      return { tooLarge: true, size: total };
    }
    chunks.push(next.value);
  }
  const body = Buffer.concat(chunks, total);
  return {
    key,
    size: total,
    version: found.version,
    body: new Uint8Array(body.buffer, body.byteOffset, body.byteLength),
  };
}

/** True for the too-large answer of {@link getCapped}. */
export function isTooLarge(value: GetResult | TooLarge | null): value is TooLarge {
  return value !== null && 'tooLarge' in value;
}
