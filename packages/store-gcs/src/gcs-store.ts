/**
 * `ObjectStore` on Google Cloud Storage, via `@google-cloud/storage`. Versions
 * are object generations; `create` sends `ifGenerationMatch=0`, `{ ifMatch }`
 * and conditional `delete` `ifGenerationMatch=<generation>`, checked by the
 * service. A capability declared off (an emulator ignoring it) is refused with
 * `NotImplementedError`. The SDK's retries are off: it retries preconditioned
 * writes (a create that landed comes back 412) and flips a client-wide retry
 * switch as a side effect of single calls. The adapter retries transient
 * failures itself and recognises its own refused write by the write id in the
 * object's metadata. The SDK takes no signal: an aborted `head`, `delete` or
 * `list` rejects at once, but may still reach the service. More: package README.
 */
import {
  type File,
  type FileMetadata,
  type PreconditionOptions,
  Storage,
  type StorageOptions,
} from '@google-cloud/storage';
import {
  type CallOptions,
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
  type PutMode,
  type PutOptions,
  type StoreCapabilities,
  StoreError,
  throwIfAborted,
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
  refusedWriteError,
  requireCapability,
} from '@x/store/adapter';
import { gcsFailureOf, unexpectedFailure } from './errors.ts';
import {
  DEFAULT_CHUNK_SIZE,
  RESUMABLE_CHUNK_GRANULARITY,
  resumableUpload,
} from './resumable-upload.ts';
import { DEFAULT_RETRY_POLICY, type RetryPolicy, withRetries } from './retry.ts';

/** The custom-metadata name under which each write records its random write id. */
export const WRITE_ID_METADATA = 'x-store-write-id';

/** The most objects GCS returns in one page of a listing. */
const MAX_LIST_PAGE_SIZE = 1000;

export interface GcsStoreOptions {
  /** The bucket; it must exist. */
  readonly bucket: string;
  /** Optional key prefix: every key is stored as `prefix/key`, and listed without it. */
  readonly prefix?: string;
  /** The project; needed by emulators, taken from the credentials otherwise. */
  readonly projectId?: string;
  /**
   * Another endpoint than `https://storage.googleapis.com`, e.g. an emulator
   * (`http://127.0.0.1:4443`). With a custom endpoint and neither `keyFilename`
   * nor `credentials`, requests are sent without authentication.
   */
  readonly apiEndpoint?: string;
  /** Path of a service-account key file. Default: the standard credential chain (ADC). */
  readonly keyFilename?: string;
  /** Service-account or external-account credentials as an object. Default: the standard chain. */
  readonly credentials?: StorageOptions['credentials'];
  /** Objects per list request (default 1000, the service's maximum). */
  readonly listPageSize?: number;
  /** Retries after a transient failure (default 3; 0 disables). */
  readonly maxRetries?: number;
  /** Generates the write id recorded with every write; default `crypto.randomUUID`. For tests. */
  readonly newWriteId?: () => string;
  /**
   * Declare what the service honours. Default: everything on (Google Cloud
   * Storage honours every precondition). Declaring a capability off makes the
   * adapter refuse that mode with `NotImplementedError`, e.g.
   * `{ conditionalDelete: false }` for fake-gcs-server v1.56.1, which ignores
   * `ifGenerationMatch` on DELETE. `distinctVersions` is always `true`
   * (generations) and cannot be declared.
   */
  readonly capabilities?: GcsCapabilityOptions;
}

/** The preconditions a GCS endpoint may or may not honour. */
export type GcsCapabilityOptions = Partial<
  Pick<StoreCapabilities, 'conditionalPut' | 'conditionalDelete' | 'multipartCreate'>
>;

function generationVersion(
  metadata: FileMetadata | undefined,
  operation: string,
  key: string,
): ObjectVersion {
  const generation = metadata?.generation;
  if (generation === undefined || generation === null || generation === '') {
    throw new StoreError(`gcs ${operation} ${key}: the service returned no generation`, { key });
  }
  return { generation: String(generation) };
}

function sizeOf(metadata: FileMetadata | undefined): number {
  const size = Number(metadata?.size ?? 0);
  return Number.isFinite(size) ? size : 0;
}

