/**
 * The hostile table's metering wrapper: built on `ForwardingStore`, it lists
 * page by page through the inner store's `listPages` and meters only body
 * bytes, so a listing (like `list`) adds nothing to what was read.
 */
import { type ListPage, type ListPagesOptions, MemoryStore } from '@x/store';
import { describe, expect, it } from 'vitest';
import { MeteredStore } from './operations.ts';

describe('MeteredStore', () => {
  it("lists page by page through the inner store's listPages, and meters gets, not listings", async () => {
    const inner = new MemoryStore();
    for (const key of ['p/a', 'p/b', 'p/c']) await inner.put(key, new Uint8Array([1, 2, 3]));
    const asked: ListPagesOptions[] = [];
    const innerListPages = inner.listPages.bind(inner);
    inner.listPages = (prefix, options = {}) => {
      asked.push(options);
      return innerListPages(prefix, options);
    };
    const store = new MeteredStore(inner);
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
    await store.list('p/');
    expect(store.bytesRead.size).toBe(0);

    await store.get('p/a');
    const streamed = await store.getStream('p/b');
    for await (const _chunk of streamed?.body ?? []);
    expect(Object.fromEntries(store.bytesRead)).toEqual({ 'p/a': 3, 'p/b': 3 });
  });
});
