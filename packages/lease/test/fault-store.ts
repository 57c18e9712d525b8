/**
 * A store wrapper that misbehaves on request, to prove the lease notices:
 * - `lostResponses`: the next N puts are applied, then the call throws a
 *   timeout (the answer was lost on the way back);
 * - `failPuts`: the next N puts throw a transport error without applying;
 * - `acceptStaleIfMatch`: replace-if-version is applied unconditionally;
 * - `acceptSecondCreate`: create-if-absent is applied unconditionally;
 * - `noVersion`: puts answer without a version;
 * - `checkThenWriteIfMatch`: replace-if-version checks the version, waits,
 *   then writes (refuses one request at a time, lets a burst through);
 * - `notImplemented`: conditional puts of that kind throw `NotImplementedError`;
 * - `beforePut`: a hook awaited before each put (races, gates, slow answers).
 *
 * Every other method (`listPages` included) is `ForwardingStore`'s: passed
 * to the inner store untouched.
 */
import {
  NotImplementedError,
  type ObjectStore,
  type ObjectVersion,
  PreconditionFailedError,
  type PutMode,
  type PutOptions,
  StoreError,
} from '@x/store';
import { ForwardingStore } from '@x/store/adapter';

export interface Faults {
  lostResponses?: number;
  failPuts?: number;
  acceptStaleIfMatch?: boolean;
  acceptSecondCreate?: boolean;
  noVersion?: boolean;
  checkThenWriteIfMatch?: boolean;
  notImplemented?: 'create' | 'ifMatch' | 'both';
  beforePut?: (key: string, mode: PutMode, signal?: AbortSignal) => Promise<void> | void;
}

export class FaultStore extends ForwardingStore {
  faults: Faults;
  /** Every put attempted through the wrapper, in order. */
  readonly puts: { key: string; mode: PutMode }[] = [];

  constructor(inner: ObjectStore, faults: Faults = {}) {
    super(inner, { description: `faulty(${inner.description})` });
    this.faults = faults;
  }

  override async put(
    key: string,
    body: Uint8Array,
    options: PutOptions = {},
  ): Promise<{ version: ObjectVersion }> {
    const requested = options.mode ?? 'overwrite';
    this.puts.push({ key, mode: requested });
    await this.faults.beforePut?.(key, requested, options.signal);
    const faults = this.faults;
    if (faults.failPuts && faults.failPuts > 0) {
      faults.failPuts -= 1;
      throw new StoreError(`injected transport failure for ${key}`, { key });
    }
    const conditionalKind =
      requested === 'create' ? 'create' : typeof requested === 'object' ? 'ifMatch' : undefined;
    if (
      conditionalKind &&
      (faults.notImplemented === 'both' || faults.notImplemented === conditionalKind)
    )
      throw new NotImplementedError(`put with ${conditionalKind}`);
    let mode: PutMode = requested;
    if (faults.acceptStaleIfMatch && typeof requested === 'object') mode = 'overwrite';
    if (faults.checkThenWriteIfMatch && typeof requested === 'object') {
      const current = (await this.head(key, options))?.version;
      const wanted = requested.ifMatch;
      if (current?.etag !== wanted.etag || current?.generation !== wanted.generation)
        throw new PreconditionFailedError(key, { detail: 'not at the version named' });
      await new Promise((resolve) => setTimeout(resolve, 20));
      mode = 'overwrite';
    }
    if (faults.acceptSecondCreate && requested === 'create') mode = 'overwrite';
    const result = await super.put(key, body, { ...options, mode });
    if (faults.lostResponses && faults.lostResponses > 0) {
      faults.lostResponses -= 1;
      throw new DOMException(`injected timeout after the write of ${key} landed`, 'TimeoutError');
    }
    if (faults.noVersion) return { version: {} };
    return result;
  }
}
