import { describe, expect, it } from 'vitest';
import { ForwardingStore, STORE_OPERATIONS, type StoreOperation } from './forwarding-store.ts';
import { MemoryStore } from './memory-store.ts';
import type {
  CallOptions,
  DeleteManyResult,
  GetResult,
  ListOptions,
  ListPage,
  ListPagesOptions,
  ListResult,
  ObjectInfo,
  ObjectStore,
  ObjectVersion,
  StoreCapabilities,
} from './object-store.ts';
import { PrefixedStore } from './prefixed-store.ts';

interface RecordedCall {
  readonly operation: StoreOperation;
  readonly key: string;
  readonly signal: AbortSignal | undefined;
  readonly args: readonly unknown[];
}

const CAPABILITIES: StoreCapabilities = {
  conditionalPut: true,
  conditionalDelete: false,
  multipartCreate: true,
  distinctVersions: false,
};

const PAGES: readonly ListPage[] = [
  { objects: [{ key: 'a', size: 1, version: { etag: '"1"' } }], commonPrefixes: [] },
  { objects: [{ key: 'b', size: 2, version: { etag: '"2"' } }], commonPrefixes: ['c/'] },
];

/** Records every call; answers each operation with its own sentinel, or throws `failure`. */
class RecordingStore implements ObjectStore {
  readonly description = 'recording://inner';
  readonly capabilities = CAPABILITIES;
  readonly calls: RecordedCall[] = [];
  readonly results = new Map<StoreOperation, unknown>(
    STORE_OPERATIONS.map((operation) => [
      operation,
      // Each answer its own object; list's and deleteMany's also valid, for wrappers that map them.
      operation === 'list'
        ? { objects: [], commonPrefixes: [] }
        : operation === 'deleteMany'
          ? { failed: [] }
          : { answerOf: operation },
    ]),
  );
  pagesClosed = false;
  readonly failure: Error | undefined;
  constructor(failure?: Error) {
    this.failure = failure;
  }

  #answer<T>(operation: StoreOperation, key: string, args: unknown[], options?: CallOptions): T {
    this.calls.push({ operation, key, signal: options?.signal, args });
    if (this.failure) throw this.failure;
    return this.results.get(operation) as T;
  }
  async get(key: string, options?: CallOptions) {
    return this.#answer<GetResult>('get', key, [options], options);
  }
  async getStream(key: string, options?: CallOptions) {
    return this.#answer<null>('getStream', key, [options], options);
  }
  async head(key: string, options?: CallOptions) {
    return this.#answer<ObjectInfo>('head', key, [options], options);
  }
  async put(key: string, body: Uint8Array, options?: CallOptions) {
    return this.#answer<{ version: ObjectVersion }>('put', key, [body, options], options);
  }
  async delete(key: string, options?: CallOptions) {
    this.#answer<void>('delete', key, [options], options);
  }
  async list(prefix: string, options?: ListOptions) {
    return this.#answer<ListResult>('list', prefix, [options], options);
  }
  async deleteMany(keys: readonly string[], options?: CallOptions) {
    return this.#answer<DeleteManyResult>('deleteMany', keys[0] ?? '', [keys, options], options);
  }
  async *listPages(prefix: string, options?: ListPagesOptions): AsyncIterable<ListPage> {
    this.#answer<void>('listPages', prefix, [options], options);
    try {
      yield* PAGES;
    } finally {
      this.pagesClosed = true;
    }
  }
  async upload(key: string, source: unknown, options?: CallOptions) {
    return this.#answer<{ version: ObjectVersion; size: number }>(
      'upload',
      key,
      [source, options],
      options,
    );
  }
}

/** Calls `operation` on `store` the way a caller would; listPages is iterated to the end. */
async function call(
  store: ObjectStore,
  operation: StoreOperation,
  key: string,
  signal: AbortSignal,
): Promise<unknown> {
  const body = new Uint8Array([1, 2, 3]);
  switch (operation) {
    case 'get':
      return store.get(key, { signal });
    case 'getStream':
      return store.getStream(key, { signal });
    case 'head':
      return store.head(key, { signal });
    case 'put':
      return store.put(key, body, { signal, mode: 'create' });
    case 'delete':
      return store.delete(key, { signal });
    case 'list':
      return store.list(key, { signal, delimiter: '/' });
    case 'listPages': {
      if (!store.listPages) throw new Error('the wrapper has no listPages');
      const pages: ListPage[] = [];
      for await (const page of store.listPages(key, { signal, pageSize: 7 })) pages.push(page);
      return pages;
    }
    case 'deleteMany':
      if (!store.deleteMany) throw new Error('the wrapper has no deleteMany');
      return store.deleteMany([key], { signal });
    case 'upload':
      return store.upload(key, body, { signal, partSize: 5 });
  }
}

