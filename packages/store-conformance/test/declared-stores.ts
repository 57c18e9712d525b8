/**
 * MemoryStores that declare other capabilities than their own, for the
 * meta-tests and the fixture suites they run: an honest one refuses what it
 * declares absent with `NotImplementedError`; a lying one declares it absent
 * yet performs the write, ignoring the condition.
 */
import {
  MemoryStore,
  NotImplementedError,
  type ObjectStore,
  type PutOptions,
  type StoreCapabilities,
} from '@x/store';

/**
 * `inner` declaring no conditional put (and its own other capabilities):
 * `refuses` answers create and ifMatch with `NotImplementedError`, as the
 * interface requires; `accepts` writes them as plain overwrites.
 */
export function withoutConditionalPut(
  inner: MemoryStore,
  behaviour: 'refuses' | 'accepts',
): ObjectStore {
  const capabilities: StoreCapabilities = { ...inner.capabilities, conditionalPut: false };
  return new Proxy(inner, {
    get(target, property, receiver) {
      if (property === 'capabilities') return capabilities;
      if (property === 'put')
        return async (key: string, body: Uint8Array, options: PutOptions = {}) => {
          const mode = options.mode ?? 'overwrite';
          if (mode === 'overwrite') return target.put(key, body, options);
          if (behaviour === 'refuses')
            throw new NotImplementedError(mode === 'create' ? 'create' : 'ifMatch', { key });
          return target.put(key, body, { ...options, mode: 'overwrite' });
        };
      const value = Reflect.get(target, property, receiver);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

/** A MemoryStore with S3's content-hash versions (`distinctVersions: false`). */
export function contentHashStore(): MemoryStore {
  return new MemoryStore('s3-like', { versions: 'content-hash' });
}
