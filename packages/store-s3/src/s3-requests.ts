/**
 * The S3 store's request layer: one request with the caller's signal and the
 * typed error (`classifyS3Error`), key mapping under the prefix, and
 * conditional writes — 409 `ConditionalRequestConflict` retried with
 * bounded, jittered back-off; a precondition answer after SDK retries
 * resolved by reading the object back and recognising our own write id (see
 * "Retried conditional writes are recognised" in the package README).
 */
import { HeadObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { ConflictError, type ObjectVersion, StoreError } from '@x/store';
import { jitteredBackoffMs, sleepUnlessAborted } from '@x/store/adapter';
import {
  classifyS3Error,
  describeFailure,
  isConditionalConflict,
  isMissingKey,
  isPreconditionFailure,
  type S3Operation,
} from './errors.ts';

import { WRITE_ID_METADATA } from './s3-options.ts';

/** What the request layer needs of one `S3Store`. */
export interface S3Context {
  readonly client: S3Client;
  readonly bucket: string;
  /** Normalised, without a trailing `/` (empty for the bucket's root). */
  readonly prefix: string;
  readonly conflictAttempts: number;
  readonly conflictBaseDelayMs: number;
  readonly conflictMaxDelayMs: number;
}

export type Mode = 'overwrite' | 'create' | { readonly ifMatch: ObjectVersion };

/**
 * A listing entry that is a directory placeholder: a key ending in `/` with
 * exactly zero bytes. Skipped by `list`, with or without an ETag.
 */
export function isDirectoryPlaceholder(entry: { Key?: string; Size?: number }): boolean {
  return entry.Key?.endsWith('/') === true && entry.Size === 0;
}

export function versionOf(etag: string | undefined, key: string, operation: string): ObjectVersion {
  if (etag === undefined || etag === '') {
    throw new StoreError(`s3 ${operation} for ${key}: the service returned no ETag`, { key });
  }
  return { etag };
}

export function relativeKey(context: S3Context, fullKey: string): string {
  return context.prefix === '' ? fullKey : fullKey.slice(context.prefix.length + 1);
}

/**
 * Sends one request with the caller's signal; an aborted call rejects with
 * the signal's reason, anything else with the typed error.
 */
export async function send<Output>(
  operation: S3Operation,
  key: string,
  signal: AbortSignal | undefined,
  send: (abortSignal: AbortSignal | undefined) => Promise<Output>,
): Promise<Output> {
  signal?.throwIfAborted();
  try {
    return await send(signal);
  } catch (error) {
    if (signal?.aborted) throw signal.reason;
    throw classifyS3Error(error, operation, key);
  }
}

/** HEAD returning the write id too, for recognising our own retried write. */
export async function readBack(
  context: S3Context,
  fullKey: string,
  signal: AbortSignal | undefined,
): Promise<{ version: ObjectVersion; writeId: string | undefined } | null> {
  try {
    const response = await context.client.send(
      new HeadObjectCommand({ Bucket: context.bucket, Key: fullKey }),
      { abortSignal: signal },
    );
    return {
      version: versionOf(response.ETag, fullKey, 'head'),
      writeId: response.Metadata?.[WRITE_ID_METADATA],
    };
  } catch (error) {
    if (signal?.aborted) throw signal.reason;
    if (isMissingKey(describeFailure(error))) return null;
    throw classifyS3Error(error, 'head', relativeKey(context, fullKey));
  }
}

/**
 * Runs a conditional write: retries 409 conflicts with back-off, and
 * resolves a precondition failure after SDK retries by reading back.
 * `ours` says whether the read-back object is the one this call wrote.
 */
export async function conditional<Output>(
  context: S3Context,
  operation: S3Operation,
  key: string,
  fullKey: string,
  signal: AbortSignal | undefined,
  attempt: () => Promise<Output>,
  recover: (
    readBack: { version: ObjectVersion; writeId: string | undefined } | null,
  ) => Output | undefined,
): Promise<Output> {
  let sawConflict = false;
  for (let conflicts = 1; ; conflicts += 1) {
    signal?.throwIfAborted();
    try {
      return await attempt();
    } catch (error) {
      if (signal?.aborted) throw signal.reason;
      if (StoreError.isInstance(error)) throw error;
      const failure = describeFailure(error);
      if (sawConflict && failure.code === 'NoSuchUpload') {
        // S3 may drop a multipart upload whose completion conflicted: the caller starts over.
        throw new ConflictError(key, { cause: classifyS3Error(error, operation, key) });
      }
      if (
        failure.attempts > 1 &&
        (isPreconditionFailure(failure) || isMissingKey(failure) || failure.code === 'NoSuchUpload')
      ) {
        // An earlier attempt of this very request may have been applied.
        const recovered = recover(await readBack(context, fullKey, signal));
        if (recovered !== undefined) return recovered;
      }
      if (isConditionalConflict(failure) && !isPreconditionFailure(failure)) {
        sawConflict = true;
        if (conflicts < context.conflictAttempts) {
          await sleepUnlessAborted(
            jitteredBackoffMs(conflicts, context.conflictBaseDelayMs, context.conflictMaxDelayMs),
            signal,
          );
          continue;
        }
      }
      throw classifyS3Error(error, operation, key);
    }
  }
}
