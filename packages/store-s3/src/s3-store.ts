/**
 * `ObjectStore` on Amazon S3 and S3-compatible services, through
 * `@aws-sdk/client-s3` v3.
 *
 * Conditional writes map onto S3's conditional requests:
 * - `put(…, { mode: 'create' })` → `PutObject` with `If-None-Match: *`;
 * - `put(…, { mode: { ifMatch } })` → `PutObject` with `If-Match: <etag>`,
 *   the ETag exactly as the service returned it;
 * - `delete(…, { ifMatch })` → `HeadObject`, then `DeleteObject` with
 *   `If-Match` (see "Conditional delete of a missing key" below);
 * - `upload(…, { mode: 'create' })` → multipart upload whose
 *   `CompleteMultipartUpload` carries `If-None-Match: *`.
 * The adapter checks nothing itself: atomicity is the service's. A service
 * that ignores these headers (s3rver; MinIO's `If-Match` on DELETE) silently
 * breaks them — `probeConditionalWrites` in `@x/store-conformance` detects
 * it, and the `capabilities` option lets you declare a capability off, after
 * which the adapter refuses that mode with `NotImplementedError` instead of
 * pretending.
 *
 * Retried conditional writes. The SDK retries a request whose answer was
 * lost (timeout, reset, 5xx). If the lost attempt had been applied, the retry
 * is answered 412 (or 404 for a replace), and a naive adapter would report
 * "someone else won" for its own write. Every conditional write therefore
 * carries a random write id in its user metadata (`x-amz-meta-write-id`);
 * when a conditional write fails with a precondition answer after more than
 * one attempt, the adapter reads the object back: if it carries our write id,
 * the write is reported as the success it was. For a retried conditional
 * delete, an absent object is reported as success (the named version is gone,
 * and our own first attempt is the likely cause). If another writer replaced
 * our object between our write and the read-back, the read-back cannot see
 * ours and the failure stands: the caller re-reads, as for any lost race.
 *
 * 409 `ConditionalRequestConflict` (S3's answer when two conditional writes
 * race in flight) is retried with bounded, jittered back-off, then reported
 * as `ConflictError`.
 *
 * Conditional delete of a missing key. The interface says
 * `PreconditionFailedError`; AWS answers 404 `NoSuchKey`, but versitygw
 * answers 204 — the same answer as a successful delete, so the adapter cannot
 * tell from the DELETE alone. It therefore sends a HEAD first: no object →
 * `PreconditionFailedError`, and no DELETE is sent. Otherwise the DELETE
 * carries `If-Match` and the service decides (the adapter does not compare
 * ETags itself: that check-then-act would hide a service that ignores
 * `If-Match`). If the object vanishes between the HEAD and the DELETE, a
 * service answering 204 makes the delete a success: harmless, since the
 * object is gone either way and the caller's version was current at HEAD
 * time. Cost: one extra HEAD per conditional delete (rare in backupd: the
 * lease releases by writing a released record).
 *
 * Versions. S3 ETags are content hashes (MD5 of the body for a single PUT,
 * of the part hashes for multipart), on AWS too: a rewrite of identical bytes
 * keeps its ETag, and `If-Match` compares ETags only. The adapter therefore
 * declares `distinctVersions: false`; callers that rely on replace-if-version
 * make each write's bytes unique (the lease's record carries a nonce).
 *
 * Listings. A directory placeholder — a key ending in `/` with zero bytes,
 * as the AWS console, some tools and some S3-compatible services create — is
 * left out of `list` (it is no key of this store: keys never end in `/`),
 * whether or not the service gives it an ETag. Any other entry without an
 * ETag fails the whole listing with a `StoreError` naming its key: an object
 * without a version would break every conditional write made from it.
 */
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  type GetObjectCommandOutput,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  type S3ClientConfig,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import {
  type CallOptions,
  ConflictError,
  chunksOf,
  type DeleteOptions,
  type GetResult,
  type GetStreamResult,
  joinKey,
  type ListOptions,
  type ListPage,
  type ListPagesOptions,
  type ListResult,
  normalizePrefix,
  type ObjectInfo,
  type ObjectStore,
  type ObjectVersion,
  PreconditionFailedError,
  type PutOptions,
  type StoreCapabilities,
  StoreError,
  type UploadOptions,
  type UploadSource,
  validateKey,
} from '@x/store';
import {
  abortReasonOr,
  collectListPages,
  jitteredBackoffMs,
  newWriteId,
  orderedListPages,
  pageSizeOf,
  type RawListPage,
  requireCapability,
  sleepUnlessAborted,
} from '@x/store/adapter';
import {
  classifyS3Error,
  describeFailure,
  isConditionalConflict,
  isMissingKey,
  isPreconditionFailure,
  type S3Operation,
} from './errors.ts';

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
function checksumConfig(
  checksums: S3Checksums,
): Pick<S3ClientConfig, 'requestChecksumCalculation' | 'responseChecksumValidation'> {
  const value = checksums === 'when-required' ? 'WHEN_REQUIRED' : 'WHEN_SUPPORTED';
  return { requestChecksumCalculation: value, responseChecksumValidation: value };
}

