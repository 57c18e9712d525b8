import { describe, expect, it } from 'vitest';
import { MemoryStore } from './memory-store.ts';
import type { ObjectStore, StoreCapabilities } from './object-store.ts';
import { PrefixedStore } from './prefixed-store.ts';

describe('PrefixedStore', () => {
  it("passes the inner store's capabilities through, distinctVersions included", () => {
    const declared: StoreCapabilities = {
      conditionalPut: true,
      conditionalDelete: false,
      multipartCreate: true,
      distinctVersions: false,
    };
    // An S3-like inner store whose versions are content hashes.
    const inner = new Proxy(new MemoryStore(), {
      get: (target, property) =>
        property === 'capabilities' ? declared : Reflect.get(target, property, target),
    }) as ObjectStore;
    expect(new PrefixedStore(inner, 'tenant').capabilities).toEqual(declared);
    expect(new PrefixedStore(new MemoryStore(), 'tenant').capabilities.distinctVersions).toBe(true);
  });
});
