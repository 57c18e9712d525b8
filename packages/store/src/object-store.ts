/**
 * The object-store interface: what the backup worker and the lease need from
 * a bucket. {@link MemoryStore} is the reference semantics. Key rules: keys.ts
 * (a bad key is refused before any request); portable layouts: package README.
 * - Other bytes always get a new {@link ObjectVersion}, the same bytes only
 *   where `capabilities.distinctVersions` (not S3: ETags hash the content);
 *   code relying on replace-if-version to see another writer writes unique bytes.
 * - Conditional writes are atomic: of concurrent creates of a key, or
 *   replaces against one version, exactly one succeeds.
 * - An aborted call rejects with the signal's reason and leaves no partial
 *   object; a write already received may apply. Other failures: `StoreError`.
 */

import type { StoreError } from './errors.ts';

/**
 * Which version of an object a read saw or a write produced. Opaque: compare
 * with {@link sameVersion}, pass back in `ifMatch`, never parse.
 * S3 and Azure fill `etag` (exactly as the service returned it, quotes
 * included); GCS fills `generation`; the local stores fill `etag`.
 */
export interface ObjectVersion {
  readonly etag?: string;
  readonly generation?: string;
}

/** True when both name the same version of an object. */
export function sameVersion(a: ObjectVersion, b: ObjectVersion): boolean {
  if (a.generation !== undefined || b.generation !== undefined)
    return a.generation === b.generation;
  return a.etag !== undefined && a.etag === b.etag;
}

/** One object as `head` and `list` describe it. */
export interface ObjectInfo {
  readonly key: string;
  readonly size: number;
  readonly version: ObjectVersion;
}

export interface GetResult extends ObjectInfo {
  readonly body: Uint8Array;
}

export interface GetStreamResult extends ObjectInfo {
  /** The body in chunks. Iterate it once; abort with the signal given to `getStream`. */
  readonly body: AsyncIterable<Uint8Array>;
}

/**
 * How a `put` treats an object already at the key:
 * - `overwrite`: replaces it (or creates one);
 * - `create`: create-if-absent; `AlreadyExistsError` when the key exists;
 * - `{ ifMatch }`: replace-if-version; `PreconditionFailedError` when the
 *   current version differs or there is no object.
 */
export type PutMode = 'overwrite' | 'create' | { readonly ifMatch: ObjectVersion };

export interface CallOptions {
  readonly signal?: AbortSignal;
}

export interface PutOptions extends CallOptions {
  /** Default `overwrite`. */
  readonly mode?: PutMode;
}

export interface DeleteOptions extends CallOptions {
  /** Delete only this version; `PreconditionFailedError` otherwise. */
  readonly ifMatch?: ObjectVersion;
}

export interface ListOptions extends CallOptions {
  /**
   * With a delimiter (usually `/`), keys that have it after the prefix are
   * rolled up into `commonPrefixes` instead of being listed.
   */
  readonly delimiter?: string;
}

export interface ListResult {
  /** Every object under the prefix (all pages), in UTF-8 byte order of keys. */
  readonly objects: readonly ObjectInfo[];
  /** With a delimiter: the rolled-up prefixes, each ending in the delimiter, sorted. */
  readonly commonPrefixes: readonly string[];
}

export interface ListPagesOptions extends ListOptions {
  /**
   * At most this many entries (objects plus common prefixes) per page: a
   * hint, which a service may lower (S3 returns at most 1 000, Azure 5 000).
   * Default: the store's own page size (1 000 for `MemoryStore` and
   * `FsStore`). A positive integer.
   */
  readonly pageSize?: number;
}

/**
 * One page of a listing. Pages come in key order: concatenated, their
 * `objects` are in UTF-8 byte order of keys and their `commonPrefixes`
 * sorted, each prefix once — together what `list` returns. No page is empty.
 */
export interface ListPage {
  readonly objects: readonly ObjectInfo[];
  readonly commonPrefixes: readonly string[];
}

export interface UploadOptions extends CallOptions {
  /** `create` (create-if-absent, checked when the upload completes) or `overwrite` (default). */
  readonly mode?: 'create' | 'overwrite';
  /** Bytes per part for stores that upload in parts; each adapter documents its default and bounds. */
  readonly partSize?: number;
}

/** What `upload` streams: chunks of any size, or one buffer. */
export type UploadSource = AsyncIterable<Uint8Array> | Uint8Array;

/**
 * What a store says it can do. Claims are checked by behaviour by
 * `probeConditionalWrites` in `@x/store-conformance`; the lease probes again
 * at every acquire.
 */
/** A key `deleteMany` could not delete, and why. */
export interface DeleteFailure {
  readonly key: string;
  readonly error: StoreError;
}

/** What `deleteMany` and `deleteKeys` report: every key not listed was deleted or absent. */
export interface DeleteManyResult {
  readonly failed: readonly DeleteFailure[];
}

