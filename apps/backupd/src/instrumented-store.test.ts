import { type ListPage, MemoryStore, StoreError } from '@x/store';
import { describe, expect, it } from 'vitest';
import { InstrumentedStore } from './instrumented-store.ts';

async function filled(): Promise<MemoryStore> {
  const inner = new MemoryStore();
  for (const key of ['p/a', 'p/b', 'p/c']) await inner.put(key, new Uint8Array([1, 2]));
  return inner;
}

describe('InstrumentedStore', () => {
  it('counts requests, errors and bytes of each operation', async () => {
    const store = new InstrumentedStore(await filled());
    await store.put('p/d', new Uint8Array([1, 2, 3]));
    await store.get('p/a');
    const streamed = await store.getStream('p/b');
    for await (const _chunk of streamed?.body ?? []);
    await store.head('p/c');
    await store.list('p/');
    await store.delete('p/d');
    await store.upload('p/e', new Uint8Array([9]));
    await expect(store.put('p/a', new Uint8Array([1]), { mode: 'create' })).rejects.toThrow();
    expect(store.counters.get).toEqual({ requests: 2, errors: 0, bytesIn: 4, bytesOut: 0 });
    expect(store.counters.put).toEqual({ requests: 2, errors: 1, bytesIn: 0, bytesOut: 3 });
    expect(store.counters.upload).toEqual({ requests: 1, errors: 0, bytesIn: 0, bytesOut: 1 });
    expect(store.counters.head.requests).toBe(1);
    expect(store.counters.list.requests).toBe(1);
    expect(store.counters.delete.requests).toBe(1);
  });

  it('counts listPages as list: one request per step of the listing, its errors as errors', async () => {
    const inner = await filled();
    const store = new InstrumentedStore(inner);
    const pages: ListPage[] = [];
    for await (const page of store.listPages('p/', { pageSize: 2 })) pages.push(page);
    expect(pages.map((page) => page.objects.map((info) => info.key))).toEqual([
      ['p/a', 'p/b'],
      ['p/c'],
    ]);
    // Two pages and the step that ends the listing.
    expect(store.counters.list).toEqual({ requests: 3, errors: 0, bytesIn: 0, bytesOut: 0 });

    inner.listPages = async function* () {
      yield* [];
      throw new StoreError('list refused');
    };
    await expect(async () => {
      for await (const _page of store.listPages('p/')) expect.unreachable();
    }).rejects.toThrow('list refused');
    expect(store.counters.list).toEqual({ requests: 4, errors: 1, bytesIn: 0, bytesOut: 0 });
  });
});
