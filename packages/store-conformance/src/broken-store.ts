/**
 * Deliberately broken stores, for proving that a check can fail: the
 * conformance suite's own meta-tests use them, and so can any package that
 * must refuse a store which ignores conditions (the lease, for one).
 *
 * Never use them to store data.
 */
import {
  AlreadyExistsError,
  type CallOptions,
  type DeleteManyResult,
  type DeleteOptions,
  type GetResult,
  type GetStreamResult,
  isValidKey,
  type ObjectInfo,
  type ObjectStore,
  type ObjectVersion,
  PreconditionFailedError,
  type PutOptions,
  sameVersion,
  type UploadOptions,
  type UploadSource,
} from '@x/store';
import { ForwardingStore } from '@x/store/adapter';

/**
 * - `ignores-create`: `create` (put and upload) overwrites like `overwrite`;
 * - `ignores-if-match`: `{ ifMatch }` puts and deletes ignore the version;
 * - `not-atomic`: conditions are checked with a `head`, then, one event-loop
 *   turn later, written unconditionally — right one request at a time, wrong
 *   under concurrency;
 * - `ignores-create-on-multipart`: an `upload` in create mode of more than
 *   one part (`partSize`, default 8 MiB) overwrites, as a service that
 *   honours `If-None-Match` on PutObject but not on CompleteMultipartUpload;
 *   puts and one-part uploads keep their condition;
 * - `accepts-invalid-keys`: a key `@x/store`'s rules refuse is stored under
 *   an escaped name instead of being refused with `InvalidKeyError`;
 * - `buffers-uploads`: `upload` collects the whole source before writing it;
 * - `skips-batch-deletes`: `deleteMany` leaves every 100th key in place and
 *   reports it deleted.
 */
export type StoreFlaw =
  | 'ignores-create'
  | 'ignores-if-match'
  | 'not-atomic'
  | 'ignores-create-on-multipart'
  | 'accepts-invalid-keys'
  | 'buffers-uploads'
  | 'skips-batch-deletes';

/** Where `accepts-invalid-keys` puts an invalid key: a valid name derived from it. */
function escapedKey(key: string): string {
  return `escaped-invalid-keys/${Buffer.from(key, 'utf8').toString('hex') || 'empty'}`;
}

/** The part size `ignores-create-on-multipart` assumes when the call names none (S3Store's default). */
const DEFAULT_FLAWED_PART_SIZE = 8 * 1024 * 1024;

async function collect(source: UploadSource): Promise<Uint8Array> {
  if (source instanceof Uint8Array) return source;
  const chunks: Uint8Array[] = [];
  for await (const chunk of source) chunks.push(chunk);
  return Buffer.concat(chunks);
}

function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** Reads and listings pass through; only conditional writes are broken. */
class BrokenStore extends ForwardingStore {
  readonly #flaw: StoreFlaw;

  constructor(inner: ObjectStore, flaw: StoreFlaw) {
    super(inner, {
      description: `broken(${flaw}):${inner.description}`,
      // It claims everything, like a store that believes it works.
      capabilities: {
        conditionalPut: true,
        conditionalDelete: true,
        multipartCreate: true,
        distinctVersions: inner.capabilities.distinctVersions,
      },
    });
    this.#flaw = flaw;
  }

  async #checkThenWait(
    key: string,
    mode: 'create' | { readonly ifMatch: ObjectVersion },
    options: CallOptions | undefined,
  ): Promise<void> {
    const current = await this.inner.head(key, options);
    if (mode === 'create') {
      if (current) throw new AlreadyExistsError(key);
    } else if (!current || !sameVersion(current.version, mode.ifMatch)) {
      throw new PreconditionFailedError(key);
    }
    await nextTurn();
  }

  /** The key the inner store gets: the same, unless the flaw escapes invalid keys. */
  #inner(key: string): string {
    return this.#flaw === 'accepts-invalid-keys' && !isValidKey(key) ? escapedKey(key) : key;
  }

  override get(key: string, options?: CallOptions): Promise<GetResult | null> {
    return super.get(this.#inner(key), options);
  }

  override getStream(key: string, options?: CallOptions): Promise<GetStreamResult | null> {
    return super.getStream(this.#inner(key), options);
  }

  override head(key: string, options?: CallOptions): Promise<ObjectInfo | null> {
    return super.head(this.#inner(key), options);
  }

  override async put(
    rawKey: string,
    body: Uint8Array,
    options: PutOptions = {},
  ): Promise<{ version: ObjectVersion }> {
    const key = this.#inner(rawKey);
    const mode = options.mode ?? 'overwrite';
    if (mode === 'overwrite') return this.inner.put(key, body, options);
    if (this.#flaw === 'not-atomic') {
      await this.#checkThenWait(key, mode, options);
      return this.inner.put(key, body, { ...options, mode: 'overwrite' });
    }
    const ignored =
      mode === 'create' ? this.#flaw === 'ignores-create' : this.#flaw === 'ignores-if-match';
    return this.inner.put(key, body, ignored ? { ...options, mode: 'overwrite' } : options);
  }

  override async delete(rawKey: string, options: DeleteOptions = {}): Promise<void> {
    const key = this.#inner(rawKey);
    if (!options.ifMatch) return this.inner.delete(key, options);
    if (this.#flaw === 'ignores-if-match')
      return this.inner.delete(key, options.signal ? { signal: options.signal } : {});
    if (this.#flaw === 'not-atomic') {
      await this.#checkThenWait(key, { ifMatch: options.ifMatch }, options);
      return this.inner.delete(key, options.signal ? { signal: options.signal } : {});
    }
    return this.inner.delete(key, options);
  }

  override deleteMany(keys: readonly string[], options?: CallOptions): Promise<DeleteManyResult> {
    const sent = keys.map((key) => this.#inner(key));
    if (this.#flaw !== 'skips-batch-deletes') return super.deleteMany(sent, options);
    return super.deleteMany(
      sent.filter((_, index) => index % 100 !== 99),
      options,
    );
  }

  override async upload(
    rawKey: string,
    source: UploadSource,
    options: UploadOptions = {},
  ): Promise<{ version: ObjectVersion; size: number }> {
    const key = this.#inner(rawKey);
    if (this.#flaw === 'buffers-uploads')
      return this.inner.upload(key, await collect(source), options);
    if (options.mode !== 'create') return this.inner.upload(key, source, options);
    if (this.#flaw === 'ignores-create-on-multipart') {
      const body = await collect(source);
      const multipart = body.byteLength > (options.partSize ?? DEFAULT_FLAWED_PART_SIZE);
      return this.inner.upload(key, body, multipart ? { ...options, mode: 'overwrite' } : options);
    }
    if (this.#flaw === 'ignores-create')
      return this.inner.upload(key, source, { ...options, mode: 'overwrite' });
    if (this.#flaw === 'not-atomic') {
      await this.#checkThenWait(key, 'create', options);
      return this.inner.upload(key, source, { ...options, mode: 'overwrite' });
    }
    return this.inner.upload(key, source, options);
  }
}

/**
 * Wraps `inner` in a store with the given flaw, claiming every conditional
 * capability; `distinctVersions` is the inner store's (not a flaw here).
 */
export function brokenStore(inner: ObjectStore, flaw: StoreFlaw): ObjectStore {
  return new BrokenStore(inner, flaw);
}
