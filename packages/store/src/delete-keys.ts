/**
 * Deleting many keys. `deleteKeys(store, keys, options)` is what callers use:
 * the store's own `deleteMany` when it has one (a service's batch delete,
 * many keys a request), else one `delete` per key. Either way the answer is
 * per key, so a caller learns exactly which keys are still there.
 */
import { isAbortError, throwIfAborted } from './abort.ts';
import { StoreError } from './errors.ts';
import { validateKey } from './keys.ts';
import type { CallOptions, DeleteFailure, DeleteManyResult, ObjectStore } from './object-store.ts';

/** How many single deletes the fallback keeps in flight. */
const SINGLE_DELETE_CONCURRENCY = 8;

/**
 * Deletes every key in `keys`, unconditionally; a missing key is not a
 * failure. Resolves with the keys that could not be deleted, each with its
 * error.
 * @throws InvalidKeyError for a bad key (nothing deleted); the signal's reason
 * when aborted; StoreError when the whole request failed and no key's fate is known.
 */
export async function deleteKeys(
  store: ObjectStore,
  keys: readonly string[],
  options: CallOptions = {},
): Promise<DeleteManyResult> {
  throwIfAborted(options.signal);
  if (keys.length === 0) return { failed: [] };
  for (const key of keys) validateKey(key);
  if (store.deleteMany) return store.deleteMany(keys, options);
  return deleteOneByOne(store, keys, options);
}

/** The fallback: one `delete` per key, a few at a time, failures collected per key. */
export async function deleteOneByOne(
  store: ObjectStore,
  keys: readonly string[],
  options: CallOptions = {},
): Promise<DeleteManyResult> {
  const failed: DeleteFailure[] = [];
  let next = 0;
  let stopped = false;
  const worker = async (): Promise<void> => {
    while (next < keys.length && !stopped) {
      const key = keys[next++] as string;
      throwIfAborted(options.signal);
      try {
        await store.delete(key, options);
      } catch (error) {
        if (isAbortError(error) || !StoreError.isInstance(error)) {
          stopped = true;
          throw error;
        }
        failed.push({ key, error });
      }
    }
  };
  const workers = Math.min(SINGLE_DELETE_CONCURRENCY, keys.length);
  await Promise.all(Array.from({ length: workers }, worker));
  return { failed: failuresInKeyOrder(keys, failed) };
}

/** `failed` in the order of `keys`, so answers do not depend on request timing. */
export function failuresInKeyOrder(
  keys: readonly string[],
  failed: DeleteFailure[],
): DeleteFailure[] {
  if (failed.length < 2) return failed;
  const position = new Map(keys.map((key, index) => [key, index]));
  return failed.sort((a, b) => (position.get(a.key) ?? 0) - (position.get(b.key) ?? 0));
}
