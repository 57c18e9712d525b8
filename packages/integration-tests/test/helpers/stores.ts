/**
 * The stores every scenario runs against, and a wrapper that counts requests
 * and can make the bucket stop answering.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  FsStore,
  MemoryStore,
  type ObjectStore,
  type ObjectVersion,
  type UploadOptions,
  type UploadSource,
} from '@x/store';
import { ForwardingStore, type StoreOperation } from '@x/store/adapter';

export interface StoreCase {
  readonly name: string;
  /** Run the crash-at-every-write loop for every n (local stores) or a sample. */
  readonly exhaustive: boolean;
  open(): Promise<{ store: ObjectStore; prefix: string; close(): Promise<void> }>;
}

let counter = 0;

export function localStoreCases(): StoreCase[] {
  return [
    {
      name: 'MemoryStore',
      exhaustive: true,
      async open() {
        return { store: new MemoryStore(), prefix: 'backups/db', close: async () => {} };
      },
    },
    {
      name: 'FsStore',
      exhaustive: true,
      async open() {
        const root = await mkdtemp(join(tmpdir(), 'backup-worker-fs-'));
        return {
          store: new FsStore({ root }),
          prefix: `backups/db${counter++}`,
          close: () => rm(root, { recursive: true, force: true }),
        };
      },
    },
  ];
}

export type Operation = 'PUT' | 'GET' | 'HEAD' | 'LIST' | 'DELETE' | 'UPLOAD';

/** Resolves when `signal` aborts (never without one). */
export function untilAborted(signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    if (!signal) return;
    if (signal.aborted) resolve();
    signal.addEventListener('abort', () => resolve(), { once: true });
  });
}

/** Waits until `signal` aborts, then rejects with its reason: a request the bucket never answers. */
function never(signal: AbortSignal | undefined): Promise<never> {
  return new Promise((_, reject) => {
    if (!signal) return;
    if (signal.aborted) reject(signal.reason);
    signal.addEventListener('abort', () => reject(signal.reason), { once: true });
  });
}

/** How a forwarded call is counted (`getStream` is a GET; `listPages` a LIST per page; a batch delete one DELETE). */
const COUNTED_AS: Record<StoreOperation, Operation> = {
  get: 'GET',
  getStream: 'GET',
  head: 'HEAD',
  put: 'PUT',
  delete: 'DELETE',
  list: 'LIST',
  listPages: 'LIST',
  deleteMany: 'DELETE',
  upload: 'UPLOAD',
};

/**
 * Wraps a store: counts requests by operation, records LIST prefixes, and
 * when `hang` is set answers nothing (each request waits for its signal).
 * `onUploadChunk` runs for each chunk an upload pulls (to act mid-upload).
 * A paged listing counts one LIST per page it returns, as a service would
 * see one request per page.
 */
export class CountingStore extends ForwardingStore {
  readonly counts: Record<Operation, number> = {
    PUT: 0,
    GET: 0,
    HEAD: 0,
    LIST: 0,
    DELETE: 0,
    UPLOAD: 0,
  };
  readonly listPrefixes: string[] = [];
  readonly writes: string[] = [];
  readonly reads: string[] = [];
  hang = false;
  /** Requests that honour no signal at all (never settle), when set with `hang`. */
  deaf = false;
  onUploadChunk:
    | ((key: string, index: number, signal: AbortSignal | undefined) => Promise<void> | void)
    | null = null;
  abortedUploads: string[] = [];

  constructor(inner: ObjectStore) {
    super(inner, { description: `counting(${inner.description})` });
  }

  #count(operation: StoreOperation, key: string): void {
    const counted = COUNTED_AS[operation];
    this.counts[counted] += 1;
    if (counted === 'LIST') this.listPrefixes.push(key);
    else if (operation === 'get') this.reads.push(`GET ${key}`);
    else if (counted === 'PUT' || counted === 'DELETE' || counted === 'UPLOAD')
      this.writes.push(`${counted} ${key}`);
  }

  #gate(signal: AbortSignal | undefined): Promise<never> | null {
    if (!this.hang) return null;
    return this.deaf ? new Promise<never>(() => {}) : never(signal);
  }

  protected override async intercept<T>(
    operation: StoreOperation,
    key: string,
    signal: AbortSignal | undefined,
    proceed: () => Promise<T>,
  ): Promise<T> {
    // A page step is counted once it brings a page (the step that finds the
    // listing finished sends no request).
    if (operation !== 'listPages') this.#count(operation, key);
    const gate = this.#gate(signal);
    if (gate) return gate;
    const result = await proceed();
    if (operation === 'listPages' && !(result as IteratorResult<unknown>).done)
      this.#count(operation, key);
    return result;
  }

  override upload(
    key: string,
    source: UploadSource,
    options?: UploadOptions,
  ): Promise<{ version: ObjectVersion; size: number }> {
    const hook = this.onUploadChunk;
    const signal = options?.signal;
    async function* watched(): AsyncIterable<Uint8Array> {
      let index = 0;
      const chunks = source instanceof Uint8Array ? [source] : source;
      for await (const chunk of chunks) {
        if (hook) await hook(key, index, signal);
        index += 1;
        signal?.throwIfAborted();
        yield chunk;
      }
    }
    return this.intercept('upload', key, signal, async () => {
      try {
        return await this.inner.upload(key, watched(), options);
      } catch (error) {
        if (signal?.aborted) this.abortedUploads.push(key);
        throw error;
      }
    });
  }
}