function matchGeneration(version: ObjectVersion, key: string): string {
  const generation = version.generation;
  if (generation === undefined || !/^[0-9]+$/.test(generation) || generation === '0') {
    // A version without a generation comes from another kind of store; it cannot match an object.
    throw new PreconditionFailedError(key, { detail: 'the version has no object generation' });
  }
  return generation;
}

function preconditionFor(mode: PutMode, key: string): PreconditionOptions | undefined {
  if (mode === 'overwrite') return undefined;
  if (mode === 'create') return { ifGenerationMatch: 0 };
  return { ifGenerationMatch: matchGeneration(mode.ifMatch, key) };
}

export class GcsStore implements ObjectStore {
  readonly description: string;
  readonly capabilities: StoreCapabilities;
  /** The SDK client (automatic retries off), for operations this interface does not cover. */
  readonly storage: Storage;
  readonly bucketName: string;
  readonly prefix: string;

  readonly #retry: RetryPolicy;
  readonly #newWriteId: () => string;
  readonly #listPageSize: number;

  constructor(options: GcsStoreOptions) {
    const hasCredentials = options.keyFilename !== undefined || options.credentials !== undefined;
    this.storage = new Storage({
      ...(options.projectId === undefined ? {} : { projectId: options.projectId }),
      ...(options.apiEndpoint === undefined ? {} : { apiEndpoint: options.apiEndpoint }),
      ...(options.keyFilename === undefined ? {} : { keyFilename: options.keyFilename }),
      ...(options.credentials === undefined ? {} : { credentials: options.credentials }),
      // Explicit credentials for a custom endpoint (e.g. a private endpoint) are meant to be used.
      ...(options.apiEndpoint !== undefined && hasCredentials
        ? { useAuthWithCustomEndpoint: true }
        : {}),
      retryOptions: { autoRetry: false, maxRetries: 0 },
    });
    const maxRetries = options.maxRetries ?? DEFAULT_RETRY_POLICY.maxRetries;
    if (!Number.isInteger(maxRetries) || maxRetries < 0) {
      throw new StoreError(`gcs: maxRetries must be a non-negative integer, got ${maxRetries}`);
    }
    this.#retry = { ...DEFAULT_RETRY_POLICY, maxRetries };
    this.#newWriteId = options.newWriteId ?? newWriteId;
    this.#listPageSize = options.listPageSize ?? 1000;
    if (
      !Number.isInteger(this.#listPageSize) ||
      this.#listPageSize < 1 ||
      this.#listPageSize > 1000
    ) {
      throw new StoreError(
        `gcs: listPageSize must be an integer from 1 to 1000, got ${this.#listPageSize}`,
      );
    }
    this.bucketName = options.bucket;
    this.prefix = normalizePrefix(options.prefix ?? '');
    this.description = `gs://${options.bucket}${this.prefix ? `/${this.prefix}` : ''}`;
    this.capabilities = {
      conditionalPut: options.capabilities?.conditionalPut ?? true,
      conditionalDelete: options.capabilities?.conditionalDelete ?? true,
      multipartCreate: options.capabilities?.multipartCreate ?? true,
      distinctVersions: true,
    };
  }

  #objectName(key: string): string {
    validateKey(key);
    return joinKey(this.prefix, key);
  }

  #file(key: string): File {
    // A fresh File per call: the SDK keeps per-call state (metadata) on it.
    return this.storage.bucket(this.bucketName).file(this.#objectName(key));
  }