/**
 * The operations a wrapper does not forward faithfully: the inner store must
 * see exactly one call of the same operation, with `expectedKey(key)` and
 * the caller's very signal and other arguments; with `sameResults`, the
 * caller must get the inner answer itself.
 */
async function unforwarded(
  wrap: (inner: ObjectStore) => ObjectStore,
  options: { expectedKey?: (key: string) => string; sameResults?: boolean } = {},
): Promise<StoreOperation[]> {
  const expectedKey = options.expectedKey ?? ((key: string) => key);
  const broken: StoreOperation[] = [];
  for (const operation of STORE_OPERATIONS) {
    const inner = new RecordingStore();
    const signal = new AbortController().signal;
    let result: unknown;
    try {
      result = await call(wrap(inner), operation, 'some/key', signal);
    } catch {
      broken.push(operation);
      continue;
    }
    const [only, ...more] = inner.calls;
    const innerOptions = only?.args.at(-1) as Record<string, unknown> | undefined;
    const faithful =
      more.length === 0 &&
      only?.operation === operation &&
      only.key === expectedKey('some/key') &&
      only.signal === signal &&
      (operation !== 'put' || innerOptions?.mode === 'create') &&
      (operation !== 'list' || innerOptions?.delimiter === '/') &&
      (operation !== 'listPages' || innerOptions?.pageSize === 7) &&
      (operation !== 'upload' || innerOptions?.partSize === 5) &&
      (operation !== 'deleteMany' || (only.args[0] as string[]).length === 1) &&
      (!options.sameResults ||
        (operation === 'listPages'
          ? JSON.stringify(result) === JSON.stringify(PAGES)
          : operation === 'delete' || result === inner.results.get(operation)));
    if (!faithful) broken.push(operation);
  }
  return broken;
}

describe('STORE_OPERATIONS', () => {
  it('names every method of a real store, and nothing else', () => {
    const store = new MemoryStore();
    const methods = Object.getOwnPropertyNames(Object.getPrototypeOf(store)).filter(
      (name) => name !== 'constructor' && typeof Reflect.get(store, name) === 'function',
    );
    expect([...STORE_OPERATIONS].sort()).toEqual(methods.sort());
  });
});

describe('ForwardingStore', () => {
  it('forwards every operation with its key, arguments and signal, and returns the inner answer', async () => {
    expect(await unforwarded((inner) => new ForwardingStore(inner), { sameResults: true })).toEqual(
      [],
    );
  });

  it("passes the inner store's description and capabilities through, unless given its own", () => {
    const inner = new RecordingStore();
    const plain = new ForwardingStore(inner);
    expect(plain.description).toBe('recording://inner');
    expect(plain.capabilities).toBe(CAPABILITIES);
    expect(plain.inner).toBe(inner);
    const own = new ForwardingStore(inner, {
      description: 'own',
      capabilities: { ...CAPABILITIES, distinctVersions: true },
    });
    expect(own.description).toBe('own');
    expect(own.capabilities.distinctVersions).toBe(true);
  });

  it('propagates every error of the inner store untouched', async () => {
    for (const operation of STORE_OPERATIONS) {
      const failure = new Error(`inner ${operation} failed`);
      const wrapper = new ForwardingStore(new RecordingStore(failure));
      await expect(
        call(wrapper, operation, 'k', new AbortController().signal),
        operation,
      ).rejects.toBe(failure);
    }
  });

  it('sends every call through intercept, one per page for listPages, and an interceptor can refuse a call before the inner store sees it', async () => {
    const seen: string[] = [];
    class Counting extends ForwardingStore {
      protected override intercept<T>(
        operation: StoreOperation,
        key: string,
        signal: AbortSignal | undefined,
        proceed: () => Promise<T>,
      ): Promise<T> {
        seen.push(`${operation} ${key} ${signal ? 'signal' : 'none'}`);
        if (key === 'refused') return Promise.reject(new Error(`refused ${operation}`));
        return proceed();
      }
    }
    const inner = new RecordingStore();
    const wrapper = new Counting(inner);
    for (const operation of STORE_OPERATIONS)
      await call(wrapper, operation, 'k', new AbortController().signal);
    // Two pages and the end of the listing: three page requests.
    expect(seen.filter((entry) => entry.startsWith('listPages'))).toHaveLength(3);
    expect(new Set(seen.map((entry) => entry.split(' ')[0]))).toEqual(new Set(STORE_OPERATIONS));
    expect(seen.every((entry) => entry.endsWith(' k signal'))).toBe(true);

    const before = inner.calls.length;
    for (const operation of STORE_OPERATIONS) {
      await expect(
        call(wrapper, operation, 'refused', new AbortController().signal),
      ).rejects.toThrow(`refused ${operation}`);
    }
    // Not one refused call reached the inner store (its listing never started).
    expect(inner.calls.length).toBe(before);
  });

  it('closes the inner listing when the caller stops early', async () => {
    const inner = new RecordingStore();
    for await (const page of new ForwardingStore(inner).listPages('', {})) {
      expect(page).toEqual(PAGES[0]);
      break;
    }
    expect(inner.pagesClosed).toBe(true);
  });

  it('lists an inner store without listPages as one page from its list', async () => {
    const inner = new MemoryStore();
    await inner.put('a/1', new Uint8Array([1]));
    await inner.put('a/2', new Uint8Array([2]));
    const withoutPages: ObjectStore = {
      description: inner.description,
      capabilities: inner.capabilities,
      get: (key, options) => inner.get(key, options),
      getStream: (key, options) => inner.getStream(key, options),
      head: (key, options) => inner.head(key, options),
      put: (key, body, options) => inner.put(key, body, options),
      delete: (key, options) => inner.delete(key, options),
      list: (prefix, options) => inner.list(prefix, options),
      upload: (key, source, options) => inner.upload(key, source, options),
    };
    const pages: ListPage[] = [];
    for await (const page of new ForwardingStore(withoutPages).listPages('a/', { pageSize: 1 }))
      pages.push(page);
    expect(pages.map((page) => page.objects.map((info) => info.key))).toEqual([['a/1', 'a/2']]);
  });
});

