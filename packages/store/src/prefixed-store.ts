/**
 * Confines a store to a prefix: every key the caller passes is placed under
 * `prefix/`, and every key the store returns has it removed.
 *
 * Guarantee: no call through a `PrefixedStore` reads, writes, lists or
 * deletes a key outside `prefix/` — keys are validated first, and `..`
 * segments are refused, so a key cannot climb out. A `list("")` lists the
 * prefix only.
 */
import { joinKey, normalizePrefix, validateKey } from './keys.ts';
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
  StoreCapabilities,
  UploadOptions,
  UploadSource,
} from './object-store.ts';

export class PrefixedStore implements ObjectStore {
  readonly description: string;
  readonly capabilities: StoreCapabilities;
  readonly prefix: string;
  readonly inner: ObjectStore;

  /** @throws InvalidKeyError when `prefix` is empty or not a valid key. */
  constructor(inner: ObjectStore, prefix: string) {
    const normalized = normalizePrefix(prefix);
    if (normalized === '') {
      // An empty prefix would confine nothing; say so instead of passing through silently.
      validateKey(prefix);
    }
    this.inner = inner;
    this.prefix = normalized;
    this.capabilities = inner.capabilities;
    this.description = `${inner.description}/${normalized}`;
  }

  #outer(key: string): string {
    validateKey(key);
    return joinKey(this.prefix, key);
  }

  #inner(info: ObjectInfo): ObjectInfo {
    return { ...info, key: info.key.slice(this.prefix.length + 1) };
  }

  async get(key: string, options?: CallOptions): Promise<GetResult | null> {
    const result = await this.inner.get(this.#outer(key), options);
    return result ? { ...result, key } : null;
  }

  async getStream(key: string, options?: CallOptions): Promise<GetStreamResult | null> {
    const result = await this.inner.getStream(this.#outer(key), options);
    return result ? { ...result, key } : null;
  }

  async head(key: string, options?: CallOptions): Promise<ObjectInfo | null> {
    const result = await this.inner.head(this.#outer(key), options);
    return result ? { ...result, key } : null;
  }

  put(key: string, body: Uint8Array, options?: PutOptions): Promise<{ version: ObjectVersion }> {
    return this.inner.put(this.#outer(key), body, options);
  }

  delete(key: string, options?: DeleteOptions): Promise<void> {
    return this.inner.delete(this.#outer(key), options);
  }

  async list(prefix: string, options?: ListOptions): Promise<ListResult> {
    const result = await this.inner.list(`${this.prefix}/${prefix}`, options);
    const strip = this.prefix.length + 1;
    return {
      objects: result.objects.map((info) => this.#inner(info)),
      commonPrefixes: result.commonPrefixes.map((p) => p.slice(strip)),
    };
  }

  upload(
    key: string,
    source: UploadSource,
    options?: UploadOptions,
  ): Promise<{ version: ObjectVersion; size: number }> {
    return this.inner.upload(this.#outer(key), source, options);
  }
}