export interface StoreCapabilities {
  /** `put` honours `create` and `{ ifMatch }`. */
  readonly conditionalPut: boolean;
  /** `delete` honours `ifMatch`. */
  readonly conditionalDelete: boolean;
  /** `upload` honours `create` atomically at completion. */
  readonly multipartCreate: boolean;
  /**
   * Every write produces a new version, even of identical bytes. `false` for
   * S3 and S3-compatible services, whose ETags are content hashes: there a
   * rewrite of the same bytes keeps the version, and a replace-if-version
   * against the older write still matches. Wrappers pass the inner store's
   * value through.
   */
  readonly distinctVersions: boolean;
}

export interface ObjectStore {
  /** A short description for logs and errors, never containing credentials (e.g. `s3://bucket/prefix`). */
  readonly description: string;
  readonly capabilities: StoreCapabilities;

  /**
   * Reads a whole object into memory.
   * @returns the object, or `null` when the key does not exist.
   * @throws InvalidKeyError for a bad key; StoreError for anything else.
   */
  get(key: string, options?: CallOptions): Promise<GetResult | null>;

  /**
   * Reads an object as a stream of chunks, for objects too large for memory.
   * @returns the object, or `null` when the key does not exist.
   * @throws InvalidKeyError; StoreError (also from the body's iteration).
   */
  getStream(key: string, options?: CallOptions): Promise<GetStreamResult | null>;

  /**
   * Reads an object's size and version.
   * @returns them, or `null` when the key does not exist.
   * @throws InvalidKeyError; StoreError.
   */
  head(key: string, options?: CallOptions): Promise<ObjectInfo | null>;

  /**
   * Writes a whole object.
   * @returns the new version.
   * @throws AlreadyExistsError — mode `create` and the key exists; nothing written.
   * @throws PreconditionFailedError — mode `{ ifMatch }` and the version differs or the key is missing; nothing written.
   * @throws ConflictError — a concurrent conditional write won the race; nothing written, retry after a re-read.
   * @throws NotImplementedError — the store cannot do the requested mode.
   * @throws InvalidKeyError; StoreError.
   */
  put(key: string, body: Uint8Array, options?: PutOptions): Promise<{ version: ObjectVersion }>;

  /**
   * Deletes an object. Deleting a missing key is not an error (unless
   * `ifMatch` is given: then it is `PreconditionFailedError`).
   * @throws PreconditionFailedError — `ifMatch` given and the version differs or the key is missing.
   * @throws NotImplementedError — `ifMatch` given and the store cannot delete conditionally.
   * @throws InvalidKeyError; StoreError.
   */
  delete(key: string, options?: DeleteOptions): Promise<void>;

  /**
   * Lists every object whose key starts with `prefix` (all pages). The prefix
   * is a plain string prefix: `"a/b"` matches `"a/bc"`; pass `"a/b/"` for a folder.
   * The empty prefix lists the whole store.
   * @throws StoreError.
   */
  list(prefix: string, options?: ListOptions): Promise<ListResult>;

  /**
   * Lists like `list`, one page at a time, so a prefix of millions of keys
   * is listed in bounded memory: the next page is requested only when the
   * iteration asks for it, and stopping the iteration (`break`) requests no
   * more. Optional, so that existing implementations stay valid; callers use
   * the `listPages(store, prefix, options)` function, which falls back to one
   * page from `list` for a store without it. Every store in `@x/store` and
   * the cloud adapters have it.
   * @throws StoreError (from the iteration); an aborted signal rejects the
   * pending page with its reason.
   */
  listPages?(prefix: string, options?: ListPagesOptions): AsyncIterable<ListPage>;

  /**
   * Deletes many keys unconditionally, in as few requests as the service
   * allows (S3 `DeleteObjects`, Azure blob batch). A missing key is not a
   * failure. Optional: callers use the `deleteKeys(store, keys, options)`
   * function, which falls back to one `delete` per key.
   * @returns the keys that could not be deleted, each with its error.
   * @throws InvalidKeyError (nothing deleted); StoreError when a request
   * failed as a whole and which of its keys were deleted is unknown.
   */
  deleteMany?(keys: readonly string[], options?: CallOptions): Promise<DeleteManyResult>;

  /**
   * Streams a large object in bounded memory (multipart where the service has
   * it). Nothing is visible at the key until the upload completes; a failed or
   * aborted upload leaves no object and no parts behind (best effort on the
   * service: the adapter aborts what it started).
   * @returns the new version and the size written.
   * @throws AlreadyExistsError — mode `create` and the key exists at completion; the existing object is untouched.
   * @throws NotImplementedError — mode `create` where the service cannot check it at completion.
   * @throws InvalidKeyError; StoreError.
   */
  upload(
    key: string,
    source: UploadSource,
    options?: UploadOptions,
  ): Promise<{ version: ObjectVersion; size: number }>;
}
