/**
 * The S3 store's options and limits: part sizes, the write-id metadata name,
 * credentials, conflict back-off, the checksum setting and the capabilities
 * a service may be declared not to honour, with their checks.
 */
import type { S3Client, S3ClientConfig } from '@aws-sdk/client-s3';
import { type StoreCapabilities, StoreError } from '@x/store';

/** Smallest part S3 accepts (except the last part). */
export const MIN_PART_SIZE = 5 * 1024 * 1024;
/** Largest part S3 accepts. */
export const MAX_PART_SIZE = 5 * 1024 * 1024 * 1024;
/** Most parts in one multipart upload. */
export const MAX_PARTS = 10_000;
export const DEFAULT_PART_SIZE = 8 * 1024 * 1024;

/** The user-metadata name of the write id every conditional write carries. */
export const WRITE_ID_METADATA = 'write-id';

/** Static credentials; or pass a provider function (anything the SDK accepts). */
export interface S3StaticCredentials {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly sessionToken?: string;
}

export interface ConflictRetryOptions {
  /** Attempts in all, including the first. Default 5. */
  readonly attempts?: number;
  /** First back-off in ms, doubled each time, jittered. Default 50. */
  readonly baseDelayMs?: number;
  /** Cap on one back-off in ms. Default 1000. */
  readonly maxDelayMs?: number;
}

export interface S3StoreOptions {
  readonly bucket: string;
  /** Keys are stored under `prefix/`. Empty (default): the bucket's root. */
  readonly prefix?: string;
  /** Default: the SDK's (`AWS_REGION`…), or `us-east-1` when `endpoint` is set. */
  readonly region?: string;
  /** For S3-compatible services, e.g. `https://<account>.r2.cloudflarestorage.com`. */
  readonly endpoint?: string;
  /** Path-style URLs (`endpoint/bucket/key`); most self-hosted services need it. */
  readonly forcePathStyle?: boolean;
  /** Explicit credentials; default: the SDK's standard provider chain. */
  readonly credentials?: S3StaticCredentials | S3ClientConfig['credentials'];
  /** Use this client instead of building one (the options above except bucket and prefix are then ignored). */
  readonly client?: S3Client;
  /**
   * Declare what the service honours. Default: everything on. Declaring a
   * capability off makes the adapter refuse that mode with
   * `NotImplementedError` (e.g. `{ conditionalDelete: false }` for MinIO, which
   * ignores `If-Match` on DELETE). `distinctVersions` is always `false` for
   * S3 (content-hash ETags) and cannot be declared `true`.
   */
  readonly capabilities?: S3CapabilityOptions;
  /** Default part size for `upload`, in bytes. Default 8 MiB; at least 5 MiB, at most 5 GiB. */
  readonly partSize?: number;
  /** Back-off for 409 `ConditionalRequestConflict`. */
  readonly conflictRetry?: ConflictRetryOptions;
  /**
   * When the SDK adds checksums: `'when-supported'` (the SDK's default: a
   * CRC32 on every upload, `x-amz-checksum-mode` on every download) or
   * `'when-required'` (only where the operation requires one; none of the
   * calls this store makes do). Default: `'when-required'` when `endpoint`
   * is set — several S3-compatible services answer the SDK's default
   * checksum headers with 501 `NotImplemented` — and the SDK's own setting
   * (`AWS_REQUEST_CHECKSUM_CALCULATION`, shared config; else
   * `'when-supported'`) for AWS itself. Ignored with `client`.
   */
  readonly checksums?: S3Checksums;
}

/** When the SDK computes request checksums and validates response ones (see `S3StoreOptions.checksums`). */
export type S3Checksums = 'when-required' | 'when-supported';

/** The SDK settings for a `checksums` value. */
export function checksumConfig(
  checksums: S3Checksums,
): Pick<S3ClientConfig, 'requestChecksumCalculation' | 'responseChecksumValidation'> {
  const value = checksums === 'when-required' ? 'WHEN_REQUIRED' : 'WHEN_SUPPORTED';
  return { requestChecksumCalculation: value, responseChecksumValidation: value };
}

export function checkChecksums(checksums: unknown): S3Checksums | undefined {
  if (checksums === undefined || checksums === 'when-required' || checksums === 'when-supported')
    return checksums;
  throw new StoreError(
    `s3: checksums must be 'when-required' or 'when-supported', got ${JSON.stringify(checksums)}`,
  );
}

/** The capabilities an S3 service may or may not honour (`distinctVersions` is fixed: `false`). */
export type S3CapabilityOptions = Partial<
  Pick<StoreCapabilities, 'conditionalPut' | 'conditionalDelete' | 'multipartCreate'>
> & { readonly distinctVersions?: false };

export function checkPartSize(partSize: number): number {
  if (!Number.isSafeInteger(partSize) || partSize < MIN_PART_SIZE || partSize > MAX_PART_SIZE) {
    throw new StoreError(
      `s3 upload: partSize must be an integer from ${MIN_PART_SIZE} to ${MAX_PART_SIZE} bytes, got ${partSize}`,
    );
  }
  return partSize;
}

export function safeEndpoint(endpoint: string): string {
  try {
    const url = new URL(endpoint);
    return url.origin;
  } catch {
    return '(custom endpoint)';
  }
}
