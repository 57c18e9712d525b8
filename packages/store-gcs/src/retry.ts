/**
 * The adapter's own retries and abort handling.
 *
 * The SDK's automatic retries are turned off (see `gcs-store.ts` for why);
 * this module retries transient failures a bounded number of times with
 * exponential back-off, and makes a call give up promptly when its signal
 * fires even where the SDK cannot take a signal.
 */
import { jitteredBackoffMs, sleepUnlessAborted } from '@x/store/adapter';
import { isTransient } from './errors.ts';

export interface RetryPolicy {
  /** Retries after the first attempt (0 disables retrying). */
  readonly maxRetries: number;
  /** Delay before the first retry, doubled for each further one (with jitter). */
  readonly initialDelayMs: number;
  readonly maxDelayMs: number;
}

export const DEFAULT_RETRY_POLICY: RetryPolicy = {
  maxRetries: 3,
  initialDelayMs: 100,
  maxDelayMs: 2000,
};

/**
 * Settles with `promise`, or rejects with the signal's reason as soon as the
 * signal fires. The work behind `promise` is not cancelled (the SDK gives no
 * handle for that); its late result or error is dropped.
 */
export function raceAbort<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return promise;
  if (signal.aborted) {
    // The dropped promise's rejection is no longer anyone's to handle.
    promise.catch(() => {});
    return Promise.reject(signal.reason);
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => {
      promise.catch(() => {});
      reject(signal.reason);
    };
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

/**
 * Runs `attempt` (numbered from 1) until it succeeds, fails with a
 * non-transient error, the retries are spent, or the signal fires. Each
 * attempt is raced against the signal.
 */
export async function withRetries<T>(
  policy: RetryPolicy,
  signal: AbortSignal | undefined,
  attempt: (attemptNumber: number) => Promise<T>,
): Promise<T> {
  for (let attemptNumber = 1; ; attemptNumber++) {
    signal?.throwIfAborted();
    try {
      return await raceAbort(attempt(attemptNumber), signal);
    } catch (error) {
      if (signal?.aborted) throw signal.reason;
      if (attemptNumber > policy.maxRetries || !isTransient(error)) throw error;
    }
    await sleepUnlessAborted(
      jitteredBackoffMs(attemptNumber, policy.initialDelayMs, policy.maxDelayMs),
      signal,
    );
  }
}
