/**
 * `ForwardingStore`: the base of every `ObjectStore` wrapper. It forwards
 * each method of the interface to `inner`, with the same arguments and the
 * same signal, and passes results and errors back untouched; a wrapper
 * overrides only what it changes. Every forwarded call goes through one
 * hook, `intercept(operation, key, signal, proceed)`, so a wrapper that acts
 * on every call (counting, injecting faults, timing) overrides that alone
 * and cannot miss a method — also one added to the interface later.
 *
 * `listPages` is forwarded through `listPages(inner, …)` (so an inner store
 * without it still lists, as one page), and `intercept` sees each step of
 * the iteration separately, as operation `listPages` — each page, and the
 * step that ends the listing — since a page is a request to the service. A wrapper that overrides `list` to change what it returns
 * must override `listPages` too; `STORE_OPERATIONS` names every method, for
 * tests that check a wrapper forwards them all.
 */
import { listPages } from './list-pages.ts';
import type {
  CallOptions,
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
