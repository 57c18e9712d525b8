/**
 * `ObjectStore` on Azure Blob Storage block blobs, via `@azure/storage-blob`.
 * `create` sends `If-None-Match: *`, `{ ifMatch }` `If-Match` with the ETag as
 * returned; Azure checks both atomically. `upload` stages one block of
 * `partSize` at a time and commits the block list with the condition, so
 * nothing shows before the commit, and a refused or failed commit leaves the
 * blob as it was; blocks it staged cannot be deleted (Azure drops them at the
 * blob's next commit, or after 7 days). A conditional write the SDK retried is
 * recognised by the write id in the blob's metadata. Errors and `description`
 * never hold the account key or a SAS token. More: package README.
 */
import { randomUUID } from 'node:crypto';
import type { TokenCredential } from '@azure/core-auth';
import {
  AnonymousCredential,
  type BlobItem,
  BlobServiceClient,
  type BlockBlobClient,
  type ContainerClient,
  StorageSharedKeyCredential,
} from '@azure/storage-blob';
import {
  AlreadyExistsError,
  type CallOptions,
  ConflictError,
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
  collectListPages,
  newWriteId,
  orderedListPages,
  pageSizeOf,
  type RawListPage,
  refusedWriteError,
} from '@x/store/adapter';
import { type BatchDeleteContext, deleteBlobs } from './azure-delete-many.ts';
import { azureFailureOf, throwAbortReason, unexpectedFailure } from './errors.ts';

/** Default bytes per staged block. */
export const DEFAULT_BLOCK_SIZE = 8 * 1024 * 1024;
/** Smallest accepted `partSize`. */
export const MIN_BLOCK_SIZE = 64 * 1024;
/** Largest block Azure accepts (4000 MiB). */
export const MAX_BLOCK_SIZE = 4000 * 1024 * 1024;
/** Most committed blocks one blob may have. */
export const MAX_BLOCKS = 50_000;

/** The metadata name under which each write records its random write id. */
/** The most blobs Azure returns in one page of a listing. */
const MAX_LIST_PAGE_SIZE = 5000;

export const WRITE_ID_METADATA = 'xstorewriteid';

interface CommonOptions {
  /** The container; it must exist. */
  readonly container: string;
  /** Optional key prefix: every key is stored as `prefix/key`, and listed without it. */
  readonly prefix?: string;
  /** Blobs per list request (default and maximum 5000). */
  readonly listPageSize?: number;
  /** Generates the write id recorded with every write; default `crypto.randomUUID`. For tests. */
  readonly newWriteId?: () => string;
}

/** Authenticate with a connection string (`DefaultEndpointsProtocol=…;AccountName=…;AccountKey=…` or with `SharedAccessSignature=`). */
export interface ConnectionStringAuth {
  readonly connectionString: string;
}

/** Authenticate with the account name and key (shared key). */
export interface AccountKeyAuth {
  readonly accountName: string;
  readonly accountKey: string;
  /** Default `https://{accountName}.blob.core.windows.net`; set it for Azurite or sovereign clouds. */
  readonly blobEndpoint?: string;
}

/** Authenticate with a SAS: the blob service URL with the SAS token as its query. */
export interface SasUrlAuth {
  readonly sasUrl: string;
}

/** Authenticate with a Microsoft Entra ID token credential (e.g. `DefaultAzureCredential` from `@azure/identity`). */
export interface TokenCredentialAuth {
  readonly blobEndpoint: string;
  readonly credential: TokenCredential;
}

export type AzureBlobStoreOptions = CommonOptions &
  (ConnectionStringAuth | AccountKeyAuth | SasUrlAuth | TokenCredentialAuth);

function hasString(options: object, name: string): boolean {
  return typeof (options as Record<string, unknown>)[name] === 'string';
}

interface Connection {
  readonly service: BlobServiceClient;
  readonly secrets: string[];
}

