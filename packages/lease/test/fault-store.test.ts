/**
 * The test wrapper itself: built on `ForwardingStore`, it lists page by page
 * through the inner store's `listPages` (a listing is never faulted, as
 * `list` is not), while its put faults still apply.
 */
import { type ListPage, type ListPagesOptions, MemoryStore, StoreError } from '@x/store';
import { describe, expect, it } from 'vitest';
import { FaultStore } from './fault-store.ts';

describe('FaultStore', () => {
  it("lists page by page through the inner store's listPages, untouched by the put faults", async () => {
    const inner = new MemoryStore();
    for (const key of ['p/a', 'p/b', 'p/c']) await inner.put(key, new Uint8Array([1]));
    const asked: ListPagesOptions[] = [];
    const innerListPages = inner.listPages.bind(inner);
    inner.listPages = (prefix, options = {}) => {
      asked.push(options);
      return innerListPages(prefix, options);
    };
    const store = new FaultStore(inner, { failPuts: 1, lostResponses: 1 });
    const signal = new AbortController().signal;

    expect(store.listPages).toBeDefined();
    const pages: ListPage[] = [];
    for await (const page of store.listPages('p/', { pageSize: 2, signal })) pages.push(page);

    expect(pages.map((page) => page.objects.map((info) => info.key))).toEqual([
      ['p/a', 'p/b'],
      ['p/c'],
    ]);
    expect(asked).toHaveLength(1);
    expect(asked[0]?.pageSize).toBe(2);
    expect(asked[0]?.signal).toBe(signal);
    // The faults were left for the puts.
    await expect(store.put('p/d', new Uint8Array([2]))).rejects.toBeInstanceOf(StoreError);
    expect(store.faults.failPuts).toBe(0);
    expect(store.description).toBe(`faulty(${inner.description})`);
    expect(store.capabilities).toBe(inner.capabilities);
  });
});
