import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StoreError } from './errors.ts';
import { FsStore } from './fs-store.ts';
import { compareKeys } from './keys.ts';
import {
  collectListPages,
  listPages,
  orderedListPages,
  pageSizeOf,
  pagesOf,
  type RawListPage,
} from './list-pages.ts';
import { MemoryStore } from './memory-store.ts';
import type { ListPage, ObjectInfo, ObjectStore } from './object-store.ts';
import { PrefixedStore } from './prefixed-store.ts';

const info = (key: string): ObjectInfo => ({ key, size: 0, version: { etag: key } });

async function collect(pages: AsyncIterable<ListPage>): Promise<ListPage[]> {
  const all: ListPage[] = [];
  for await (const page of pages) all.push(page);
  return all;
}

async function* fromArray(pages: RawListPage[]): AsyncIterable<RawListPage> {
  yield* pages;
}

describe('pagesOf', () => {
  it('cuts a listing into pages of at most pageSize entries, objects and prefixes merged in key order', async () => {
    const pages = await collect(
      pagesOf({ objects: [info('a'), info('c'), info('e')], commonPrefixes: ['b/', 'd/'] }, 2),
    );
    expect(pages).toEqual([
      { objects: [info('a')], commonPrefixes: ['b/'] },
      { objects: [info('c')], commonPrefixes: ['d/'] },
      { objects: [info('e')], commonPrefixes: [] },
    ]);
    expect(await collect(pagesOf({ objects: [], commonPrefixes: [] }, 2))).toEqual([]);
  });

  it('rejects with the reason of an aborted signal', async () => {
    const controller = new AbortController();
    controller.abort(new Error('stop'));
    await expect(
      collect(pagesOf({ objects: [info('a')], commonPrefixes: [] }, 1, controller.signal)),
    ).rejects.toThrow('stop');
  });
});

describe('orderedListPages', () => {
  it('sorts each page, drops a prefix the page before gave, and leaves out empty pages', async () => {
    const pages = await collect(
      orderedListPages(
        fromArray([
          { objects: [info('b'), info('a')], commonPrefixes: ['d/', 'c/'] },
          { objects: [], commonPrefixes: ['d/'] },
          { objects: [info('é'), info('z')], commonPrefixes: ['d/', 'e/'] },
        ]),
      ),
    );
    expect(pages).toEqual([
      { objects: [info('a'), info('b')], commonPrefixes: ['c/', 'd/'] },
      { objects: [info('z'), info('é')], commonPrefixes: ['e/'] },
    ]);
  });
});

describe('orderedListPages with a pageSize', () => {
  it('cuts a page the service made larger than asked, in key order', async () => {
    const pages = await collect(
      orderedListPages(
        fromArray([
          { objects: [info('a'), info('c'), info('e')], commonPrefixes: ['b/', 'd/'] },
          { objects: [info('f')], commonPrefixes: [] },
        ]),
        2,
      ),
    );
    expect(pages).toEqual([
      { objects: [info('a')], commonPrefixes: ['b/'] },
      { objects: [info('c')], commonPrefixes: ['d/'] },
      { objects: [info('e')], commonPrefixes: [] },
      { objects: [info('f')], commonPrefixes: [] },
    ]);
  });
});

describe('collectListPages', () => {
  it('is the sorted listing with each prefix once, whatever order the pages came in', async () => {
    async function* pages(): AsyncIterable<ListPage> {
      yield { objects: [info('c')], commonPrefixes: ['x/'] };
      yield { objects: [info('a')], commonPrefixes: ['x/', 'b/'] };
    }
    expect(await collectListPages(pages())).toEqual({
      objects: [info('a'), info('c')],
      commonPrefixes: ['b/', 'x/'],
    });
  });
});

describe('pageSizeOf', () => {
  it('takes the asked size, else the fallback, and refuses anything but a positive integer', () => {
    expect(pageSizeOf({}, 1000)).toBe(1000);
    expect(pageSizeOf({ pageSize: 3 }, 1000)).toBe(3);
    for (const pageSize of [0, -1, 1.5, Number.NaN])
      expect(() => pageSizeOf({ pageSize }, 1000)).toThrow(StoreError);
  });
});

describe('listPages(store, …)', () => {
  it("uses a store's list as one page when it has no listPages, and gives no page for an empty listing", async () => {
    const memory = new MemoryStore();
    await memory.put('p/1', new Uint8Array(1));
    await memory.put('p/2', new Uint8Array(1));
    const { listPages: _own, ...rest } = Object.fromEntries(
      [
        'description',
        'capabilities',
        'get',
        'getStream',
        'head',
        'put',
        'delete',
        'list',
        'upload',
      ].map((name) => {
        const value = Reflect.get(memory, name);
        return [name, typeof value === 'function' ? value.bind(memory) : value];
      }),
    ) as ObjectStore & { listPages?: unknown };
    const withoutPages = rest as ObjectStore;
    expect(withoutPages.listPages).toBeUndefined();
    const pages = await collect(listPages(withoutPages, 'p/', { pageSize: 1 }));
    expect(pages.map((page) => page.objects.map((object) => object.key))).toEqual([['p/1', 'p/2']]);
    expect(await collect(listPages(withoutPages, 'q/'))).toEqual([]);
  });
});

