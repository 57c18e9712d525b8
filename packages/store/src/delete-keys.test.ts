import { describe, expect, it } from 'vitest';
import { deleteKeys } from './delete-keys.ts';
import { InvalidKeyError, StoreError } from './errors.ts';
import { MemoryStore } from './memory-store.ts';
import type { ObjectStore } from './object-store.ts';
import { PrefixedStore } from './prefixed-store.ts';

const bytes = new Uint8Array([1]);

async function storeWith(keys: readonly string[]): Promise<MemoryStore> {
  const store = new MemoryStore();
  for (const key of keys) await store.put(key, bytes);
  return store;
}

async function keysOf(store: ObjectStore): Promise<string[]> {
  return (await store.list('')).objects.map((info) => info.key);
}

/** `inner` without `deleteMany`, and whose `delete` fails for the keys in `refused`. */
function singleDeletesOnly(inner: MemoryStore, refused: ReadonlySet<string>, calls: string[]) {
  const store: ObjectStore = {
    description: inner.description,
    capabilities: inner.capabilities,
    get: (key, options) => inner.get(key, options),
    getStream: (key, options) => inner.getStream(key, options),
    head: (key, options) => inner.head(key, options),
    put: (key, body, options) => inner.put(key, body, options),
    delete: async (key, options) => {
      calls.push(key);
      if (refused.has(key)) throw new StoreError(`refused ${key}`, { key });
      await inner.delete(key, options);
    },
    list: (prefix, options) => inner.list(prefix, options),
    upload: (key, source, options) => inner.upload(key, source, options),
  };
  return store;
}

describe('deleteKeys', () => {
  it("uses the store's deleteMany: every key gone, a missing key no failure, others kept", async () => {
    const store = await storeWith(['a', 'b', 'c', 'keep']);
    expect(await deleteKeys(store, ['a', 'b', 'c', 'never-written'])).toEqual({ failed: [] });
    expect(await keysOf(store)).toEqual(['keep']);
  });

  it('falls back to one delete per key and reports each failure by key, in key order', async () => {
    const inner = await storeWith(['k1', 'k2', 'k3', 'k4', 'k5', 'k6', 'k7', 'k8', 'k9', 'k10']);
    const calls: string[] = [];
    const store = singleDeletesOnly(inner, new Set(['k9', 'k2']), calls);
    const keys = ['k1', 'k2', 'k3', 'k4', 'k5', 'k6', 'k7', 'k8', 'k9', 'k10'];
    const { failed } = await deleteKeys(store, keys);
    expect(failed.map((failure) => failure.key)).toEqual(['k2', 'k9']);
    expect(failed.every((failure) => StoreError.isInstance(failure.error))).toBe(true);
    expect(await keysOf(inner)).toEqual(['k2', 'k9']);
    expect([...calls].sort()).toEqual([...keys].sort());
  });

  it('refuses a bad key before deleting anything, on either path', async () => {
    const store = await storeWith(['a']);
    await expect(deleteKeys(store, ['a', '../b'])).rejects.toBeInstanceOf(InvalidKeyError);
    const calls: string[] = [];
    await expect(
      deleteKeys(singleDeletesOnly(store, new Set(), calls), ['a', '']),
    ).rejects.toBeInstanceOf(InvalidKeyError);
    expect(calls).toEqual([]);
    expect(await keysOf(store)).toEqual(['a']);
  });

  it('sends nothing for no keys and rejects at once when aborted', async () => {
    const calls: string[] = [];
    const store = singleDeletesOnly(await storeWith(['a']), new Set(), calls);
    expect(await deleteKeys(store, [])).toEqual({ failed: [] });
    const aborted = AbortSignal.abort(new Error('stop'));
    await expect(deleteKeys(store, ['a'], { signal: aborted })).rejects.toThrow('stop');
    expect(calls).toEqual([]);
  });

  it('through a PrefixedStore: deletes only under the prefix and names failures by the inner key', async () => {
    const inner = await storeWith(['tenant/a', 'tenant/b', 'a', 'other/b']);
    expect(await deleteKeys(new PrefixedStore(inner, 'tenant'), ['a', 'b'])).toEqual({
      failed: [],
    });
    expect(await keysOf(inner)).toEqual(['a', 'other/b']);

    const calls: string[] = [];
    const refusing = singleDeletesOnly(await storeWith(['t/x', 't/y']), new Set(['t/y']), calls);
    const { failed } = await deleteKeys(new PrefixedStore(refusing, 't'), ['x', 'y']);
    expect(failed.map((failure) => failure.key)).toEqual(['y']);
  });
});
