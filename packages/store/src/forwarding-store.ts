/**
 * `ForwardingStore`: the base of every `ObjectStore` wrapper. Each method goes
 * to `inner` with the same arguments and signal, results and errors untouched;
 * a wrapper overrides only what it changes. Every call passes through
 * `intercept(operation, key, signal, proceed)`, so a wrapper that acts on all
 * calls (counting, faults, timing) overrides that alone and misses no method,
 * even one added later. `listPages` goes through `listPages(inner, …)` and
 * reaches `intercept` once per step (a page is a request); `deleteMany` goes
 * through `deleteKeys(inner, …)` and reaches it once, with the first key. A
 * wrapper that changes what `list` returns must change `listPages` too, and
 * one that changes keys must change `deleteMany`.
 */
import { deleteKeys } from './delete-keys.ts';
import { listPages } from './list-pages.ts';
import type {
  CallOptions,
  DeleteManyResult,
  DeleteOptions,
  GetResult,
  GetStreamResult,
  ListOptions,
  ListPage,
  ListPagesOptions,
  ListResult,
  ObjectInfo,
  ObjectStore,
  ObjectVersion,
  PutOptions,
  StoreCapabilities,
  UploadOptions,
  UploadSource,
} from './object-store.ts';

/** The name of a method of `ObjectStore`. */
export type StoreOperation = {
  [Name in keyof ObjectStore]-?: NonNullable<ObjectStore[Name]> extends (
    ...args: never[]
  ) => unknown
    ? Name
    : never;
}[keyof ObjectStore];

/**
 * Every method of `ObjectStore`, in the interface's order. The type below
 * fails to compile when the interface gains a method this list lacks.
 */
export const STORE_OPERATIONS = [
  'get',
  'getStream',
  'head',
  'put',
  'delete',
  'list',
  'listPages',
  'deleteMany',
  'upload',
] as const satisfies readonly StoreOperation[];

type MissingOperations = Exclude<StoreOperation, (typeof STORE_OPERATIONS)[number]>;
// A compile-time check: `never` unless an operation is missing from the list.
const everyOperationListed: [MissingOperations] extends [never] ? true : MissingOperations = true;
void everyOperationListed;

/** What a wrapper declares instead of the inner store's. */
export interface ForwardingStoreOptions {
  readonly description?: string;
  readonly capabilities?: StoreCapabilities;
}

export class ForwardingStore implements ObjectStore {
  /** The wrapped store. */
  readonly inner: ObjectStore;
  /** The inner store's, unless the constructor was given another. */
  readonly description: string;
  /** The inner store's (wrappers pass them through), unless the constructor was given others. */
  readonly capabilities: StoreCapabilities;

  constructor(inner: ObjectStore, own: ForwardingStoreOptions = {}) {
    this.inner = inner;
    this.description = own.description ?? inner.description;
    this.capabilities = own.capabilities ?? inner.capabilities;
  }

  /**
   * Every forwarded call passes through here: `key` is the key (the prefix
   * for `list` and `listPages`), `signal` the call's. The default calls
   * `proceed()`, which calls the inner store; an override may act before or
   * after, replace the result, throw instead, or call `proceed` more than
   * once.
   */
  protected intercept<T>(
    _operation: StoreOperation,
    _key: string,
    _signal: AbortSignal | undefined,
    proceed: () => Promise<T>,
  ): Promise<T> {
    return proceed();
  }

  get(key: string, options?: CallOptions): Promise<GetResult | null> {
    return this.intercept('get', key, options?.signal, () => this.inner.get(key, options));
  }

  getStream(key: string, options?: CallOptions): Promise<GetStreamResult | null> {
    return this.intercept('getStream', key, options?.signal, () =>
      this.inner.getStream(key, options),
    );
  }

  head(key: string, options?: CallOptions): Promise<ObjectInfo | null> {
    return this.intercept('head', key, options?.signal, () => this.inner.head(key, options));
  }

  put(key: string, body: Uint8Array, options?: PutOptions): Promise<{ version: ObjectVersion }> {
    return this.intercept('put', key, options?.signal, () => this.inner.put(key, body, options));
  }

  delete(key: string, options?: DeleteOptions): Promise<void> {
    return this.intercept('delete', key, options?.signal, () => this.inner.delete(key, options));
  }

  list(prefix: string, options?: ListOptions): Promise<ListResult> {
    return this.intercept('list', prefix, options?.signal, () => this.inner.list(prefix, options));
  }

  async *listPages(prefix: string, options?: ListPagesOptions): AsyncIterable<ListPage> {
    const pages = listPages(this.inner, prefix, options)[Symbol.asyncIterator]();
    let finished = false;
    try {
      for (;;) {
        const next = await this.intercept('listPages', prefix, options?.signal, () => pages.next());
        if (next.done) {
          finished = true;
          return;
        }
        yield next.value;
      }
    } finally {
      // Stopped early (break, or an error here): let the inner listing release what it holds.
      if (!finished) await pages.return?.();
    }
  }

  deleteMany(keys: readonly string[], options?: CallOptions): Promise<DeleteManyResult> {
    return this.intercept('deleteMany', keys[0] ?? '', options?.signal, () =>
      deleteKeys(this.inner, keys, options),
    );
  }

  upload(
    key: string,
    source: UploadSource,
    options?: UploadOptions,
  ): Promise<{ version: ObjectVersion; size: number }> {
    return this.intercept('upload', key, options?.signal, () =>
      this.inner.upload(key, source, options),
    );
  }
}
