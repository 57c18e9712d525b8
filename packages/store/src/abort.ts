/** Abort helpers shared by the stores. */

/** Throws the signal's reason when it has fired. */
export function throwIfAborted(signal: AbortSignal | undefined): void {
  signal?.throwIfAborted();
}

/** True when `error` is what an aborted signal rejects with (`AbortError` or `TimeoutError`). */
export function isAbortError(error: unknown): boolean {
  return (
    typeof error === 'object' &&
    error !== null &&
    'name' in error &&
    ((error as { name: unknown }).name === 'AbortError' ||
      (error as { name: unknown }).name === 'TimeoutError')
  );
}

/** Turns an `UploadSource` into chunks. */
export async function* chunksOf(
  source: AsyncIterable<Uint8Array> | Uint8Array,
): AsyncIterable<Uint8Array> {
  if (source instanceof Uint8Array) {
    yield source;
    return;
  }
  yield* source;
}
