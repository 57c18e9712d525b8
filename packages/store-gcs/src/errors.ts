/**
 * Reads Google Cloud Storage failures and keeps credentials out of every
 * error this package throws.
 *
 * The SDK's errors carry the HTTP response and, through it, the request with
 * its `Authorization: Bearer …` header. They are never passed on as `cause`:
 * the cause is a plain `Error` with only the status, the reason and the
 * first line of the message, redacted.
 */
import { StoreError } from '@x/store';
import { credentialFreeCause } from '@x/store/adapter';

export interface GcsFailure {
  /** The HTTP status, when the service answered. */
  readonly status: number | undefined;
  /** The JSON API's reason (`conditionNotMet`, `notFound`, …) or a system error code (`ECONNRESET`). */
  readonly reason: string | undefined;
}

export function gcsFailureOf(error: unknown): GcsFailure {
  if (typeof error !== 'object' || error === null) return { status: undefined, reason: undefined };
  const record = error as {
    code?: unknown;
    status?: unknown;
    errors?: { reason?: unknown }[];
    response?: { status?: unknown };
  };
  const status =
    typeof record.code === 'number'
      ? record.code
      : typeof record.status === 'number'
        ? record.status
        : typeof record.response?.status === 'number'
          ? record.response.status
          : undefined;
  const listed = Array.isArray(record.errors) ? record.errors[0]?.reason : undefined;
  const reason =
    typeof listed === 'string' ? listed : typeof record.code === 'string' ? record.code : undefined;
  return { status, reason };
}

const TRANSIENT_STATUSES = new Set([408, 429, 500, 502, 503, 504]);
const TRANSIENT_SYSTEM_CODES = new Set([
  'ECONNRESET',
  'ECONNREFUSED',
  'ETIMEDOUT',
  'EPIPE',
  'EAI_AGAIN',
  'ENOTFOUND',
  'UND_ERR_SOCKET',
]);

/** True for failures worth retrying: 408, 429, 5xx gateways, dropped connections. */
export function isTransient(error: unknown): boolean {
  const { status, reason } = gcsFailureOf(error);
  if (status !== undefined) return TRANSIENT_STATUSES.has(status);
  if (reason !== undefined && TRANSIENT_SYSTEM_CODES.has(reason)) return true;
  const type = (error as { type?: unknown } | null)?.type;
  return type === 'system' || type === 'request-timeout';
}

const SECRET_PATTERNS: readonly RegExp[] = [
  /(Bearer)\s+[^\s"',]+/gi,
  /-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----/g,
  /("?private_key"?\s*[:=]\s*)"[^"]*"/gi,
  /\b(access_token|refresh_token|client_secret)=[^&\s"']*/gi,
];

/** Removes bearer tokens, private keys and OAuth secrets from `text`. */
export function redactSecrets(text: string): string {
  let result = text;
  for (const pattern of SECRET_PATTERNS) {
    result = result.replace(pattern, (match, lead: unknown) =>
      typeof lead === 'string' && !match.startsWith('-----') ? `${lead} [redacted]` : '[redacted]',
    );
  }
  return result;
}

/** A credential-free stand-in for an SDK error, used as `cause`. */
export function sanitizedCause(error: unknown): Error {
  const { status, reason } = gcsFailureOf(error);
  const cause = credentialFreeCause(error, redactSecrets, 500);
  Object.assign(cause, { status, reason });
  return cause;
}

/** A `StoreError` for an unexpected failure, with status and reason in the message. */
export function unexpectedFailure(
  operation: string,
  key: string | undefined,
  error: unknown,
): StoreError {
  if (StoreError.isInstance(error)) return error;
  const { status, reason } = gcsFailureOf(error);
  const cause = sanitizedCause(error);
  const what =
    status === undefined
      ? `no response${reason ? ` ${reason}` : ''}`
      : `HTTP ${status}${reason ? ` ${reason}` : ''}`;
  return new StoreError(
    `gcs ${operation}${key === undefined ? '' : ` ${key}`} failed (${what})${cause.message ? `: ${cause.message}` : ''}`,
    { key, cause },
  );
}
