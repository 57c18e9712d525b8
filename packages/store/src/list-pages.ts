/**
 * Listing page by page. `listPages(store, prefix, options)` is what callers
 * use: the store's own `listPages` when it has one (bounded memory), else
 * one page from its `list` (a store written before `listPages` existed; as
 * much memory as `list` takes). The other functions are for store authors
 * (`@x/store/adapter`): cutting an in-memory listing into pages, putting a
 * service's raw pages in the interface's order, and `list` built on pages.
 *
 * Order across pages rests on the service listing in key order (S3, Azure
 * and GCS all do; so do the local stores): each page is sorted and a prefix
 * repeated from the page before is dropped, but pages are not reordered —
 * that would need the whole listing in memory.
 */
import { throwIfAborted } from './abort.ts';
import { sortedListResult } from './adapter-support.ts';
import { StoreError } from './errors.ts';
import { compareKeys } from './keys.ts';
import type {
  ListPage,
  ListPagesOptions,
  ListResult,
  ObjectInfo,
  ObjectStore,
} from './object-store.ts';

/** The page size of `MemoryStore`, `FsStore` and `pagesOf` when none is asked for. */
export const DEFAULT_LIST_PAGE_SIZE = 1000;

/**
 * The pages of a listing of `store` under `prefix`: `store.listPages` when
 * the store has it, otherwise `store.list` as a single page (none when the
 * listing is empty).
 * @throws StoreError (from the iteration), as the store's listing does.
 */
export function listPages(
  store: ObjectStore,
  prefix: string,
  options: ListPagesOptions = {},
): AsyncIterable<ListPage> {
  if (store.listPages) return store.listPages(prefix, options);
  return onePage(store, prefix, options);
}

async function* onePage(
  store: ObjectStore,
  prefix: string,
  options: ListPagesOptions,
): AsyncIterable<ListPage> {
  const { pageSize: _ignored, ...listOptions } = options;
  const result = await store.list(prefix, listOptions);
  if (result.objects.length > 0 || result.commonPrefixes.length > 0) yield result;
}

/**
 * The page size to use: `options.pageSize`, or `fallback`.
 * @throws StoreError when `pageSize` is given and is not a positive integer.
 */
export function pageSizeOf(options: ListPagesOptions, fallback: number): number {
  const { pageSize } = options;
  if (pageSize === undefined) return fallback;
  if (!Number.isInteger(pageSize) || pageSize < 1) {
    throw new StoreError(`list: pageSize must be a positive integer, got ${String(pageSize)}`);
  }
  return pageSize;
}

/**
 * Cuts a complete listing (objects sorted, prefixes sorted, as `list`
 * returns them) into pages of at most `pageSize` entries, objects and
 * prefixes merged in key order. The signal is checked before every page.
 */
export async function* pagesOf(
  listing: ListResult,
  pageSize: number,
  signal?: AbortSignal,
): AsyncIterable<ListPage> {
  const { objects, commonPrefixes } = listing;
  let object = 0;
  let rolled = 0;
  while (object < objects.length || rolled < commonPrefixes.length) {
    throwIfAborted(signal);
    const pageObjects: ObjectInfo[] = [];
    const pagePrefixes: string[] = [];
    while (pageObjects.length + pagePrefixes.length < pageSize) {
      const nextObject = objects[object];
      const nextPrefix = commonPrefixes[rolled];
      if (nextObject === undefined && nextPrefix === undefined) break;
      if (
        nextPrefix === undefined ||
        (nextObject !== undefined && compareKeys(nextObject.key, nextPrefix) < 0)
      ) {
        pageObjects.push(nextObject!);
        object++;
      } else {
        pagePrefixes.push(nextPrefix);
        rolled++;
      }
    }
    yield { objects: pageObjects, commonPrefixes: pagePrefixes };
  }
}

/** A page as a service returned it (any order, prefixes possibly repeated from the page before). */
export interface RawListPage {
  readonly objects: ObjectInfo[];
  readonly commonPrefixes: readonly string[];
}

/**
 * A service's pages in the interface's form: each page's objects sorted by
 * UTF-8 byte order (in place), its prefixes sorted and without those the
 * page before already gave (services repeat a rolled-up prefix on
 * consecutive pages), and empty pages left out. With `pageSize`, a page the
 * service made larger (some count only objects against the limit, not
 * rolled-up prefixes) is cut into pages of at most that many entries.
 */
export async function* orderedListPages(
  raw: AsyncIterable<RawListPage>,
  pageSize?: number,
): AsyncIterable<ListPage> {
  let previousPrefixes = new Set<string>();
  for await (const page of raw) {
    const prefixes = [...new Set(page.commonPrefixes)]
      .filter((rolled) => !previousPrefixes.has(rolled))
      .sort(compareKeys);
    previousPrefixes = new Set(page.commonPrefixes);
    page.objects.sort((a, b) => compareKeys(a.key, b.key));
    if (page.objects.length === 0 && prefixes.length === 0) continue;
    if (pageSize !== undefined && page.objects.length + prefixes.length > pageSize)
      yield* pagesOf({ objects: page.objects, commonPrefixes: prefixes }, pageSize);
    else yield { objects: page.objects, commonPrefixes: prefixes };
  }
}

/**
 * `list` built on pages: every page collected, in the interface's order
 * (objects sorted, each common prefix once, sorted) whatever order the
 * pages came in.
 */
export async function collectListPages(pages: AsyncIterable<ListPage>): Promise<ListResult> {
  const objects: ObjectInfo[] = [];
  const commonPrefixes: string[] = [];
  for await (const page of pages) {
    objects.push(...page.objects);
    commonPrefixes.push(...page.commonPrefixes);
  }
  return sortedListResult(objects, commonPrefixes);
}
