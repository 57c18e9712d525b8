/**
 * The reference semantics of the store interface, held in memory.
 *
 * Every operation takes effect atomically at one instant (JavaScript runs it
 * without interleaving), so conditional writes behave exactly as the
 * interface describes. Bodies are copied in and out: a caller that mutates a
 * buffer after `put` or after `get` does not change the stored object.
 * Nothing survives the process.
 *
 * With `versions: 'content-hash'` it behaves like S3 where S3 differs:
 * a version is the quoted MD5 of the bytes (an S3 ETag of a single PUT), so
 * a rewrite of identical bytes keeps its version, and it declares
 * `distinctVersions: false`. For testing code that must also be right on S3.
 */
import { createHash } from 'node:crypto';
import { chunksOf, throwIfAborted } from './abort.ts';
import { AlreadyExistsError, PreconditionFailedError } from './errors.ts';
import { compareKeys, validateKey } from './keys.ts';
import { listFromKeys } from './list-helpers.ts';
import { DEFAULT_LIST_PAGE_SIZE, pageSizeOf, pagesOf } from './list-pages.ts';
import {
  type CallOptions,
  type DeleteManyResult,
  type DeleteOptions,
  type GetResult,
  type GetStreamResult,
  type ListOptions,
  type ListPage,
  type ListPagesOptions,
  type ListResult,
  type ObjectInfo,
  type ObjectStore,
  type ObjectVersion,
  type PutOptions,
  type StoreCapabilities,
  sameVersion,
  type UploadOptions,
  type UploadSource,
} from './object-store.ts';

interface StoredObject {
  readonly body: Uint8Array;
  readonly version: ObjectVersion;
}

let storeCounter = 0;

export interface MemoryStoreOptions {
  /**
   * `unique` (default): every write gets a new version, also of identical
   * bytes. `content-hash`: the version is the quoted MD5 of the bytes, like
   * an S3 ETag, and `capabilities.distinctVersions` is `false`.
   */
  readonly versions?: 'unique' | 'content-hash';
}

export class MemoryStore implements ObjectStore {
  readonly description: string;
  readonly capabilities: StoreCapabilities;

  readonly #objects = new Map<string, StoredObject>();
  readonly #instance =
    `${process.pid.toString(36)}.${(storeCounter++).toString(36)}.${Math.random().toString(36).slice(2, 8)}`;
  readonly #contentHashVersions: boolean;
  #writes = 0;

  constructor(name = 'memory', options: MemoryStoreOptions = {}) {
    this.description = `memory:${name}`;
    this.#contentHashVersions = options.versions === 'content-hash';
    this.capabilities = {
      conditionalPut: true,
      conditionalDelete: true,
      multipartCreate: true,
      distinctVersions: !this.#contentHashVersions,
    };
  }

  #nextVersion(body: Uint8Array): ObjectVersion {
    if (this.#contentHashVersions)
      return { etag: `"${createHash('md5').update(body).digest('hex')}"` };
    this.#writes += 1;
    return { etag: `"${this.#instance}.${this.#writes}"` };
  }

  async get(key: string, options: CallOptions = {}): Promise<GetResult | null> {
    validateKey(key);
    throwIfAborted(options.signal);
    const stored = this.#objects.get(key);
    if (!stored) return null;
    return {
      key,
      body: stored.body.slice(),
      size: stored.body.byteLength,
      version: stored.version,
    };
  }

  async getStream(key: string, options: CallOptions = {}): Promise<GetStreamResult | null> {
    const whole = await this.get(key, options);
    if (!whole) return null;
    const signal = options.signal;
    async function* body(): AsyncIterable<Uint8Array> {
      throwIfAborted(signal);
      yield whole!.body;
    }
    return { key, size: whole.size, version: whole.version, body: body() };
  }

  async head(key: string, options: CallOptions = {}): Promise<ObjectInfo | null> {
    validateKey(key);
    throwIfAborted(options.signal);
    const stored = this.#objects.get(key);
    return stored ? { key, size: stored.body.byteLength, version: stored.version } : null;
  }

  async put(
    key: string,
    body: Uint8Array,
    options: PutOptions = {},
  ): Promise<{ version: ObjectVersion }> {
    validateKey(key);
    throwIfAborted(options.signal);
    return { version: this.#commit(key, body.slice(), options.mode ?? 'overwrite') };
  }

  #commit(key: string, body: Uint8Array, mode: PutOptions['mode']): ObjectVersion {
    const existing = this.#objects.get(key);
    if (mode === 'create') {
      if (existing) throw new AlreadyExistsError(key);
    } else if (typeof mode === 'object') {
      if (!existing) throw new PreconditionFailedError(key, { detail: 'no object at the key' });
      if (!sameVersion(existing.version, mode.ifMatch)) throw new PreconditionFailedError(key);
    }
    const version = this.#nextVersion(body);
    this.#objects.set(key, { body, version });
    return version;
  }

  async delete(key: string, options: DeleteOptions = {}): Promise<void> {
    validateKey(key);
    throwIfAborted(options.signal);
    const existing = this.#objects.get(key);
    if (options.ifMatch) {
      if (!existing) throw new PreconditionFailedError(key, { detail: 'no object at the key' });
      if (!sameVersion(existing.version, options.ifMatch)) throw new PreconditionFailedError(key);
    }
    this.#objects.delete(key);
  }

  /** All keys at once: every key is checked before any is deleted. */
  async deleteMany(keys: readonly string[], options: CallOptions = {}): Promise<DeleteManyResult> {
    for (const key of keys) validateKey(key);
    throwIfAborted(options.signal);
    for (const key of keys) this.#objects.delete(key);
    return { failed: [] };
  }

  async list(prefix: string, options: ListOptions = {}): Promise<ListResult> {
    throwIfAborted(options.signal);
    const infos: ObjectInfo[] = [];
    for (const [key, stored] of this.#objects) {
      if (key.startsWith(prefix))
        infos.push({ key, size: stored.body.byteLength, version: stored.version });
    }
    infos.sort((a, b) => compareKeys(a.key, b.key));
    return listFromKeys(prefix, infos, options.delimiter);
  }

  /**
   * Pages of a snapshot taken at the first page (the objects are in memory
   * already; paging here is for callers written against the interface).
   */
  async *listPages(prefix: string, options: ListPagesOptions = {}): AsyncIterable<ListPage> {
    const pageSize = pageSizeOf(options, DEFAULT_LIST_PAGE_SIZE);
    yield* pagesOf(await this.list(prefix, options), pageSize, options.signal);
  }

  async upload(
    key: string,
    source: UploadSource,
    options: UploadOptions = {},
  ): Promise<{ version: ObjectVersion; size: number }> {
    validateKey(key);
    throwIfAborted(options.signal);
    const parts: Uint8Array[] = [];
    let size = 0;
    for await (const chunk of chunksOf(source)) {
      throwIfAborted(options.signal);
      parts.push(chunk.slice());
      size += chunk.byteLength;
    }
    throwIfAborted(options.signal);
    const body = Buffer.concat(parts, size);
    const version = this.#commit(
      key,
      new Uint8Array(body.buffer, body.byteOffset, body.byteLength),
      options.mode ?? 'overwrite',
    );
    return { version, size };
  }
}