function checkChecksums(checksums: unknown): S3Checksums | undefined {
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

type Mode = 'overwrite' | 'create' | { readonly ifMatch: ObjectVersion };

/**
 * A listing entry that is a directory placeholder: a key ending in `/` with
 * exactly zero bytes. Skipped by `list`, with or without an ETag.
 */
function isDirectoryPlaceholder(entry: { Key?: string; Size?: number }): boolean {
  return entry.Key?.endsWith('/') === true && entry.Size === 0;
}

function versionOf(etag: string | undefined, key: string, operation: string): ObjectVersion {
  if (etag === undefined || etag === '') {
    throw new StoreError(`s3 ${operation} for ${key}: the service returned no ETag`, { key });
  }
  return { etag };
}

function checkPartSize(partSize: number): number {
  if (!Number.isSafeInteger(partSize) || partSize < MIN_PART_SIZE || partSize > MAX_PART_SIZE) {
    throw new StoreError(
      `s3 upload: partSize must be an integer from ${MIN_PART_SIZE} to ${MAX_PART_SIZE} bytes, got ${partSize}`,
    );
  }
  return partSize;
}

function safeEndpoint(endpoint: string): string {
  try {
    const url = new URL(endpoint);
    return url.origin;
  } catch {
    return '(custom endpoint)';
  }
}

export class S3Store implements ObjectStore {
  readonly description: string;
  readonly capabilities: StoreCapabilities;
  readonly bucket: string;
  /** Normalised, without a trailing `/` (empty for the bucket's root). */
  readonly prefix: string;
  readonly client: S3Client;
  /**
   * The checksum setting the client was built with; `undefined` when the SDK
   * decides (AWS without the option: its environment and shared config) or a
   * `client` was given.
   */
  readonly checksums: S3Checksums | undefined;

  readonly #partSize: number;
  readonly #conflictAttempts: number;
  readonly #conflictBaseDelayMs: number;
  readonly #conflictMaxDelayMs: number;

  constructor(options: S3StoreOptions) {
    if (!options.bucket) throw new StoreError('s3: the bucket option is required');
    this.bucket = options.bucket;
    this.prefix = normalizePrefix(options.prefix ?? '');
    if ((options.capabilities?.distinctVersions as boolean | undefined) === true) {
      throw new StoreError(
        's3: distinctVersions cannot be declared true: S3 ETags are content hashes, so a rewrite of identical bytes keeps its version',
      );
    }
    this.capabilities = {
      conditionalPut: options.capabilities?.conditionalPut ?? true,
      conditionalDelete: options.capabilities?.conditionalDelete ?? true,
      multipartCreate: options.capabilities?.multipartCreate ?? true,
      distinctVersions: false,
    };
    this.#partSize = checkPartSize(options.partSize ?? DEFAULT_PART_SIZE);
    this.#conflictAttempts = Math.max(1, options.conflictRetry?.attempts ?? 5);
    this.#conflictBaseDelayMs = Math.max(0, options.conflictRetry?.baseDelayMs ?? 50);
    this.#conflictMaxDelayMs = Math.max(0, options.conflictRetry?.maxDelayMs ?? 1_000);
    const checksums = options.client
      ? undefined
      : (checkChecksums(options.checksums) ?? (options.endpoint ? 'when-required' : undefined));
    this.checksums = checksums;
    this.client =
      options.client ??
      new S3Client({
        region: options.region ?? (options.endpoint ? 'us-east-1' : undefined),
        ...(options.endpoint ? { endpoint: options.endpoint } : {}),
        ...(options.forcePathStyle !== undefined ? { forcePathStyle: options.forcePathStyle } : {}),
        ...(options.credentials ? { credentials: options.credentials } : {}),
        ...(checksums ? checksumConfig(checksums) : {}),
      });
    const where = options.endpoint ? ` at ${safeEndpoint(options.endpoint)}` : '';
    this.description = `s3://${this.bucket}${this.prefix ? `/${this.prefix}` : ''}${where}`;
  }

  #fullKey(key: string): string {
    validateKey(key);
    return joinKey(this.prefix, key);
  }

  #relativeKey(fullKey: string): string {
    return this.prefix === '' ? fullKey : fullKey.slice(this.prefix.length + 1);
  }

  /**
   * Sends one request with the caller's signal; an aborted call rejects with
   * the signal's reason, anything else with the typed error.
   */
  async #send<Output>(
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

  async get(key: string, options: CallOptions = {}): Promise<GetResult | null> {
    const fullKey = this.#fullKey(key);
    const { signal } = options;
    signal?.throwIfAborted();
    try {
      const response = await this.client.send(
        new GetObjectCommand({ Bucket: this.bucket, Key: fullKey }),
        { abortSignal: signal },
      );
      const body = response.Body ? await response.Body.transformToByteArray() : new Uint8Array();
      return {
        key,
        body,
        size: body.byteLength,
        version: versionOf(response.ETag, key, 'get'),
      };
    } catch (error) {
      if (signal?.aborted) throw signal.reason;
      if (isMissingKey(describeFailure(error))) return null;
      throw classifyS3Error(error, 'get', key);
    }
  }

  async getStream(key: string, options: CallOptions = {}): Promise<GetStreamResult | null> {
    const fullKey = this.#fullKey(key);
    const { signal } = options;
    signal?.throwIfAborted();
    let response: GetObjectCommandOutput;
    try {
      response = await this.client.send(
        new GetObjectCommand({ Bucket: this.bucket, Key: fullKey }),
        { abortSignal: signal },
      );
    } catch (error) {
      if (signal?.aborted) throw signal.reason;
      if (isMissingKey(describeFailure(error))) return null;
      throw classifyS3Error(error, 'get', key);
    }
    const source = response.Body as
      | (AsyncIterable<Uint8Array> & { destroy?: (error?: Error) => void })
      | undefined;
    async function* body(): AsyncIterable<Uint8Array> {
      if (!source) return;
      const onAbort = () => source.destroy?.();
      signal?.addEventListener('abort', onAbort, { once: true });
      try {
        for await (const chunk of source) {
          signal?.throwIfAborted();
          yield chunk;
        }
        signal?.throwIfAborted();
      } catch (error) {
        if (signal?.aborted) throw signal.reason;
        throw classifyS3Error(error, 'get', key);
      } finally {
        signal?.removeEventListener('abort', onAbort);
        // Stop the download when the consumer stops early.
        source.destroy?.();
      }
    }
    return {
      key,
      size: response.ContentLength ?? 0,
      version: versionOf(response.ETag, key, 'get'),
      body: body(),
    };
  }

  async head(key: string, options: CallOptions = {}): Promise<ObjectInfo | null> {
    const fullKey = this.#fullKey(key);
    const { signal } = options;
    signal?.throwIfAborted();
    try {
      const response = await this.client.send(
        new HeadObjectCommand({ Bucket: this.bucket, Key: fullKey }),
        { abortSignal: signal },
      );
      return {
        key,
        size: response.ContentLength ?? 0,
        version: versionOf(response.ETag, key, 'head'),
      };
    } catch (error) {
      if (signal?.aborted) throw signal.reason;
      if (isMissingKey(describeFailure(error))) return null;
      throw classifyS3Error(error, 'head', key);
    }
  }

  /** HEAD returning the write id too, for recognising our own retried write. */
  async #readBack(
    fullKey: string,
    signal: AbortSignal | undefined,
  ): Promise<{ version: ObjectVersion; writeId: string | undefined } | null> {
    try {
      const response = await this.client.send(
        new HeadObjectCommand({ Bucket: this.bucket, Key: fullKey }),
        { abortSignal: signal },
      );
      return {
        version: versionOf(response.ETag, fullKey, 'head'),
        writeId: response.Metadata?.[WRITE_ID_METADATA],
      };
    } catch (error) {
      if (signal?.aborted) throw signal.reason;
      if (isMissingKey(describeFailure(error))) return null;
      throw classifyS3Error(error, 'head', this.#relativeKey(fullKey));
    }
  }

  /**
   * Runs a conditional write: retries 409 conflicts with back-off, and
   * resolves a precondition failure after SDK retries by reading back.
   * `ours` says whether the read-back object is the one this call wrote.
   */
  async #conditional<Output>(
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
          (isPreconditionFailure(failure) ||
            isMissingKey(failure) ||
            failure.code === 'NoSuchUpload')
        ) {
          // An earlier attempt of this very request may have been applied.
          const recovered = recover(await this.#readBack(fullKey, signal));
          if (recovered !== undefined) return recovered;
        }
        if (isConditionalConflict(failure) && !isPreconditionFailure(failure)) {
          sawConflict = true;
          if (conflicts < this.#conflictAttempts) {
            await sleepUnlessAborted(
              jitteredBackoffMs(conflicts, this.#conflictBaseDelayMs, this.#conflictMaxDelayMs),
              signal,
            );
            continue;
          }
        }
        throw classifyS3Error(error, operation, key);
      }
    }
  }

  async put(
    key: string,
    body: Uint8Array,
    options: PutOptions = {},
  ): Promise<{ version: ObjectVersion }> {
    const fullKey = this.#fullKey(key);
    const mode: Mode = options.mode ?? 'overwrite';
    if (mode !== 'overwrite')
      requireCapability(
        this,
        'conditionalPut',
        mode === 'create' ? 'put create' : 'put ifMatch',
        key,
      );
    return this.#putObject(key, fullKey, body, mode, options.signal);
  }

  /** One PutObject, with the mode's condition; capabilities are checked by the caller. */
  async #putObject(
    key: string,
    fullKey: string,
    body: Uint8Array,
    mode: Mode,
    signal: AbortSignal | undefined,
  ): Promise<{ version: ObjectVersion }> {
    if (mode === 'overwrite') {
      const response = await this.#send('put', key, signal, (abortSignal) =>
        this.client.send(new PutObjectCommand({ Bucket: this.bucket, Key: fullKey, Body: body }), {
          abortSignal,
        }),
      );
      return { version: versionOf(response.ETag, key, 'put') };
    }
    const writeId = newWriteId();
    const condition =
      mode === 'create' ? { IfNoneMatch: '*' } : { IfMatch: this.#etagOf(mode.ifMatch, key) };
    const operation: S3Operation = mode === 'create' ? 'create' : 'replace';
    return this.#conditional(
      operation,
      key,
      fullKey,
      signal,
      async () => {
        const response = await this.client.send(
          new PutObjectCommand({
            Bucket: this.bucket,
            Key: fullKey,
            Body: body,
            Metadata: { [WRITE_ID_METADATA]: writeId },
            ...condition,
          }),
          { abortSignal: signal },
        );
        return { version: versionOf(response.ETag, key, operation) };
      },
      (readBack) => (readBack?.writeId === writeId ? { version: readBack.version } : undefined),
    );
  }

  #etagOf(version: ObjectVersion, key: string): string {
    if (version.etag === undefined) {
      throw new StoreError(`s3: ifMatch for ${key} needs a version with an etag (got none)`, {
        key,
      });
    }
    return version.etag;
  }

  async delete(key: string, options: DeleteOptions = {}): Promise<void> {
    const fullKey = this.#fullKey(key);
    const { signal, ifMatch } = options;
    if (!ifMatch) {
      await this.#send('delete', key, signal, (abortSignal) =>
        this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: fullKey }), {
          abortSignal,
        }),
      );
      return;
    }
    requireCapability(this, 'conditionalDelete', 'delete ifMatch', key);
    const etag = this.#etagOf(ifMatch, key);
    // Some services answer 204 to a conditional DELETE of a missing key (see
    // the header): look first. Only existence is checked here; the version is
    // left to the service's If-Match.
    if ((await this.#readBack(fullKey, signal)) === null) {
      throw new PreconditionFailedError(key, { detail: 'no object at the key' });
    }
    await this.#conditional(
      'conditional-delete',
      key,
      fullKey,
      signal,
      async () => {
        await this.client.send(
          new DeleteObjectCommand({ Bucket: this.bucket, Key: fullKey, IfMatch: etag }),
          { abortSignal: signal },
        );
        return true;
      },
      // After a retry, an absent object means the named version is gone (most likely by our first attempt).
      (readBack) => (readBack === null ? true : undefined),
    );
  }

  async list(prefix: string, options: ListOptions = {}): Promise<ListResult> {
    return collectListPages(this.listPages(prefix, options));
  }

  /**
   * One ListObjectsV2 request per page, following continuation tokens;
   * `pageSize` is sent as `MaxKeys` (S3 returns at most 1 000 whatever is asked).
   */
  listPages(prefix: string, options: ListPagesOptions = {}): AsyncIterable<ListPage> {
    return orderedListPages(this.#rawListPages(prefix, options), options.pageSize);
  }

  async *#rawListPages(prefix: string, options: ListPagesOptions): AsyncIterable<RawListPage> {
    const { signal, delimiter } = options;
    const maxKeys = options.pageSize === undefined ? undefined : pageSizeOf(options, 1000);
    const fullPrefix = this.prefix === '' ? prefix : `${this.prefix}/${prefix}`;
    let continuationToken: string | undefined;
    do {
      const token = continuationToken;
      const response = await this.#send('list', prefix, signal, (abortSignal) =>
        this.client.send(
          new ListObjectsV2Command({
            Bucket: this.bucket,
            Prefix: fullPrefix,
            ...(delimiter ? { Delimiter: delimiter } : {}),
            ...(maxKeys === undefined ? {} : { MaxKeys: maxKeys }),
            ...(token ? { ContinuationToken: token } : {}),
          }),
          { abortSignal },
        ),
      );
      const objects: ObjectInfo[] = [];
      const commonPrefixes: string[] = [];
      for (const entry of response.Contents ?? []) {
        if (entry.Key === undefined) continue;
        // A directory placeholder (`dir/`, zero bytes), as consoles, tools
        // and some S3-compatible services create: no object of this store's
        // key space (a key never ends in `/`), and some services list it
        // without an ETag. Any other entry without one fails the listing:
        // an object without a version cannot be compared or replaced safely.
        if (isDirectoryPlaceholder(entry)) continue;
        if (entry.ETag === undefined || entry.ETag === '') {
          throw new StoreError(
            `s3 list of ${JSON.stringify(prefix)}: the service returned no ETag for ${JSON.stringify(entry.Key)} (${entry.Size ?? 'unknown'} bytes), so the object has no version; the listing is refused rather than given without it`,
            { key: entry.Key },
          );
        }
        objects.push({
          key: this.#relativeKey(entry.Key),
          size: entry.Size ?? 0,
          version: versionOf(entry.ETag, entry.Key, 'list'),
        });
      }
      for (const entry of response.CommonPrefixes ?? []) {
        if (entry.Prefix !== undefined) commonPrefixes.push(this.#relativeKey(entry.Prefix));
      }
      continuationToken = response.IsTruncated ? response.NextContinuationToken : undefined;
      if (response.IsTruncated && !continuationToken) {
        throw new StoreError(
          `s3 list of ${prefix}: the service said the listing is truncated but gave no continuation token`,
        );
      }
      // Some S3-compatible services repeat a common prefix on consecutive pages: orderedListPages drops it.
      yield { objects, commonPrefixes };
    } while (continuationToken);
  }

  async upload(
    key: string,
    source: UploadSource,
    options: UploadOptions = {},
  ): Promise<{ version: ObjectVersion; size: number }> {
    const fullKey = this.#fullKey(key);
    const mode = options.mode ?? 'overwrite';
    if (mode === 'create') requireCapability(this, 'multipartCreate', 'upload create', key);
    const partSize = checkPartSize(options.partSize ?? this.#partSize);
    const { signal } = options;
    signal?.throwIfAborted();

    // Fill the first part; a source that fits in it goes up as one PutObject (one request, not three).
    const buffer = Buffer.allocUnsafe(partSize);
    const chunks = chunksOf(source)[Symbol.asyncIterator]();
    let pending: Uint8Array | undefined;
    let sourceDone = false;
    const fill = async (): Promise<number> => {
      let filled = 0;
      while (filled < partSize) {
        if (!pending || pending.byteLength === 0) {
          if (sourceDone) break;
          const next = await chunks.next();
          signal?.throwIfAborted();
          if (next.done) {
            sourceDone = true;
            break;
          }
          pending = next.value;
          continue;
        }
        const take = Math.min(pending.byteLength, partSize - filled);
        buffer.set(pending.subarray(0, take), filled);
        filled += take;
        pending = pending.subarray(take);
      }
      return filled;
    };
    const atEnd = async (): Promise<boolean> => {
      if (pending && pending.byteLength > 0) return false;
      if (sourceDone) return true;
      const next = await chunks.next();
      if (next.done) {
        sourceDone = true;
        return true;
      }
      pending = next.value;
      return pending.byteLength === 0 ? atEnd() : false;
    };

    let firstLength: number;
    try {
      firstLength = await fill();
      if (await atEnd()) {
        const body = buffer.subarray(0, firstLength);
        const { version } = await this.#putObject(key, fullKey, body, mode, signal);
        return { version, size: firstLength };
      }
    } catch (error) {
      await chunks.return?.();
      throw abortReasonOr(signal, error);
    }

    return this.#multipart(key, fullKey, mode, signal, buffer, firstLength, fill, atEnd, chunks);
  }

  async #multipart(
    key: string,
    fullKey: string,
    mode: 'create' | 'overwrite',
    signal: AbortSignal | undefined,
    buffer: Buffer,
    firstLength: number,
    fill: () => Promise<number>,
    atEnd: () => Promise<boolean>,
    chunks: AsyncIterator<Uint8Array>,
  ): Promise<{ version: ObjectVersion; size: number }> {
    const writeId = newWriteId();
    const started = await this.#send('start-upload', key, signal, (abortSignal) =>
      this.client.send(
        new CreateMultipartUploadCommand({
          Bucket: this.bucket,
          Key: fullKey,
          ...(mode === 'create' ? { Metadata: { [WRITE_ID_METADATA]: writeId } } : {}),
        }),
        { abortSignal },
      ),
    );
    const uploadId = started.UploadId;
    if (!uploadId) {
      throw new StoreError(`s3 upload of ${key}: the service returned no upload id`, { key });
    }
    const parts: { PartNumber: number; ETag: string }[] = [];
    let size = 0;
    let completed = false;
    try {
      let length = firstLength;
      for (let partNumber = 1; ; partNumber += 1) {
        if (partNumber > MAX_PARTS) {
          throw new StoreError(
            `s3 upload of ${key}: more than ${MAX_PARTS} parts; use a larger partSize`,
            { key },
          );
        }
        const body = buffer.subarray(0, length);
        const response = await this.#send('upload-part', key, signal, (abortSignal) =>
          this.client.send(
            new UploadPartCommand({
              Bucket: this.bucket,
              Key: fullKey,
              UploadId: uploadId,
              PartNumber: partNumber,
              Body: body,
            }),
            { abortSignal },
          ),
        );
        parts.push({
          PartNumber: partNumber,
          ETag: versionOf(response.ETag, key, 'upload-part').etag!,
        });
        size += length;
        if (await atEnd()) break;
        length = await fill();
      }

      const complete = () =>
        this.client.send(
          new CompleteMultipartUploadCommand({
            Bucket: this.bucket,
            Key: fullKey,
            UploadId: uploadId,
            MultipartUpload: { Parts: parts },
            ...(mode === 'create' ? { IfNoneMatch: '*' } : {}),
          }),
          { abortSignal: signal },
        );
      let version: ObjectVersion;
      if (mode === 'create') {
        version = await this.#conditional(
          'complete-create',
          key,
          fullKey,
          signal,
          async () => versionOf((await complete()).ETag, key, 'complete'),
          (readBack) => (readBack?.writeId === writeId ? readBack.version : undefined),
        );
      } else {
        const response = await this.#send('complete', key, signal, () => complete());
        version = versionOf(response.ETag, key, 'complete');
      }
      completed = true;
      return { version, size };
    } catch (error) {
      throw abortReasonOr(signal, error);
    } finally {
      if (!completed) {
        await chunks.return?.();
        await this.#abortUpload(fullKey, uploadId);
      }
    }
  }

  /**
   * Aborts a multipart upload so its parts stop costing storage. Runs with its
   * own timeout, not the caller's (possibly fired) signal. Best effort: a
   * failure here is not reported over the error that caused it, and the
   * bucket's lifecycle rule for incomplete uploads is the backstop.
   */
  async #abortUpload(fullKey: string, uploadId: string): Promise<void> {
    try {
      await this.client.send(
        new AbortMultipartUploadCommand({ Bucket: this.bucket, Key: fullKey, UploadId: uploadId }),
        { abortSignal: AbortSignal.timeout(30_000) },
      );
    } catch {
      // Best effort (see above); the original failure is what the caller needs.
    }
  }
}
