/**
 * The stores every scenario runs against, and a wrapper that counts requests
 * and can make the bucket stop answering.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  type CallOptions,
  type DeleteOptions,
  FsStore,
  type GetResult,
  type GetStreamResult,
  type ListOptions,
  type ListResult,
  MemoryStore,
  type ObjectInfo,
  type ObjectStore,
  type ObjectVersion,
  type PutOptions,
  type StoreCapabilities,
  type UploadOptions,
  type UploadSource,
} from '@x/store';

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

/**
 * Wraps a store: counts requests by operation, records LIST prefixes, and
 * when `hang` is set answers nothing (each request waits for its signal).
 * `onUploadChunk` runs for each chunk an upload pulls (to act mid-upload).
 */
export class CountingStore implements ObjectStore {
  readonly inner: ObjectStore;
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
    this.inner = inner;
  }

  get description(): string {
    return `counting(${this.inner.description})`;
  }

  get capabilities(): StoreCapabilities {
    return this.inner.capabilities;
  }

  #gate(signal: AbortSignal | undefined): Promise<never> | null {
    if (!this.hang) return null;
    return this.deaf ? new Promise<never>(() => {}) : never(signal);
  }

  async get(key: string, options?: CallOptions): Promise<GetResult | null> {
    this.counts.GET += 1;
    this.reads.push(`GET ${key}`);
    return (await this.#gate(options?.signal)) ?? this.inner.get(key, options);
  }

  async getStream(key: string, options?: CallOptions): Promise<GetStreamResult | null> {
    this.counts.GET += 1;
    return (await this.#gate(options?.signal)) ?? this.inner.getStream(key, options);
  }

  async head(key: string, options?: CallOptions): Promise<ObjectInfo | null> {
    this.counts.HEAD += 1;
    return (await this.#gate(options?.signal)) ?? this.inner.head(key, options);
  }

  async put(
    key: string,
    body: Uint8Array,
    options?: PutOptions,
  ): Promise<{ version: ObjectVersion }> {
    this.counts.PUT += 1;
    this.writes.push(`PUT ${key}`);
    return (await this.#gate(options?.signal)) ?? this.inner.put(key, body, options);
  }

  async delete(key: string, options?: DeleteOptions): Promise<void> {
    this.counts.DELETE += 1;
    this.writes.push(`DELETE ${key}`);
    return (await this.#gate(options?.signal)) ?? this.inner.delete(key, options);
  }

  async list(prefix: string, options?: ListOptions): Promise<ListResult> {
    this.counts.LIST += 1;
    this.listPrefixes.push(prefix);
    return (await this.#gate(options?.signal)) ?? this.inner.list(prefix, options);
  }

  async upload(
    key: string,
    source: UploadSource,
    options?: UploadOptions,
  ): Promise<{ version: ObjectVersion; size: number }> {
    this.counts.UPLOAD += 1;
    this.writes.push(`UPLOAD ${key}`);
    const gate = this.#gate(options?.signal);
    if (gate) return gate;
    const hook = this.onUploadChunk;
    const signal = options?.signal;
    const aborted = this.abortedUploads;
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
    try {
      return await this.inner.upload(key, watched(), options);
    } catch (error) {
      if (signal?.aborted) aborted.push(key);
      throw error;
    }
  }
}
