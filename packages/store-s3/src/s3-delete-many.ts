/**
 * Batch deletes through S3 `DeleteObjects`: up to 1,000 keys a request, in
 * quiet mode, so the answer lists only the keys that failed. A service that
 * answers 501 (an S3-compatible server without the call) is sent single
 * deletes instead, from then on.
 */
import { type _Error, DeleteObjectsCommand } from '@aws-sdk/client-s3';
import {
  type CallOptions,
  type DeleteFailure,
  type DeleteManyResult,
  joinKey,
  NotImplementedError,
  type ObjectStore,
  StoreError,
} from '@x/store';
import { deleteOneByOne, failuresInKeyOrder } from '@x/store/adapter';
import { relativeKey, type S3Context, send } from './s3-requests.ts';

/** S3's limit on keys in one `DeleteObjects` request. */
export const MAX_KEYS_PER_DELETE = 1000;

/** Error codes of a key in a `DeleteObjects` answer that mean it is not there: done. */
const ALREADY_ABSENT = new Set(['NoSuchKey', 'NotFound']);

/** Whether the service refused `DeleteObjects` itself; then single deletes are sent. */
export interface BatchDeleteState {
  refused: boolean;
}

export async function deleteObjects(
  context: S3Context,
  store: ObjectStore,
  state: BatchDeleteState,
  keys: readonly string[],
  options: CallOptions,
): Promise<DeleteManyResult> {
  const failed: DeleteFailure[] = [];
  for (let start = 0; start < keys.length; start += MAX_KEYS_PER_DELETE) {
    const batch = keys.slice(start, start + MAX_KEYS_PER_DELETE);
    failed.push(...(await deleteBatch(context, store, state, batch, options)));
  }
  return { failed: failuresInKeyOrder(keys, failed) };
}

async function deleteBatch(
  context: S3Context,
  store: ObjectStore,
  state: BatchDeleteState,
  keys: readonly string[],
  options: CallOptions,
): Promise<readonly DeleteFailure[]> {
  if (state.refused) return (await deleteOneByOne(store, keys, options)).failed;
  try {
    const answer = await send('delete-many', keys[0] as string, options.signal, (abortSignal) =>
      context.client.send(
        new DeleteObjectsCommand({
          Bucket: context.bucket,
          Delete: {
            Objects: keys.map((key) => ({ Key: joinKey(context.prefix, key) })),
            Quiet: true,
          },
        }),
        { abortSignal },
      ),
    );
    return failuresOf(context, answer.Errors ?? []);
  } catch (error) {
    if (!NotImplementedError.isInstance(error)) throw error;
    state.refused = true;
    return (await deleteOneByOne(store, keys, options)).failed;
  }
}

/**
 * The per-key errors of a `DeleteObjects` answer as failures, keys relative
 * to the store.
 * @throws StoreError when an error names no key: which key stayed is unknown.
 */
export function failuresOf(context: S3Context, errors: readonly _Error[]): DeleteFailure[] {
  const failed: DeleteFailure[] = [];
  for (const entry of errors) {
    if (entry.Key === undefined)
      throw new StoreError(
        `s3 delete-many: the service reported a failure without naming its key (${entry.Code ?? 'UnknownError'})`,
      );
    if (ALREADY_ABSENT.has(entry.Code ?? '')) continue;
    const key = relativeKey(context, entry.Key);
    const code = entry.Code ?? 'UnknownError';
    failed.push({
      key,
      error: new StoreError(`s3 delete failed for ${key}: ${entry.Message ?? code} (${code})`, {
        key,
      }),
    });
  }
  return failed;
}
