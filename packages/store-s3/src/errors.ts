/**
 * Maps what the S3 SDK throws onto the store's typed errors (the table is in
 * the package README), by error code and HTTP status together, since
 * S3-compatible services get one or the other wrong. A 501 names the request
 * header the service refused (S3's `<Header>`, e.g. `x-amz-checksum-crc32`).
 * The SDK's error is never kept as `cause`: some S3 error answers echo the
 * access key id and the signed string. The cause is a plain `Error` with the
 * code, status and message.
 */
import {
  AlreadyExistsError,
  ConflictError,
  NotImplementedError,
  PreconditionFailedError,
  StoreError,
} from '@x/store';

/** What a request was, for classifying its failure. */
export type S3Operation =
  | 'get'
  | 'head'
  | 'list'
  | 'put'
  | 'create'
  | 'replace'
  | 'delete'
  | 'delete-many'
  | 'conditional-delete'
  | 'upload-part'
  | 'complete-create'
  | 'complete'
  | 'abort-upload'
  | 'start-upload';

/** The facts of an SDK failure that classification needs. */
export interface S3Failure {
  /** The S3 error code (`NoSuchKey`, `PreconditionFailed`…), or the error's name for transport failures. */
  readonly code: string;
  /** HTTP status, when a response arrived. */
  readonly status: number | undefined;
  readonly requestId: string | undefined;
  /** How many attempts the SDK made (more than 1 when it retried). */
  readonly attempts: number;
  readonly message: string;
  /**
   * The request header the service named as the problem (S3's `<Header>`
   * element, on 501 `NotImplemented` and 400 `InvalidArgument`), when given.
   * A header name only: never a value.
   */
  readonly header: string | undefined;
}

/** A header name as HTTP allows it; anything else in `<Header>` is not reported. */
const HEADER_NAME = /^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}$/;

export function describeFailure(error: unknown): S3Failure {
  const record = (typeof error === 'object' && error !== null ? error : {}) as {
    name?: unknown;
    Code?: unknown;
    code?: unknown;
    message?: unknown;
    Header?: unknown;
    $metadata?: { httpStatusCode?: unknown; requestId?: unknown; attempts?: unknown };
    $response?: { statusCode?: unknown };
  };
  const metadata = record.$metadata ?? {};
  const status =
    typeof metadata.httpStatusCode === 'number'
      ? metadata.httpStatusCode
      : typeof record.$response?.statusCode === 'number'
        ? record.$response.statusCode
        : undefined;
  const code =
    typeof record.Code === 'string'
      ? record.Code
      : typeof record.name === 'string' && record.name !== 'Error'
        ? record.name
        : typeof record.code === 'string'
          ? record.code
          : 'UnknownError';
  return {
    code,
    status,
    requestId: typeof metadata.requestId === 'string' ? metadata.requestId : undefined,
    attempts: typeof metadata.attempts === 'number' ? metadata.attempts : 1,
    message: typeof record.message === 'string' ? record.message : String(error),
    header:
      typeof record.Header === 'string' && HEADER_NAME.test(record.Header)
        ? record.Header.toLowerCase()
        : undefined,
  };
}

export function isPreconditionFailure(failure: S3Failure): boolean {
  return failure.status === 412 || failure.code === 'PreconditionFailed';
}

export function isMissingKey(failure: S3Failure): boolean {
  return (
    failure.code === 'NoSuchKey' ||
    failure.code === 'NotFound' ||
    (failure.status === 404 && failure.code !== 'NoSuchBucket' && failure.code !== 'NoSuchUpload')
  );
}

export function isConditionalConflict(failure: S3Failure): boolean {
  return (
    failure.code === 'ConditionalRequestConflict' ||
    (failure.status === 409 &&
      failure.code !== 'BucketAlreadyExists' &&
      failure.code !== 'BucketAlreadyOwnedByYou' &&
      failure.code !== 'OperationAborted' &&
      failure.code !== 'InvalidBucketState')
  );
}

export function isNotImplemented(failure: S3Failure): boolean {
  return failure.status === 501 || failure.code === 'NotImplemented';
}

function safeCause(failure: S3Failure): Error {
  const cause = new Error(failure.message);
  cause.name = failure.code;
  return cause;
}

function facts(failure: S3Failure): string {
  const parts = [failure.code];
  if (failure.status !== undefined) parts.push(`status ${failure.status}`);
  if (failure.requestId) parts.push(`request id ${failure.requestId}`);
  return parts.join(', ');
}

/** The SDK's checksum headers: a service that rejects them wants `checksums: 'when-required'`. */
const CHECKSUM_HEADER = /^x-amz-(checksum-|sdk-checksum-|trailer$)/i;

/**
 * What a 501 says, for a person: the service's message (the SDK's
 * placeholder when a HEAD answer had no body), the header it named, and,
 * for one of the SDK's checksum headers, the switch that stops sending it.
 */
function notImplementedDetail(failure: S3Failure): string {
  const parts: string[] = [];
  const message = failure.message.trim();
  // A HEAD answer has no body: the SDK's message is then just the code or status.
  if (message !== '' && message !== failure.code && message !== 'UnknownError')
    parts.push(`the service said: ${JSON.stringify(message.slice(0, 500))}`);
  const header = failure.header ?? headerNamedIn(message);
  if (header) {
    parts.push(`header ${header}`);
    if (CHECKSUM_HEADER.test(header))
      parts.push(
        "the SDK's default checksum headers are not implemented by this service: set the S3Store option checksums: 'when-required'",
      );
  }
  parts.push(facts(failure));
  return parts.join('; ');
}

/** An `x-amz-…` header name quoted in a message (some services name it only there). */
function headerNamedIn(message: string): string | undefined {
  return /\b(x-amz-[a-z0-9-]+)/i.exec(message)?.[1]?.toLowerCase();
}

/** The typed error for a failed request (after any retries the adapter does). */
export function classifyS3Error(error: unknown, operation: S3Operation, key: string): StoreError {
  if (StoreError.isInstance(error)) return error;
  const failure = describeFailure(error);
  const cause = safeCause(failure);
  const conditional =
    operation === 'create' ||
    operation === 'replace' ||
    operation === 'conditional-delete' ||
    operation === 'complete-create';

  if (conditional && isPreconditionFailure(failure)) {
    if (operation === 'create' || operation === 'complete-create')
      return new AlreadyExistsError(key, { cause });
    return new PreconditionFailedError(key, { cause, detail: facts(failure) });
  }
  if ((operation === 'replace' || operation === 'conditional-delete') && isMissingKey(failure)) {
    return new PreconditionFailedError(key, { cause, detail: 'no object at the key' });
  }
  if (conditional && isConditionalConflict(failure)) return new ConflictError(key, { cause });
  if (isNotImplemented(failure)) {
    return new NotImplementedError(`s3 ${operation}`, {
      key,
      cause,
      detail: notImplementedDetail(failure),
    });
  }
  return new StoreError(
    `s3 ${operation} failed for ${key}: ${failure.message} (${facts(failure)})`,
    {
      key,
      cause,
    },
  );
}
