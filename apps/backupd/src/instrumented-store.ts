/**
 * Counts requests and bytes by operation for /metrics, without changing what
 * the wrapped store does. A failed call counts as a request and as an error of
 * its operation; bytes count what was actually sent or received.
 */
import type {
  CallOptions,
  DeleteOptions,
  GetResult,
  GetStreamResult,
  ListOptions,
  ListResult,
  ObjectInfo,
  ObjectStore,
  ObjectVersion,
  PutOptions,
  UploadOptions,
  UploadSource,
} from '@x/store';

export type Operation = 'get' | 'head' | 'put' | 'delete' | 'list' | 'upload';
export const OPERATIONS: readonly Operation[] = ['get', 'head', 'put', 'delete', 'list', 'upload'];

export interface OperationCounters {
  requests: number;
  errors: number;
  bytesIn: number;
  bytesOut: number;
}

export class InstrumentedStore implements ObjectStore {
  readonly inner: ObjectStore;
  readonly counters: Record<Operation, OperationCounters>;

  constructor(inner: ObjectStore) {
    this.inner = inner;
    this.counters = Object.fromEntries(
      OPERATIONS.map((operation) => [
        operation,
        { requests: 0, errors: 0, bytesIn: 0, bytesOut: 0 },
      ]),
    ) as Record<Operation, OperationCounters>;
  }

  get description(): string {
    return this.inner.description;
  }

  get capabilities() {
    return this.inner.capabilities;
  }

  async #count<T>(operation: Operation, call: () => Promise<T>): Promise<T> {
    this.counters[operation].requests += 1;
    try {
      return await call();
    } catch (error) {
      this.counters[operation].errors += 1;
      throw error;
    }
  }

  async get(key: string, options?: CallOptions): Promise<GetResult | null> {
    const result = await this.#count('get', () => this.inner.get(key, options));
    if (result) this.counters.get.bytesIn += result.size;
    return result;
  }

  async getStream(key: string, options?: CallOptions): Promise<GetStreamResult | null> {
    const result = await this.#count('get', () => this.inner.getStream(key, options));
    if (!result) return null;
    const counters = this.counters.get;
    const body = result.body;
    async function* counted(): AsyncIterable<Uint8Array> {
      for await (const chunk of body) {
        counters.bytesIn += chunk.byteLength;
        yield chunk;
      }
    }
    return { ...result, body: counted() };
  }

  head(key: string, options?: CallOptions): Promise<ObjectInfo | null> {
    return this.#count('head', () => this.inner.head(key, options));
  }

  async put(
    key: string,
    body: Uint8Array,
    options?: PutOptions,
  ): Promise<{ version: ObjectVersion }> {
    const result = await this.#count('put', () => this.inner.put(key, body, options));
    this.counters.put.bytesOut += body.byteLength;
    return result;
  }

  delete(key: string, options?: DeleteOptions): Promise<void> {
    return this.#count('delete', () => this.inner.delete(key, options));
  }

  list(prefix: string, options?: ListOptions): Promise<ListResult> {
    return this.#count('list', () => this.inner.list(prefix, options));
  }

  async upload(
    key: string,
    source: UploadSource,
    options?: UploadOptions,
  ): Promise<{ version: ObjectVersion; size: number }> {
    const result = await this.#count('upload', () => this.inner.upload(key, source, options));
    this.counters.upload.bytesOut += result.size;
    return result;
  }
}