function connect(options: AzureBlobStoreOptions): Connection {
  const ways = [
    hasString(options, 'connectionString'),
    hasString(options, 'accountKey'),
    hasString(options, 'sasUrl'),
    'credential' in options && options.credential !== undefined,
  ].filter(Boolean).length;
  if (ways !== 1) {
    throw new StoreError(
      'azure: give exactly one of connectionString, accountName + accountKey, sasUrl, or blobEndpoint + credential',
    );
  }
  if ('connectionString' in options) {
    const secrets = [options.connectionString];
    for (const part of options.connectionString.split(';')) {
      const at = part.indexOf('=');
      const name = part.slice(0, at).trim().toLowerCase();
      if (name === 'accountkey' || name === 'sharedaccesssignature')
        secrets.push(part.slice(at + 1));
    }
    try {
      return { service: BlobServiceClient.fromConnectionString(options.connectionString), secrets };
    } catch (error) {
      throw unexpectedFailure('parsing the connection string', undefined, error, secrets);
    }
  }
  if ('accountKey' in options) {
    const endpoint = options.blobEndpoint ?? `https://${options.accountName}.blob.core.windows.net`;
    const credential = new StorageSharedKeyCredential(options.accountName, options.accountKey);
    return { service: new BlobServiceClient(endpoint, credential), secrets: [options.accountKey] };
  }
  if ('sasUrl' in options) {
    const query = options.sasUrl.includes('?')
      ? options.sasUrl.slice(options.sasUrl.indexOf('?') + 1)
      : '';
    return {
      service: new BlobServiceClient(options.sasUrl, new AnonymousCredential()),
      secrets: [options.sasUrl, query],
    };
  }
  return { service: new BlobServiceClient(options.blobEndpoint, options.credential), secrets: [] };
}

function etagVersion(etag: string | undefined, operation: string, key: string): ObjectVersion {
  if (etag === undefined) {
    throw new StoreError(`azure ${operation} ${key}: the service returned no ETag`, { key });
  }
  return { etag };
}

function ifMatchEtag(mode: { readonly ifMatch: ObjectVersion }, key: string): string {
  const etag = mode.ifMatch.etag;
  if (etag === undefined) {
    // A version without an ETag comes from another kind of store; it cannot match a blob.
    throw new PreconditionFailedError(key, { detail: 'the version has no ETag' });
  }
  return etag;
}

export class AzureBlobStore implements ObjectStore {
  readonly description: string;
  /** Azure honours every condition, and its ETags change on every write, also of identical bytes. */
  readonly capabilities: StoreCapabilities = {
    conditionalPut: true,
    conditionalDelete: true,
    multipartCreate: true,
    distinctVersions: true,
  };
  /** The container client, for operations this interface does not cover. */
  readonly containerClient: ContainerClient;
  readonly prefix: string;

  readonly #secrets: readonly string[];
  #batchDelete: BatchDeleteContext | undefined;
  readonly #listPageSize: number;
  readonly #newWriteId: () => string;

  /**
   * @throws StoreError when the options give no or several ways to authenticate,
   *   or the connection string cannot be parsed. No request is sent.
   */
  constructor(options: AzureBlobStoreOptions) {
    const { service, secrets } = connect(options);
    this.#secrets = secrets.filter((secret) => secret.length > 0);
    this.containerClient = service.getContainerClient(options.container);
    this.prefix = normalizePrefix(options.prefix ?? '');
    this.#listPageSize = options.listPageSize ?? 5000;
    if (
      !Number.isInteger(this.#listPageSize) ||
      this.#listPageSize < 1 ||
      this.#listPageSize > 5000
    ) {
      throw new StoreError(
        `azure: listPageSize must be an integer from 1 to 5000, got ${this.#listPageSize}`,
      );
    }
    this.#newWriteId = options.newWriteId ?? newWriteId;
    const account = service.accountName || 'account';
    this.description = `azure://${account}/${options.container}${this.prefix ? `/${this.prefix}` : ''}`;
  }

  #blobName(key: string): string {
    validateKey(key);
    return joinKey(this.prefix, key);
  }

  #block(key: string): BlockBlobClient {
    return this.containerClient.getBlockBlobClient(this.#blobName(key));
  }

