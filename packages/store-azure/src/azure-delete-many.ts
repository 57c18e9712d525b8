/**
 * Batch deletes through the Blob Batch API: up to 256 deletes a request,
 * each answered on its own. A missing blob is not a failure. A service that
 * refuses the batch call itself (an emulator or account without it) is sent
 * single deletes instead, from then on.
 */
import type { BlobBatchDeleteBlobsResponse, ContainerClient } from '@azure/storage-blob';
import type { CallOptions, DeleteFailure, DeleteManyResult, ObjectStore } from '@x/store';
import { deleteOneByOne, failuresInKeyOrder } from '@x/store/adapter';
import { azureFailureOf, throwAbortReason, unexpectedFailure } from './errors.ts';

/** The service's limit on sub-requests in one batch. */
export const MAX_DELETES_PER_BATCH = 256;

/** Answers to a batch request that mean the service does not offer the call. */
const BATCH_UNSUPPORTED = new Set([400, 404, 405, 501]);

export interface BatchDeleteContext {
  readonly containerClient: ContainerClient;
  /** The store, for single deletes when the batch call is refused. */
  readonly store: ObjectStore;
  readonly blobName: (key: string) => string;
  readonly secrets: readonly string[];
  refused: boolean;
}

export async function deleteBlobs(
  context: BatchDeleteContext,
  keys: readonly string[],
  options: CallOptions,
): Promise<DeleteManyResult> {
  const failed: DeleteFailure[] = [];
  for (let start = 0; start < keys.length; start += MAX_DELETES_PER_BATCH) {
    const batch = keys.slice(start, start + MAX_DELETES_PER_BATCH);
    failed.push(...(await deleteBatch(context, batch, options)));
  }
  return { failed: failuresInKeyOrder(keys, failed) };
}

async function deleteBatch(
  context: BatchDeleteContext,
  keys: readonly string[],
  options: CallOptions,
): Promise<readonly DeleteFailure[]> {
  if (context.refused) return (await deleteOneByOne(context.store, keys, options)).failed;
  const clients = keys.map((key) => context.containerClient.getBlobClient(context.blobName(key)));
  let answer: BlobBatchDeleteBlobsResponse;
  try {
    answer = await context.containerClient
      .getBlobBatchClient()
      .deleteBlobs(clients, { deleteSnapshots: 'include', abortSignal: options.signal });
  } catch (error) {
    throwAbortReason(options.signal, error);
    const { statusCode, errorCode } = azureFailureOf(error);
    if (errorCode === 'ContainerNotFound' || !BATCH_UNSUPPORTED.has(statusCode ?? 0))
      throw unexpectedFailure('batch delete', keys[0], error, context.secrets);
    context.refused = true;
    return (await deleteOneByOne(context.store, keys, options)).failed;
  }
  const keyOfUrl = new Map(clients.map((client, index) => [client.url, keys[index] as string]));
  const failed: DeleteFailure[] = [];
  for (const [index, sub] of answer.subResponses.entries()) {
    if (sub.status < 300 || (sub.status === 404 && sub.errorCode !== 'ContainerNotFound')) continue;
    // Sub-responses name their request; its URL may carry a SAS, so only the key is kept.
    const key = keyOfUrl.get(sub._request.url) ?? (keys[index] as string);
    const failure = { statusCode: sub.status, code: sub.errorCode, message: sub.statusMessage };
    failed.push({ key, error: unexpectedFailure('delete', key, failure, context.secrets) });
  }
  return failed;
}
