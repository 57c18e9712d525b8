/**
 * Maps Azure Blob answers onto the closed error set of `@x/store`, and keeps
 * credentials out of every error this package throws.
 *
 * The SDK's `RestError` carries the request (URL with a SAS signature,
 * `Authorization` header with a shared-key signature). It is never passed on
 * as `cause`: the cause is a plain `Error` holding only the status, the
 * service's error code, the request id and a redacted message.
 */
import { isAbortError, StoreError } from '@x/store';
import { credentialFreeCause } from '@x/store/adapter';

/** The facts of a failed Azure call that are safe to show. */
export interface AzureFailure {
  readonly statusCode: number | undefined;
  /** The service's error code (`x-ms-error-code`), e.g. `BlobAlreadyExists`. */
  readonly errorCode: string | undefined;
}

/** Reads the status and the service error code from an SDK error (or anything else). */
export function azureFailureOf(error: unknown): AzureFailure {
  if (typeof error !== 'object' || error === null) {
    return { statusCode: undefined, errorCode: undefined };
  }
  const record = error as {
    statusCode?: unknown;
    code?: unknown;
    details?: { errorCode?: unknown };
  };
  const statusCode = typeof record.statusCode === 'number' ? record.statusCode : undefined;
  const detailCode = record.details?.errorCode;
  const errorCode =
    typeof detailCode === 'string'
      ? detailCode
      : typeof record.code === 'string'
        ? record.code
        : undefined;
  return { statusCode, errorCode };
}

const SECRET_PATTERNS: readonly RegExp[] = [
  // A SAS token's signature; without it the rest of the token grants nothing.
  /\bsig=[^&\s"';]*/gi,
  /AccountKey=[^;\s"']*/gi,
  /SharedAccessSignature=[^;\s"']*/gi,
  /\b(SharedKey|Bearer)\s+[^\s"',]+/gi,
];

/**
 * Removes anything that looks like a credential from `text`: SAS parameters,
 * `AccountKey=` and `SharedAccessSignature=` of a connection string,
 * authorization headers, and each literal secret in `secrets`.
 */
export function redactSecrets(text: string, secrets: readonly string[] = []): string {
  let result = text;
  for (const secret of secrets) {
    if (secret.length >= 8) result = result.split(secret).join('[redacted]');
  }
  for (const pattern of SECRET_PATTERNS) {
    result = result.replace(pattern, (match) => {
      const scheme = /^(SharedKey|Bearer)\s/i.exec(match);
      if (scheme) return `${scheme[1]} [redacted]`;
      return `${match.slice(0, match.indexOf('=') + 1)}[redacted]`;
    });
  }
  return result;
}

/** A credential-free stand-in for an SDK error, used as `cause`. */
export function sanitizedCause(error: unknown, secrets: readonly string[]): Error {
  const { statusCode, errorCode } = azureFailureOf(error);
  // The service's message ends with a RequestId/Time block; only its first line is kept.
  const cause = credentialFreeCause(error, (text) => redactSecrets(text, secrets));
  const requestId =
    typeof error === 'object' && error !== null
      ? (
          error as { response?: { headers?: { get?: (name: string) => string | undefined } } }
        ).response?.headers?.get?.('x-ms-request-id')
      : undefined;
  Object.assign(cause, { statusCode, errorCode, requestId });
  return cause;
}

/**
 * A `StoreError` for an unexpected failure of `operation` on `key`, with the
 * status and service error code in the message and a sanitized cause.
 */
export function unexpectedFailure(
  operation: string,
  key: string | undefined,
  error: unknown,
  secrets: readonly string[],
): StoreError {
  if (StoreError.isInstance(error)) return error;
  const { statusCode, errorCode } = azureFailureOf(error);
  const cause = sanitizedCause(error, secrets);
  const status =
    statusCode === undefined
      ? 'no response'
      : `HTTP ${statusCode}${errorCode ? ` ${errorCode}` : ''}`;
  return new StoreError(
    `azure ${operation}${key === undefined ? '' : ` ${key}`} failed (${status})${cause.message ? `: ${cause.message}` : ''}`,
    { key, cause },
  );
}

/**
 * Rethrows the caller's abort reason when the signal fired (the SDK throws
 * its own `AbortError`; the interface promises the signal's reason).
 */
export function throwAbortReason(signal: AbortSignal | undefined, error: unknown): void {
  if (signal?.aborted) throw signal.reason;
  if (isAbortError(error) && signal === undefined) throw error;
}
