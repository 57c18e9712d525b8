/**
 * Counts requests and bytes by operation for /metrics, without changing what
 * the wrapped store does. A failed call counts as a request and as an error of
 * its operation; bytes count what was actually sent or received.
 *
 * Built on `ForwardingStore`: every call passes `intercept`, which counts it,
 * so no method (and none added later) goes uncounted. `getStream` counts as
 * `get`; `listPages` counts as `list`, one request per step of the iteration
 * (each page, and the step that ends the listing), as `ForwardingStore`
 * hands them to `intercept`; a batch delete (`deleteMany`) counts as one
 * `delete` request per call.
 */
import type {
  CallOptions,
  GetResult,
  GetStreamResult,
  ObjectStore,
  ObjectVersion,
  PutOptions,
  UploadOptions,
  UploadSource,
} from '@x/store';
import { ForwardingStore, type StoreOperation } from '@x/store/adapter';

export type Operation = 'get' | 'head' | 'put' | 'delete' | 'list' | 'upload';
export const OPERATIONS: readonly Operation[] = ['get', 'head', 'put', 'delete', 'list', 'upload'];

/** The counter each method of the store counts under. */
const COUNTED_AS: Record<StoreOperation, Operation> = {
  get: 'get',
  getStream: 'get',
  head: 'head',
  put: 'put',
  delete: 'delete',
  list: 'list',
  listPages: 'list',
  deleteMany: 'delete',
  upload: 'upload',
};

export interface OperationCounters {
  requests: number;
  errors: number;
  bytesIn: number;
  bytesOut: number;
}

export class InstrumentedStore extends ForwardingStore {
  readonly counters: Record<Operation, OperationCounters>;

  /** `counters`: another store's, to count both as one (a directory's databases). */
  constructor(inner: ObjectStore, counters?: Record<Operation, OperationCounters>) {
    super(inner);
    this.counters =
      counters ??
      (Object.fromEntries(
        OPERATIONS.map((operation) => [
          operation,
          { requests: 0, errors: 0, bytesIn: 0, bytesOut: 0 },
        ]),
      ) as Record<Operation, OperationCounters>);
  }

  protected override async intercept<T>(
    operation: StoreOperation,
    _key: string,
    _signal: AbortSignal | undefined,
    proceed: () => Promise<T>,
  ): Promise<T> {
    const counters = this.counters[COUNTED_AS[operation]];
    counters.requests += 1;
    try {
      return await proceed();
    } catch (error) {
      counters.errors += 1;
      throw error;
    }
  }

  override async get(key: string, options?: CallOptions): Promise<GetResult | null> {
    const result = await super.get(key, options);
    if (result) this.counters.get.bytesIn += result.size;
    return result;
  }

  override async getStream(key: string, options?: CallOptions): Promise<GetStreamResult | null> {
    const result = await super.getStream(key, options);
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

  override async put(
    key: string,
    body: Uint8Array,
    options?: PutOptions,
  ): Promise<{ version: ObjectVersion }> {
    const result = await super.put(key, body, options);
    this.counters.put.bytesOut += body.byteLength;
    return result;
  }

  override async upload(
    key: string,
    source: UploadSource,
    options?: UploadOptions,
  ): Promise<{ version: ObjectVersion; size: number }> {
    const result = await super.upload(key, source, options);
    this.counters.upload.bytesOut += result.size;
    return result;
  }
}
