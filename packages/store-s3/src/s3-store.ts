/**
 * `ObjectStore` on Amazon S3 and S3-compatible services, through
 * `@aws-sdk/client-s3` v3. Conditional writes are S3's conditional requests
 * (`If-None-Match: *`; `If-Match` with the ETag exactly as returned; on
 * `CompleteMultipartUpload` for an upload), and atomicity is the service's:
 * the adapter never checks then writes. A capability declared off is refused
 * with `NotImplementedError` instead of being sent and ignored. A conditional
 * write the SDK retried is recognised by its write id (`x-amz-meta-write-id`);
 * a conditional delete sends HEAD first (versitygw answers 204 for a missing
 * key); ETags hash the content, so `distinctVersions` is false. Why, and the
 * rest: package README. Parts: s3-options.ts, s3-requests.ts, s3-multipart.ts.
 */
import {
  DeleteObjectCommand,
  GetObjectCommand,
  type GetObjectCommandOutput,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import {
  type CallOptions,
  chunksOf,
  type DeleteManyResult,
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
  newWriteId,
  orderedListPages,
  pageSizeOf,
  type RawListPage,
  requireCapability,
} from '@x/store/adapter';
import { classifyS3Error, describeFailure, isMissingKey, type S3Operation } from './errors.ts';
import { type BatchDeleteState, deleteObjects } from './s3-delete-many.ts';
import { multipartUpload } from './s3-multipart.ts';
import {
  checkChecksums,
  checkPartSize,
  checksumConfig,
  DEFAULT_PART_SIZE,
  type S3Checksums,
  type S3StoreOptions,
  safeEndpoint,
  WRITE_ID_METADATA,
} from './s3-options.ts';
import {
  conditional,
  isDirectoryPlaceholder,
  type Mode,
  readBack,
  relativeKey,
  type S3Context,
  send,
  versionOf,
} from './s3-requests.ts';

export {
  type ConflictRetryOptions,
  DEFAULT_PART_SIZE,
  MAX_PART_SIZE,
  MAX_PARTS,
  MIN_PART_SIZE,
  type S3CapabilityOptions,
  type S3Checksums,
  type S3StaticCredentials,
  type S3StoreOptions,
  WRITE_ID_METADATA,
} from './s3-options.ts';

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
  /** What the request layer (s3-requests.ts, s3-multipart.ts) works with. */
  readonly #context: S3Context;
  readonly #batchDelete: BatchDeleteState = { refused: false };

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
    this.#context = {
      client: this.client,
      bucket: this.bucket,
      prefix: this.prefix,
      conflictAttempts: Math.max(1, options.conflictRetry?.attempts ?? 5),
      conflictBaseDelayMs: Math.max(0, options.conflictRetry?.baseDelayMs ?? 50),
      conflictMaxDelayMs: Math.max(0, options.conflictRetry?.maxDelayMs ?? 1_000),
    };
    const where = options.endpoint ? ` at ${safeEndpoint(options.endpoint)}` : '';
    this.description = `s3://${this.bucket}${this.prefix ? `/${this.prefix}` : ''}${where}`;
  }

  #fullKey(key: string): string {
    validateKey(key);
    return joinKey(this.prefix, key);
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
      const response = await send('put', key, signal, (abortSignal) =>
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
    return conditional(
      this.#context,
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

  /** `DeleteObjects`, 1,000 keys a request; single deletes where the service lacks it. */
  async deleteMany(keys: readonly string[], options: CallOptions = {}): Promise<DeleteManyResult> {
    for (const key of keys) validateKey(key);
    options.signal?.throwIfAborted();
    return deleteObjects(this.#context, this, this.#batchDelete, keys, options);
  }

  async delete(key: string, options: DeleteOptions = {}): Promise<void> {
    const fullKey = this.#fullKey(key);
    const { signal, ifMatch } = options;
    if (!ifMatch) {
      await send('delete', key, signal, (abortSignal) =>
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
    if ((await readBack(this.#context, fullKey, signal)) === null) {
      throw new PreconditionFailedError(key, { detail: 'no object at the key' });
    }
    await conditional(
      this.#context,
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
      const response = await send('list', prefix, signal, (abortSignal) =>
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
          key: relativeKey(this.#context, entry.Key),
          size: entry.Size ?? 0,
          version: versionOf(entry.ETag, entry.Key, 'list'),
        });
      }
      for (const entry of response.CommonPrefixes ?? []) {
        if (entry.Prefix !== undefined)
          commonPrefixes.push(relativeKey(this.#context, entry.Prefix));
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

    return multipartUpload(
      this.#context,
      key,
      fullKey,
      mode,
      signal,
      buffer,
      firstLength,
      fill,
      atEnd,
      chunks,
    );
  }
}