  #fail(operation: string, key: string | undefined, error: unknown, signal?: AbortSignal): never {
    throwAbortReason(signal, error);
    if (azureFailureOf(error).errorCode === 'ContainerNotFound') {
      throw new StoreError(
        `azure ${operation}: container not found (${this.description}); create it first`,
        { key, cause: unexpectedFailure(operation, key, error, this.#secrets).cause },
      );
    }
    throw unexpectedFailure(operation, key, error, this.#secrets);
  }

  async get(key: string, options: CallOptions = {}): Promise<GetResult | null> {
    const opened = await this.getStream(key, options);
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
  }

  async getStream(key: string, options: CallOptions = {}): Promise<GetStreamResult | null> {
    const blob = this.#block(key);
    const signal = options.signal;
    throwIfAborted(signal);
    let response: Awaited<ReturnType<BlockBlobClient['download']>>;
    try {
      response = await blob.download(0, undefined, { abortSignal: signal });
    } catch (error) {
      const { statusCode, errorCode } = azureFailureOf(error);
      if (statusCode === 404 && errorCode !== 'ContainerNotFound' && !signal?.aborted) return null;
      this.#fail('get', key, error, signal);
    }
    const version = etagVersion(response.etag, 'get', key);
    const size = response.contentLength ?? 0;
    const stream = response.readableStreamBody;
    const fail = (error: unknown): never =>
      this.#fail('get (reading the body)', key, error, signal);
    async function* body(): AsyncIterable<Uint8Array> {
      if (!stream) return;
      try {
        throwIfAborted(signal);
        for await (const chunk of stream) {
          throwIfAborted(signal);
          yield chunk as Uint8Array;
        }
      } catch (error) {
        fail(error);
      } finally {
        // Stops the download when the consumer leaves the loop early.
        (stream as NodeJS.ReadableStream & { destroy?: () => void }).destroy?.();
      }
    }
    return { key, size, version, body: body() };
  }

  async head(key: string, options: CallOptions = {}): Promise<ObjectInfo | null> {
    const blob = this.#block(key);
    throwIfAborted(options.signal);
    try {
      const properties = await blob.getProperties({ abortSignal: options.signal });
      return {
        key,
        size: properties.contentLength ?? 0,
        version: etagVersion(properties.etag, 'head', key),
      };
    } catch (error) {
      const { statusCode, errorCode } = azureFailureOf(error);
      if (statusCode === 404 && errorCode !== 'ContainerNotFound' && !options.signal?.aborted)
        return null;
      this.#fail('head', key, error, options.signal);
    }
  }

  async put(
    key: string,
    body: Uint8Array,
    options: PutOptions = {},
  ): Promise<{ version: ObjectVersion }> {
    const blob = this.#block(key);
    const mode = options.mode ?? 'overwrite';
    const signal = options.signal;
    throwIfAborted(signal);
    const writeId = this.#newWriteId();
    try {
      const response = await blob.upload(body, body.byteLength, {
        conditions: conditionsFor(mode, key),
        metadata: { [WRITE_ID_METADATA]: writeId },
        abortSignal: signal,
      });
      return { version: etagVersion(response.etag, 'put', key) };
    } catch (error) {
      return { version: await this.#refused('put', key, mode, writeId, error, signal) };
    }
  }

  /**
   * Handles a failed conditional write: maps refusals to typed errors, unless
   * the refusal came from a retry of this very write that had already landed
   * (recognised by the write id); then returns that write's version.
   */
  async #refused(
    operation: string,
    key: string,
    mode: PutMode,
    writeId: string,
    error: unknown,
    signal: AbortSignal | undefined,
  ): Promise<ObjectVersion> {
    throwAbortReason(signal, error);
    const { statusCode, errorCode } = azureFailureOf(error);
    const refused =
      (mode === 'create' &&
        (statusCode === 412 || (statusCode === 409 && errorCode === 'BlobAlreadyExists'))) ||
      (typeof mode === 'object' &&
        (statusCode === 412 || (statusCode === 404 && errorCode === 'BlobNotFound')));
    if (!refused) this.#fail(operation, key, error, signal);
    const own = await this.#ownWrite(key, writeId, signal);
    if (own) return own;
    throw refusedWriteError(key, mode, statusCode === 404);
  }

  /** The blob's version when it holds the write with `writeId`, else undefined. */
  async #ownWrite(
    key: string,
    writeId: string,
    signal: AbortSignal | undefined,
  ): Promise<ObjectVersion | undefined> {
    try {
      const properties = await this.#block(key).getProperties({ abortSignal: signal });
      if (properties.metadata?.[WRITE_ID_METADATA] === writeId && properties.etag) {
        return { etag: properties.etag };
      }
      return undefined;
    } catch (error) {
      if (azureFailureOf(error).statusCode === 404 && !signal?.aborted) return undefined;
      this.#fail('head (after a refused write)', key, error, signal);
    }
  }

  /** The Blob Batch API, 256 deletes a request; single deletes where the service lacks it. */
  async deleteMany(keys: readonly string[], options: CallOptions = {}): Promise<DeleteManyResult> {
    for (const key of keys) validateKey(key);
    throwIfAborted(options.signal);
    this.#batchDelete ??= {
      containerClient: this.containerClient,
      store: this,
      blobName: (key) => this.#blobName(key),
      secrets: this.#secrets,
      refused: false,
    };
    return deleteBlobs(this.#batchDelete, keys, options);
  }

  async delete(key: string, options: DeleteOptions = {}): Promise<void> {
    const blob = this.#block(key);
    const signal = options.signal;
    throwIfAborted(signal);
    const ifMatch = options.ifMatch ? ifMatchEtag({ ifMatch: options.ifMatch }, key) : undefined;
    try {
      await blob.delete({
        deleteSnapshots: 'include',
        conditions: ifMatch === undefined ? undefined : { ifMatch },
        abortSignal: signal,
      });
    } catch (error) {
      throwAbortReason(signal, error);
      const { statusCode, errorCode } = azureFailureOf(error);
      if (statusCode === 404 && errorCode !== 'ContainerNotFound') {
        if (ifMatch === undefined) return;
        throw new PreconditionFailedError(key, { detail: 'no object at the key' });
      }
      if (statusCode === 412 && ifMatch !== undefined) throw new PreconditionFailedError(key);
      this.#fail('delete', key, error, signal);
    }
  }

  async list(prefix: string, options: ListOptions = {}): Promise<ListResult> {
    return collectListPages(this.listPages(prefix, options));
  }

  /**
   * `listBlobsFlat` (or `listBlobsByHierarchy` with a delimiter) `.byPage()`,
   * one request per page; `pageSize` (default `listPageSize`) is sent as
   * `maxPageSize`, at most 5 000 (the service's limit).
   */
  listPages(prefix: string, options: ListPagesOptions = {}): AsyncIterable<ListPage> {
    return orderedListPages(this.#rawListPages(prefix, options), options.pageSize);
  }

  async *#rawListPages(prefix: string, options: ListPagesOptions): AsyncIterable<RawListPage> {
    const signal = options.signal;
    throwIfAborted(signal);
    const maxPageSize = Math.min(pageSizeOf(options, this.#listPageSize), MAX_LIST_PAGE_SIZE);
    const fullPrefix = this.prefix === '' ? prefix : `${this.prefix}/${prefix}`;
    const strip = this.prefix === '' ? 0 : this.prefix.length + 1;
    const describe = (item: BlobItem): ObjectInfo => ({
      key: item.name.slice(strip),
      size: item.properties.contentLength ?? 0,
      version: etagVersion(quotedEtag(item.properties.etag), 'list', item.name),
    });
    try {
      if (options.delimiter) {
        const pages = this.containerClient
          .listBlobsByHierarchy(options.delimiter, { prefix: fullPrefix, abortSignal: signal })
          .byPage({ maxPageSize });
        for await (const page of pages) {
          yield {
            objects: page.segment.blobItems.map(describe),
            commonPrefixes: (page.segment.blobPrefixes ?? []).map((rolled) =>
              rolled.name.slice(strip),
            ),
          };
        }
      } else {
        const pages = this.containerClient
          .listBlobsFlat({ prefix: fullPrefix, abortSignal: signal })
          .byPage({ maxPageSize });
        for await (const page of pages) {
          yield { objects: page.segment.blobItems.map(describe), commonPrefixes: [] };
        }
      }
    } catch (error) {
      // Azure lists in key order already; orderedListPages sorts each page,
      // which makes the UTF-8 byte order a guarantee within it, and drops a
      // rolled-up prefix repeated from the page before.
      this.#fail('list', prefix, error, signal);
    }
  }

  async upload(
    key: string,
    source: UploadSource,
    options: UploadOptions = {},
  ): Promise<{ version: ObjectVersion; size: number }> {
    const blob = this.#block(key);
    const mode = options.mode ?? 'overwrite';
    const signal = options.signal;
    const blockSize = options.partSize ?? DEFAULT_BLOCK_SIZE;
    if (!Number.isInteger(blockSize) || blockSize < MIN_BLOCK_SIZE || blockSize > MAX_BLOCK_SIZE) {
      throw new StoreError(
        `azure upload ${key}: partSize must be an integer from ${MIN_BLOCK_SIZE} to ${MAX_BLOCK_SIZE} bytes, got ${blockSize}`,
        { key },
      );
    }
    throwIfAborted(signal);
    const writeId = this.#newWriteId();
    const conditions = conditionsFor(mode, key);
    const metadata = { [WRITE_ID_METADATA]: writeId };
    // Block ids must all have the same length within a blob; a per-upload
    // random part keeps two uploads of one key from committing each other's blocks.
    const uploadTag = randomUUID().replaceAll('-', '').slice(0, 16);
    const blockIds: string[] = [];
    // One buffer, reused for every block: memory stays at one block.
    let buffer: Buffer | undefined;
    let filled = 0;
    let size = 0;

    const stage = async (): Promise<void> => {
      if (blockIds.length >= MAX_BLOCKS) {
        throw new StoreError(
          `azure upload ${key}: more than ${MAX_BLOCKS} blocks; use a larger partSize`,
          { key },
        );
      }
      const blockId = Buffer.from(
        `${uploadTag}-${blockIds.length.toString().padStart(6, '0')}`,
      ).toString('base64');
      try {
        await blob.stageBlock(blockId, buffer!.subarray(0, filled), filled, {
          abortSignal: signal,
        });
      } catch (error) {
        this.#fail('upload (staging a block)', key, error, signal);
      }
      blockIds.push(blockId);
      filled = 0;
    };

    for await (const chunk of chunksOf(source)) {
      throwIfAborted(signal);
      let offset = 0;
      while (offset < chunk.byteLength) {
        if (filled === blockSize) await stage();
        buffer ??= Buffer.allocUnsafe(blockSize);
        const take = Math.min(blockSize - filled, chunk.byteLength - offset);
        buffer.set(chunk.subarray(offset, offset + take), filled);
        filled += take;
        offset += take;
        size += take;
      }
    }
    throwIfAborted(signal);

    if (blockIds.length === 0) {
      // Fits in one block: one conditional Put Blob instead of Put Block + Put Block List.
      const body = buffer ? buffer.subarray(0, filled) : new Uint8Array(0);
      try {
        const response = await blob.upload(body, filled, {
          conditions,
          metadata,
          abortSignal: signal,
        });
        return { version: etagVersion(response.etag, 'upload', key), size };
      } catch (error) {
        return { version: await this.#refused('upload', key, mode, writeId, error, signal), size };
      }
    }
    if (filled > 0) await stage();
    buffer = undefined;
    try {
      const response = await blob.commitBlockList(blockIds, {
        conditions,
        metadata,
        abortSignal: signal,
      });
      return { version: etagVersion(response.etag, 'upload', key), size };
    } catch (error) {
      throwAbortReason(signal, error);
      const { statusCode, errorCode } = azureFailureOf(error);
      if (statusCode === 400 && errorCode === 'InvalidBlockList') {
        // Another commit of this key discarded our staged blocks.
        const own = await this.#ownWrite(key, writeId, signal);
        if (own) return { version: own, size };
        if (mode === 'create' && (await this.head(key, { signal })) !== null) {
          throw new AlreadyExistsError(key);
        }
        throw new ConflictError(key, {
          cause: unexpectedFailure('upload (commit)', key, error, this.#secrets),
        });
      }
      return { version: await this.#refused('upload', key, mode, writeId, error, signal), size };
    }
  }
}

/**
 * Listings carry the ETag without the quotes that response headers have
 * (`0x8D…` against `"0x8D…"`); quoting it makes a listed version equal to the
 * version `head` and `put` return for the same write.
 */
function quotedEtag(etag: string | undefined): string | undefined {
  if (etag === undefined || etag.startsWith('"') || etag.startsWith('W/"')) return etag;
  return `"${etag}"`;
}

function conditionsFor(
  mode: PutMode | 'create' | 'overwrite',
  key: string,
): { ifNoneMatch: string } | { ifMatch: string } | undefined {
  if (mode === 'overwrite') return undefined;
  if (mode === 'create') return { ifNoneMatch: '*' };
  return { ifMatch: ifMatchEtag(mode, key) };
}