  #fail(operation: string, key: string | undefined, error: unknown, signal?: AbortSignal): never {
    if (signal?.aborted) throw signal.reason;
    throw unexpectedFailure(operation, key, error);
  }

  async get(key: string, options: CallOptions = {}): Promise<GetResult | null> {
    this.#objectName(key);
    throwIfAborted(options.signal);
    try {
      return await withRetries(this.#retry, options.signal, async () => {
        const opened = await this.#open(key, options.signal);
        if (!opened) return null;
        const parts: Uint8Array[] = [];
        let size = 0;
        for await (const chunk of opened.body) {
          parts.push(chunk);
          size += chunk.byteLength;
        }
        const joined = Buffer.concat(parts, size);
        return {
          key,
          size,
          version: opened.version,
          body: new Uint8Array(joined.buffer, joined.byteOffset, joined.byteLength),
        };
      });
    } catch (error) {
      this.#fail('get', key, error, options.signal);
    }
  }

  async getStream(key: string, options: CallOptions = {}): Promise<GetStreamResult | null> {
    this.#objectName(key);
    throwIfAborted(options.signal);
    let opened: { version: ObjectVersion; size: number; body: AsyncIterable<Uint8Array> } | null;
    try {
      opened = await this.#open(key, options.signal);
    } catch (error) {
      this.#fail('get', key, error, options.signal);
    }
    if (!opened) return null;
    const fail = (error: unknown): never =>
      this.#fail('get (reading the body)', key, error, options.signal);
    const raw = opened.body;
    async function* body(): AsyncIterable<Uint8Array> {
      try {
        yield* raw;
      } catch (error) {
        fail(error);
      }
    }
    return { key, size: opened.size, version: opened.version, body: body() };
  }

  /**
   * Opens a read stream and waits for the response headers, which carry the
   * generation and size of exactly the bytes that follow.
   * @returns null when the object does not exist.
   */
  async #open(
    key: string,
    signal: AbortSignal | undefined,
  ): Promise<{ version: ObjectVersion; size: number; body: AsyncIterable<Uint8Array> } | null> {
    const stream = this.#file(key).createReadStream({ validation: 'crc32c' });
    const onAbort = (): void => {
      stream.destroy(signal?.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    const headers = await new Promise<Record<string, string | string[] | undefined> | null>(
      (resolve, reject) => {
        stream.on('response', (response: { statusCode?: unknown; headers?: unknown }) => {
          // An error answer is followed by an 'error' event carrying the status.
          const status = typeof response.statusCode === 'number' ? response.statusCode : 200;
          if (status >= 200 && status < 300) resolve(normalizeHeaders(response.headers));
        });
        stream.once('error', (error: unknown) => {
          if (!signal?.aborted && gcsFailureOf(error).status === 404) resolve(null);
          else reject(abortReasonOr(signal, error));
        });
        // The SDK sends the request only once the stream is read from.
        stream.read(0);
      },
    ).catch((error: unknown) => {
      signal?.removeEventListener('abort', onAbort);
      stream.destroy();
      throw error;
    });
    if (headers === null) {
      signal?.removeEventListener('abort', onAbort);
      stream.destroy();
      return null;
    }
    const generation = headerValue(headers, 'x-goog-generation');
    if (generation === undefined) {
      stream.destroy();
      signal?.removeEventListener('abort', onAbort);
      throw new StoreError(`gcs get ${key}: the response carried no x-goog-generation header`, {
        key,
      });
    }
    const size = Number(
      headerValue(headers, 'x-goog-stored-content-length') ??
        headerValue(headers, 'content-length') ??
        0,
    );
    async function* body(): AsyncIterable<Uint8Array> {
      try {
        for await (const chunk of stream) {
          if (signal?.aborted) throw signal.reason;
          yield chunk as Uint8Array;
        }
        if (signal?.aborted) throw signal.reason;
      } finally {
        signal?.removeEventListener('abort', onAbort);
        stream.destroy();
      }
    }
    return { version: { generation }, size, body: body() };
  }

  async head(key: string, options: CallOptions = {}): Promise<ObjectInfo | null> {
    this.#objectName(key);
    throwIfAborted(options.signal);
    try {
      return await withRetries(this.#retry, options.signal, async () => {
        try {
          const [metadata] = await this.#file(key).getMetadata();
          return { key, size: sizeOf(metadata), version: generationVersion(metadata, 'head', key) };
        } catch (error) {
          if (gcsFailureOf(error).status === 404) return null;
          throw error;
        }
      });
    } catch (error) {
      this.#fail('head', key, error, options.signal);
    }
  }

  async put(
    key: string,
    body: Uint8Array,
    options: PutOptions = {},
  ): Promise<{ version: ObjectVersion }> {
    this.#objectName(key);
    const mode = options.mode ?? 'overwrite';
    if (mode !== 'overwrite')
      requireCapability(
        this,
        'conditionalPut',
        mode === 'create' ? 'put create' : 'put ifMatch',
        key,
      );
    const precondition = preconditionFor(mode, key);
    const signal = options.signal;
    throwIfAborted(signal);
    const writeId = this.#newWriteId();
    try {
      const metadata = await withRetries(this.#retry, signal, () =>
        this.#writeOnce(key, body, precondition, writeId, signal),
      );
      return { version: generationVersion(metadata, 'put', key) };
    } catch (error) {
      const { version } = await this.#refused('put', key, mode, writeId, error, signal);
      return { version };
    }
  }

  /** One simple (multipart) upload request; the SDK does not retry these. */
  #writeOnce(
    key: string,
    body: Uint8Array,
    precondition: PreconditionOptions | undefined,
    writeId: string,
    signal: AbortSignal | undefined,
  ): Promise<FileMetadata> {
    const file = this.#file(key);
    const stream = file.createWriteStream({
      resumable: false,
      // The SDK's check deletes the object on a mismatch, unconditionally; integrity is checked by readers.
      validation: false,
      contentType: 'application/octet-stream',
      metadata: { metadata: { [WRITE_ID_METADATA]: writeId } },
      ...(precondition === undefined ? {} : { preconditionOpts: precondition }),
    });
    return new Promise<FileMetadata>((resolve, reject) => {
      const onAbort = (): void => {
        stream.destroy(signal?.reason);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      stream.once('error', (error: unknown) => {
        signal?.removeEventListener('abort', onAbort);
        reject(error);
      });
      stream.once('finish', () => {
        signal?.removeEventListener('abort', onAbort);
        resolve(file.metadata);
      });
      stream.end(body);
    });
  }

  /**
   * Maps a failed write: a 412 is a refusal (`AlreadyExistsError` for
   * create, `PreconditionFailedError` otherwise) unless the object holds this
   * very write (a retry refused by its own first attempt), then it is success.
   */
  async #refused(
    operation: string,
    key: string,
    mode: PutMode,
    writeId: string,
    error: unknown,
    signal: AbortSignal | undefined,
  ): Promise<{ version: ObjectVersion; size: number }> {
    if (signal?.aborted) throw signal.reason;
    const { status } = gcsFailureOf(error);
    if (status !== 412 || mode === 'overwrite') this.#fail(operation, key, error, signal);
    let current: FileMetadata | null;
    try {
      current = await withRetries(this.#retry, signal, async () => {
        try {
          return (await this.#file(key).getMetadata())[0];
        } catch (lookupError) {
          if (gcsFailureOf(lookupError).status === 404) return null;
          throw lookupError;
        }
      });
    } catch (lookupError) {
      this.#fail('head (after a refused write)', key, lookupError, signal);
    }
    const recorded = current?.metadata?.[WRITE_ID_METADATA];
    if (current && recorded === writeId)
      return { version: generationVersion(current, operation, key), size: sizeOf(current) };
    throw refusedWriteError(key, mode, current === null);
  }

  async delete(key: string, options: DeleteOptions = {}): Promise<void> {
    this.#objectName(key);
    const signal = options.signal;
    if (options.ifMatch) requireCapability(this, 'conditionalDelete', 'delete ifMatch', key);
    throwIfAborted(signal);
    const generation = options.ifMatch ? matchGeneration(options.ifMatch, key) : undefined;
    try {
      await withRetries(this.#retry, signal, async (attemptNumber) => {
        try {
          await this.#file(key).delete(
            generation === undefined ? {} : { ifGenerationMatch: generation },
          );
        } catch (error) {
          if (gcsFailureOf(error).status !== 404) throw error;
          // Missing is success without a precondition. With one, a 404 on a
          // retry most likely answers our own first attempt, which landed:
          // the version asked for is gone either way.
          if (generation === undefined || attemptNumber > 1) return;
          throw new PreconditionFailedError(key, { detail: 'no object at the key' });
        }
      });
    } catch (error) {
      if (PreconditionFailedError.isInstance(error)) throw error;
      if (generation !== undefined && gcsFailureOf(error).status === 412 && !signal?.aborted) {
        throw new PreconditionFailedError(key);
      }
      this.#fail('delete', key, error, signal);
    }
  }

  async list(prefix: string, options: ListOptions = {}): Promise<ListResult> {
    return collectListPages(this.listPages(prefix, options));
  }

  /**
   * `getFiles` with `autoPaginate: false`, one request per page, following
   * `pageToken`; `pageSize` (default `listPageSize`) is sent as
   * `maxResults`, at most 1 000. fake-gcs-server counts only objects against
   * it, not rolled-up prefixes; a page it makes larger than `pageSize` is cut.
   */
  listPages(prefix: string, options: ListPagesOptions = {}): AsyncIterable<ListPage> {
    return orderedListPages(this.#rawListPages(prefix, options), options.pageSize);
  }

  async *#rawListPages(prefix: string, options: ListPagesOptions): AsyncIterable<RawListPage> {
    const signal = options.signal;
    throwIfAborted(signal);
    const maxResults = Math.min(pageSizeOf(options, this.#listPageSize), MAX_LIST_PAGE_SIZE);
    const fullPrefix = this.prefix === '' ? prefix : `${this.prefix}/${prefix}`;
    const strip = this.prefix === '' ? 0 : this.prefix.length + 1;
    const bucket = this.storage.bucket(this.bucketName);
    let pageToken: string | undefined;
    do {
      const token = pageToken;
      let page: RawListPage;
      try {
        const [files, next, response] = await withRetries(this.#retry, signal, () =>
          bucket.getFiles({
            prefix: fullPrefix,
            autoPaginate: false,
            maxResults,
            ...(options.delimiter ? { delimiter: options.delimiter } : {}),
            ...(token === undefined ? {} : { pageToken: token }),
          }),
        );
        const objects: ObjectInfo[] = files.map((file) => ({
          key: file.name.slice(strip),
          size: sizeOf(file.metadata),
          version: generationVersion(file.metadata, 'list', file.name),
        }));
        const commonPrefixes: string[] = [];
        const rolled = (response as { prefixes?: unknown } | undefined)?.prefixes;
        if (Array.isArray(rolled)) {
          for (const name of rolled)
            if (typeof name === 'string') commonPrefixes.push(name.slice(strip));
        }
        const nextToken = (next as { pageToken?: unknown } | null | undefined)?.pageToken;
        pageToken = typeof nextToken === 'string' && nextToken !== '' ? nextToken : undefined;
        page = { objects, commonPrefixes };
      } catch (error) {
        this.#fail('list', prefix === '' ? '(all)' : prefix, error, signal);
      }
      // A rolled-up prefix can come back on several pages: orderedListPages drops the repeat.
      yield page;
    } while (pageToken !== undefined);
  }

  async upload(
    key: string,
    source: UploadSource,
    options: UploadOptions = {},
  ): Promise<{ version: ObjectVersion; size: number }> {
    this.#objectName(key);
    const mode = options.mode ?? 'overwrite';
    if (mode === 'create') requireCapability(this, 'multipartCreate', 'upload create', key);
    const signal = options.signal;
    const partSize = options.partSize;
    if (
      partSize !== undefined &&
      (!Number.isInteger(partSize) || partSize <= 0 || partSize % RESUMABLE_CHUNK_GRANULARITY !== 0)
    ) {
      throw new StoreError(
        `gcs upload ${key}: partSize must be a positive multiple of ${RESUMABLE_CHUNK_GRANULARITY} bytes, got ${partSize}`,
        { key },
      );
    }
    throwIfAborted(signal);
    const writeId = this.#newWriteId();
    try {
      const { metadata, size } = await resumableUpload({
        file: this.#file(key),
        source,
        chunkSize: partSize ?? DEFAULT_CHUNK_SIZE,
        precondition: preconditionFor(mode, key),
        customMetadata: { [WRITE_ID_METADATA]: writeId },
        retry: this.#retry,
        signal,
      });
      return { version: generationVersion(metadata, 'upload', key), size };
    } catch (error) {
      if (signal?.aborted) throw signal.reason;
      return await this.#refused('upload', key, mode, writeId, error, signal);
    }
  }
}

function normalizeHeaders(headers: unknown): Record<string, string | string[] | undefined> {
  if (headers === null || typeof headers !== 'object') return {};
  if (typeof (headers as { forEach?: unknown }).forEach === 'function' && !Array.isArray(headers)) {
    const result: Record<string, string> = {};
    (headers as { forEach: (callback: (value: string, name: string) => void) => void }).forEach(
      (value, name) => {
        result[name.toLowerCase()] = value;
      },
    );
    return result;
  }
  const result: Record<string, string | string[] | undefined> = {};
  for (const [name, value] of Object.entries(headers as Record<string, unknown>)) {
    if (typeof value === 'string' || Array.isArray(value))
      result[name.toLowerCase()] = value as string;
  }
  return result;
}

function headerValue(
  headers: Record<string, string | string[] | undefined>,
  name: string,
): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}