describe('PrefixedStore on ForwardingStore', () => {
  it('forwards every operation under its prefix, with the same signal and arguments', async () => {
    expect(
      await unforwarded((inner) => new PrefixedStore(inner, 'tenant'), {
        expectedKey: (key) => `tenant/${key}`,
      }),
    ).toEqual([]);
  });
});

describe('the forwarding check catches a wrapper that', () => {
  // A hand-written wrapper, the way wrappers were written before ForwardingStore.
  const handWritten = (
    inner: ObjectStore,
    flaw: 'head-to-get' | 'no-list-pages' | 'drops-put-signal',
  ) => {
    const store: ObjectStore = {
      description: inner.description,
      capabilities: inner.capabilities,
      get: (key, options) => inner.get(key, options),
      getStream: (key, options) => inner.getStream(key, options),
      head: (key, options) =>
        flaw === 'head-to-get' ? inner.get(key, options) : inner.head(key, options),
      put: (key, body, options) =>
        inner.put(key, body, flaw === 'drops-put-signal' ? { mode: options?.mode } : options),
      delete: (key, options) => inner.delete(key, options),
      list: (prefix, options) => inner.list(prefix, options),
      deleteMany: (keys, options) => inner.deleteMany!(keys, options),
      upload: (key, source, options) => inner.upload(key, source, options),
    };
    if (flaw !== 'no-list-pages')
      return {
        ...store,
        listPages: (prefix: string, options?: ListPagesOptions) =>
          inner.listPages!(prefix, options),
      };
    return store;
  };

  it('sends a method to the wrong inner method', async () => {
    expect(await unforwarded((inner) => handWritten(inner, 'head-to-get'))).toEqual(['head']);
  });

  it('forgets a method (listPages)', async () => {
    expect(await unforwarded((inner) => handWritten(inner, 'no-list-pages'))).toEqual([
      'listPages',
    ]);
  });

  it('drops the signal', async () => {
    expect(await unforwarded((inner) => handWritten(inner, 'drops-put-signal'))).toEqual(['put']);
  });

  it('changes the keys of list but not of listPages', async () => {
    class HalfPrefixed extends ForwardingStore {
      override list(prefix: string, options?: ListOptions): Promise<ListResult> {
        return super.list(`tenant/${prefix}`, options);
      }
      override get(key: string, options?: CallOptions) {
        return super.get(`tenant/${key}`, options);
      }
    }
    const broken = await unforwarded((inner) => new HalfPrefixed(inner), {
      expectedKey: (key) => `tenant/${key}`,
    });
    expect(broken).toContain('listPages');
    expect(broken).not.toContain('list');
    expect(broken).not.toContain('get');
  });
});
