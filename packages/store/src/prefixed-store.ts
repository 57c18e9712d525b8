/**
 * Confines a store to a prefix: every key the caller passes is placed under
 * `prefix/`, and every key the store returns has it removed.
 *
 * Guarantee: no call through a `PrefixedStore` reads, writes, lists or
 * deletes a key outside `prefix/` — keys are validated first, and `..`
 * segments are refused, so a key cannot climb out. A `list("")` lists the
 * prefix only.
 */
import { ForwardingStore } from './forwarding-store.ts';
import { joinKey, normalizePrefix, validateKey } from './keys.ts';
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
  UploadOptions,
  UploadSource,
} from './object-store.ts';

/** Validates `prefix` before anything else is built from it. */
function confinedPrefix(prefix: string): string {
  const normalized = normalizePrefix(prefix);
  if (normalized === '') {
    // An empty prefix would confine nothing; say so instead of passing through silently.
    validateKey(prefix);
  }
  return normalized;
}

export class PrefixedStore extends ForwardingStore {
  readonly prefix: string;

  /** @throws InvalidKeyError when `prefix` is empty or not a valid key. */
  constructor(inner: ObjectStore, prefix: string) {
    const normalized = confinedPrefix(prefix);
    super(inner, { description: `${inner.description}/${normalized}` });
    this.prefix = normalized;
  }

  #outer(key: string): string {
    validateKey(key);
    return joinKey(this.prefix, key);
  }

  #inner(info: ObjectInfo): ObjectInfo {
    return { ...info, key: info.key.slice(this.prefix.length + 1) };
  }

  #page(page: ListPage): ListPage {
    const strip = this.prefix.length + 1;
    return {
      objects: page.objects.map((info) => this.#inner(info)),
      commonPrefixes: page.commonPrefixes.map((rolled) => rolled.slice(strip)),
    };
  }

  override async get(key: string, options?: CallOptions): Promise<GetResult | null> {
    const result = await super.get(this.#outer(key), options);
    return result ? { ...result, key } : null;
  }

  override async getStream(key: string, options?: CallOptions): Promise<GetStreamResult | null> {
    const result = await super.getStream(this.#outer(key), options);
    return result ? { ...result, key } : null;
  }

  override async head(key: string, options?: CallOptions): Promise<ObjectInfo | null> {
    const result = await super.head(this.#outer(key), options);
    return result ? { ...result, key } : null;
  }

  override put(
    key: string,
    body: Uint8Array,
    options?: PutOptions,
  ): Promise<{ version: ObjectVersion }> {
    return super.put(this.#outer(key), body, options);
  }

  override delete(key: string, options?: DeleteOptions): Promise<void> {
    return super.delete(this.#outer(key), options);
  }

  override async deleteMany(
    keys: readonly string[],
    options?: CallOptions,
  ): Promise<DeleteManyResult> {
    const strip = this.prefix.length + 1;
    const { failed } = await super.deleteMany(
      keys.map((key) => this.#outer(key)),
      options,
    );
    return { failed: failed.map((failure) => ({ ...failure, key: failure.key.slice(strip) })) };
  }

  override async list(prefix: string, options?: ListOptions): Promise<ListResult> {
    return this.#page(await super.list(`${this.prefix}/${prefix}`, options));
  }

  override async *listPages(prefix: string, options?: ListPagesOptions): AsyncIterable<ListPage> {
    for await (const page of super.listPages(`${this.prefix}/${prefix}`, options)) {
      yield this.#page(page);
    }
  }

  override upload(
    key: string,
    source: UploadSource,
    options?: UploadOptions,
  ): Promise<{ version: ObjectVersion; size: number }> {
    return super.upload(this.#outer(key), source, options);
  }
}