// Names whose order is easy to get wrong when walking directories: `-` and
// `.` sort before `/`, `0` after it; non-ASCII after ASCII (UTF-8 bytes).
const KEYS = [
  'a',
  'a-b',
  'a.b',
  'a/b/c',
  'a/b/d',
  'a/bx',
  'a/c',
  'a0',
  'aa/x',
  'b~tilde',
  'b/1',
  'b/2',
  'b/3',
  'B',
  'é/x',
  'é',
  'z/deep/er/still',
  'zz',
];

let fsRoot = '';
beforeAll(async () => {
  fsRoot = await mkdtemp(join(tmpdir(), 'list-pages-'));
});
afterAll(() => rm(fsRoot, { recursive: true, force: true }));

const stores: [string, () => ObjectStore][] = [
  ['MemoryStore', () => new MemoryStore()],
  ['FsStore', () => new FsStore({ root: join(fsRoot, String(Math.random())), fsync: false })],
  [
    'PrefixedStore over FsStore',
    () =>
      new PrefixedStore(
        new FsStore({ root: join(fsRoot, String(Math.random())), fsync: false }),
        'tenant',
      ),
  ],
];

describe.each(stores)('%s listPages', (name, createStore) => {
  let store: ObjectStore;
  beforeAll(async () => {
    store = createStore();
    for (const key of KEYS) await store.put(key, new TextEncoder().encode(key));
  });

  for (const [prefix, delimiter] of [
    ['', undefined],
    ['', '/'],
    ['a', undefined],
    ['a', '/'],
    ['a/', '/'],
    ['a/b', undefined],
    ['b', '/'],
    ['nothing', undefined],
  ] as const) {
    it(`pages of at most 3 entries, in key order, together what list gives: prefix ${JSON.stringify(prefix)}, delimiter ${delimiter ?? 'none'}`, async () => {
      const pages = await collect(listPages(store, prefix, { pageSize: 3, delimiter }));
      const whole = await store.list(prefix, { delimiter });
      for (const page of pages) {
        expect(page.objects.length + page.commonPrefixes.length).toBeGreaterThan(0);
        expect(page.objects.length + page.commonPrefixes.length).toBeLessThanOrEqual(3);
      }
      const objects = pages.flatMap((page) => page.objects);
      const commonPrefixes = pages.flatMap((page) => page.commonPrefixes);
      expect(objects).toEqual(whole.objects);
      expect(commonPrefixes).toEqual(whole.commonPrefixes);
      const expected = KEYS.filter((key) => key.startsWith(prefix)).sort(compareKeys);
      if (!delimiter) expect(objects.map((object) => object.key)).toEqual(expected);
      if (expected.length > 3 && !delimiter) expect(pages.length).toBeGreaterThan(1);
    });
  }

  it('stops when the caller stops, and a new listing starts from the beginning', async () => {
    const seen: string[] = [];
    for await (const page of listPages(store, '', { pageSize: 2 })) {
      seen.push(...page.objects.map((object) => object.key));
      break;
    }
    expect(seen).toEqual([...KEYS].sort(compareKeys).slice(0, 2));
  });

  it('reads a later page only when asked: an object deleted after the first page is not listed (FsStore), or is, from the snapshot (MemoryStore)', async () => {
    const own = createStore();
    for (const key of ['lazy/a', 'lazy/b', 'lazy/c', 'lazy/d'])
      await own.put(key, new Uint8Array(1));
    const seen: string[] = [];
    let first = true;
    for await (const page of listPages(own, 'lazy/', { pageSize: 2 })) {
      seen.push(...page.objects.map((object) => object.key));
      if (first) await own.delete('lazy/d');
      first = false;
    }
    const snapshot = name === 'MemoryStore';
    expect(seen).toEqual(['lazy/a', 'lazy/b', 'lazy/c', ...(snapshot ? ['lazy/d'] : [])]);
  });

  it('refuses a page size that is not a positive integer', async () => {
    await expect(collect(listPages(store, '', { pageSize: 0 }))).rejects.toThrow(StoreError);
  });

  it('rejects with the reason of an aborted signal', async () => {
    const controller = new AbortController();
    controller.abort(new Error('caller gave up'));
    await expect(collect(listPages(store, '', { signal: controller.signal }))).rejects.toThrow(
      'caller gave up',
    );
  });
});
