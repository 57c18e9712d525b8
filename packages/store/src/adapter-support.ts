/**
 * Helpers for authors of `ObjectStore` adapters on a cloud service (the S3,
 * Azure and GCS adapters use them). Each does one thing every such adapter
 * needs and that is easy to get subtly wrong: back-off that stops when the
 * caller aborts, rejecting with the signal's reason rather than the SDK's
 * own abort error, recognising an adapter's own retried write, and listings
 * in the interface's order.
 */
import { randomUUID } from 'node:crypto';
import { AlreadyExistsError, NotImplementedError, PreconditionFailedError } from './errors.ts';
import { compareKeys } from './keys.ts';
import type { ListResult, ObjectInfo, PutMode, StoreCapabilities } from './object-store.ts';

/**
 * Waits `ms` milliseconds. Rejects with the signal's reason at once when the
 * signal has fired or fires during the wait (the timer is then cleared).
 */
export function sleepUnlessAborted(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * The wait before retry number `retry` (from 1): exponential from
 * `baseDelayMs`, capped at `maxDelayMs`, with "equal jitter" (a uniformly
 * random point in the upper half), so racing clients spread out yet never
 * retry at once.
 */
export function jitteredBackoffMs(retry: number, baseDelayMs: number, maxDelayMs: number): number {
  const ceiling = Math.min(maxDelayMs, baseDelayMs * 2 ** (retry - 1));
  return ceiling / 2 + Math.random() * (ceiling / 2);
}

/**
 * What a failed call should reject with: the signal's reason when the caller
 * aborted (SDKs reject with their own `AbortError`; the interface promises
 * the reason), `error` otherwise.
 */
export function abortReasonOr(signal: AbortSignal | undefined, error: unknown): unknown {
  return signal?.aborted ? signal.reason : error;
}

/**
 * A new random write id. Adapters record one in the object's metadata with
 * every conditional write, so that when an SDK retry of a write that already
 * landed is refused by that very write, reading the object back shows the
 * write was ours (and a success).
 */
export function newWriteId(): string {
  return randomUUID();
}

/**
 * The error for a conditional write the service refused, once reading the
 * object back showed it does not hold this write: `AlreadyExistsError` for
 * `create`, else `PreconditionFailedError` (saying so when no object is at
 * the key).
 */
export function refusedWriteError(
  key: string,
  mode: Exclude<PutMode, 'overwrite'>,
  objectAbsent: boolean,
): AlreadyExistsError | PreconditionFailedError {
  if (mode === 'create') return new AlreadyExistsError(key);
  return new PreconditionFailedError(key, {
    detail: objectAbsent ? 'no object at the key' : undefined,
  });
}

/**
 * Throws `NotImplementedError` for `operation` when the store's
 * configuration declares `capability` off, so a condition the service would
 * ignore is never sent.
 */
export function requireCapability(
  store: { readonly capabilities: StoreCapabilities; readonly description: string },
  capability: keyof StoreCapabilities,
  operation: string,
  key: string,
): void {
  if (!store.capabilities[capability]) {
    throw new NotImplementedError(operation, {
      key,
      detail: `${store.description} is configured with ${capability}: false`,
    });
  }
}

/**
 * A `ListResult` in the interface's order from what the pages returned:
 * objects sorted by UTF-8 byte order (sorted in place), and each common
 * prefix once (services may repeat a rolled-up prefix on consecutive pages),
 * sorted likewise.
 */
export function sortedListResult(
  objects: ObjectInfo[],
  commonPrefixes: readonly string[],
): ListResult {
  objects.sort((a, b) => compareKeys(a.key, b.key));
  return { objects, commonPrefixes: [...new Set(commonPrefixes)].sort(compareKeys) };
}

/**
 * A stand-in for an SDK error that is safe to keep as `cause`: a plain
 * `Error` with the original's name and the first line of its message passed
 * through `redact` (and cut to `maxLength` characters when given). SDK errors
 * carry the request (signed URLs, authorization headers), so they are never
 * kept themselves. The adapter adds the facts it needs (status, service
 * error code) as properties.
 */
export function credentialFreeCause(
  error: unknown,
  redact: (text: string) => string,
  maxLength?: number,
): Error {
  const message = error instanceof Error ? error.message : String(error);
  const redacted = redact(message.split('\n')[0] ?? '');
  const cause = new Error(maxLength === undefined ? redacted : redacted.slice(0, maxLength));
  cause.name = error instanceof Error ? error.name : 'Error';
  return cause;
}
