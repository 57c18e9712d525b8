/**
 * The conformance cases of group `basics`. The basic operations every store
 * must get right: get, getStream, head, put, delete, list and listPages,
 * keys, sizes and versions.
 */
import { type ListPage, type ObjectVersion, sameVersion } from '@x/store';
import { check, forEachLimited, sameBytes, text } from './assertions.ts';
import {
  asAsync,
  callOptions,
  expectText,
  key,
  MIB,
  needsDistinctVersions,
  streamDigest,
} from './case-helpers.ts';
import type { ConformanceCase } from './case-types.ts';

export const basics: ConformanceCase[] = [
  {
    group: 'basics',
    name: 'put then get returns the bytes, size and version; head agrees',
    async run(context) {
      const { store } = context;
      const written = await store.put(key(context, 'object'), text('hello'), callOptions(context));
      const read = await store.get(key(context, 'object'), callOptions(context));
      check(read !== null, 'get returned null right after put');
      check(read.key === key(context, 'object'), `get returned key ${read.key}`);
      check(sameBytes(read.body, text('hello')), 'get returned other bytes than put wrote');
      check(read.size === 5, `get reported size ${read.size}, expected 5`);
      check(
        sameVersion(read.version, written.version),
        'get reported another version than put returned',
      );
      const info = await store.head(key(context, 'object'), callOptions(context));
      check(info !== null, 'head returned null for an existing object');
      check(info.size === 5, `head reported size ${info.size}, expected 5`);
      check(
        sameVersion(info.version, written.version),
        'head reported another version than put returned',
      );
    },
  },
  {
    group: 'basics',
    name: 'get, getStream and head of a missing key return null',
    async run(context) {
      const { store } = context;
      check(
        (await store.get(key(context, 'missing'), callOptions(context))) === null,
        'get of a missing key did not return null',
      );
      check(
        (await store.getStream(key(context, 'missing'), callOptions(context))) === null,
        'getStream of a missing key did not return null',
      );
      check(
        (await store.head(key(context, 'missing'), callOptions(context))) === null,
        'head of a missing key did not return null',
      );
    },
  },
  {
    group: 'basics',
    name: 'delete removes the object, and deleting a missing key is not an error',
    async run(context) {
      const { store } = context;
      await store.put(key(context, 'doomed'), text('x'), callOptions(context));
      await store.delete(key(context, 'doomed'), callOptions(context));
      check(
        (await store.head(key(context, 'doomed'), callOptions(context))) === null,
        'object still there after delete',
      );
      await store.delete(key(context, 'doomed'), callOptions(context));
      await store.delete(key(context, 'never-written'), callOptions(context));
      const listing = await store.list(`${context.prefix}/`, callOptions(context));
      check(
        listing.objects.length === 0,
        `list still shows ${listing.objects.length} object(s) after delete`,
      );
    },
  },
  {
    group: 'basics',
    name: 'empty objects round-trip through put, get, head, list and getStream',
    async run(context) {
      const { store } = context;
      await store.put(key(context, 'empty'), new Uint8Array(0), callOptions(context));
      const read = await store.get(key(context, 'empty'), callOptions(context));
      check(
        read !== null && read.size === 0 && read.body.byteLength === 0,
        'empty object did not read back empty',
      );
      const info = await store.head(key(context, 'empty'), callOptions(context));
      check(info !== null && info.size === 0, 'head of an empty object did not report size 0');
      const listing = await store.list(`${context.prefix}/`, callOptions(context));
      check(
        listing.objects.length === 1 && listing.objects[0]!.size === 0,
        'list did not show the empty object with size 0',
      );
      const streamed = await streamDigest(store, key(context, 'empty'), context.signal);
      check(streamed !== null && streamed.size === 0, 'getStream of an empty object yielded bytes');
    },
  },
  {
    group: 'basics',
    name: 'keys with spaces, unicode, percent signs and tildes round-trip and list in UTF-8 byte order',
    async run(context) {
      const { store } = context;
      const names = [
        'with space/and more.txt',
        'unicode/Grüße-日本語-🎉',
        'percent/100%25 done %',
        'tilde~7e/~and+plus=eq&amp;',
        // UTF-8 byte order puts U+FF61 before U+1F600; UTF-16 code-unit order would not.
        'order/\uff61',
        'order/\u{1f600}',
      ];
      for (const [index, name] of names.entries())
        await store.put(key(context, name), text(`value ${index}`), callOptions(context));
      for (const [index, name] of names.entries())
        await expectText(context, name, `value ${index}`, 'reading a key with special characters');
      const listing = await store.list(`${context.prefix}/`, callOptions(context));
      const listed = listing.objects.map((info) => info.key);
      const expected = names
        .map((name) => key(context, name))
        .sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
      check(
        JSON.stringify(listed) === JSON.stringify(expected),
        `list returned ${JSON.stringify(listed)}, expected ${JSON.stringify(expected)}`,
      );
    },
  },
  {
    group: 'basics',
    name: 'overwrite replaces the content and the version',
    async run(context) {
      const { store } = context;
      const first = await store.put(key(context, 'object'), text('one'), callOptions(context));
      const second = await store.put(key(context, 'object'), text('two'), {
        ...callOptions(context),
        mode: 'overwrite',
      });
      await expectText(context, 'object', 'two', 'after an overwrite');
      check(
        !sameVersion(first.version, second.version),
        'overwrite returned the same version as the first write',
      );
    },
  },
  {
    group: 'basics',
    name: 'the version changes on every write, also when the same bytes are written again',
    requires: [needsDistinctVersions],
    async run(context) {
      const { store } = context;
      const versions: ObjectVersion[] = [];
      for (let index = 0; index < 4; index++)
        versions.push(
          (await store.put(key(context, 'same'), text('same bytes'), callOptions(context))).version,
        );
      for (let a = 0; a < versions.length; a++)
        for (let b = a + 1; b < versions.length; b++)
          check(
            !sameVersion(versions[a]!, versions[b]!),
            `writes ${a + 1} and ${b + 1} of the same bytes returned the same version ${JSON.stringify(versions[a])}`,
          );
      const info = await store.head(key(context, 'same'), callOptions(context));
      check(
        info !== null && sameVersion(info.version, versions.at(-1)!),
        "head does not report the last write's version",
      );
    },
  },
  {
    group: 'basics',
    name: 'getStream returns the same bytes, size and version as get',
    async run(context) {
      const { store } = context;
      const body = new Uint8Array(3 * MIB + 17).map((_, index) => index % 251);
      const written = await store.put(key(context, 'streamed'), body, callOptions(context));
      const result = await store.getStream(key(context, 'streamed'), callOptions(context));
      check(result !== null, 'getStream returned null for an existing object');
      check(result.size === body.byteLength, `getStream reported size ${result.size}`);
      check(sameVersion(result.version, written.version), 'getStream reported another version');
      const parts: Uint8Array[] = [];
      for await (const chunk of result.body) parts.push(chunk);
      check(sameBytes(Buffer.concat(parts), body), 'getStream yielded other bytes');
    },
  },
  {
    group: 'basics',
    name: 'list takes a plain string prefix and lists nothing outside it',
    async run(context) {
      const { store } = context;
      // `a/b` is a folder here, never also an object: see "Keys" at the top.
      for (const name of ['a/bx', 'a/b/c', 'a/c', 'ab', 'b'])
        await store.put(key(context, name), text(name), callOptions(context));
      const keysOf = async (prefix: string) =>
        (await store.list(`${context.prefix}/${prefix}`, callOptions(context))).objects.map(
          (info) => info.key.slice(context.prefix.length + 1),
        );
      const plain = await keysOf('a/b');
      check(
        JSON.stringify(plain) === JSON.stringify(['a/b/c', 'a/bx']),
        `list("a/b") returned ${JSON.stringify(plain)}`,
      );
      const folder = await keysOf('a/b/');
      check(
        JSON.stringify(folder) === JSON.stringify(['a/b/c']),
        `list("a/b/") returned ${JSON.stringify(folder)}`,
      );
      const none = await keysOf('zzz');
      check(none.length === 0, `list("zzz") returned ${JSON.stringify(none)}`);
      const a = await keysOf('a');
      check(
        JSON.stringify(a) === JSON.stringify(['a/b/c', 'a/bx', 'a/c', 'ab']),
        `list("a") returned ${JSON.stringify(a)}`,
      );
    },
  },
  {
    group: 'basics',
    name: 'list with a delimiter rolls keys up into common prefixes',
    async run(context) {
      const { store } = context;
      for (const name of ['d/one', 'd/sub/two', 'd/sub/three', 'd/other/deep/x', 'd/two'])
        await store.put(key(context, name), text(name), callOptions(context));
      const listing = await store.list(`${context.prefix}/d/`, {
        ...callOptions(context),
        delimiter: '/',
      });
      const objects = listing.objects.map((info) => info.key.slice(context.prefix.length + 1));
      const prefixes = listing.commonPrefixes.map((prefix) =>
        prefix.slice(context.prefix.length + 1),
      );
      check(
        JSON.stringify(objects) === JSON.stringify(['d/one', 'd/two']),
        `objects ${JSON.stringify(objects)}`,
      );
      check(
        JSON.stringify(prefixes) === JSON.stringify(['d/other/', 'd/sub/']),
        `common prefixes ${JSON.stringify(prefixes)}`,
      );
    },
  },
  {
    group: 'basics',
    name: 'list returns every key across more than 1000 keys (all pages), with and without a delimiter',
    async run(context) {
      const { store } = context;
      const flat = Array.from(
        { length: 1010 },
        (_, index) => `many/key-${String(index).padStart(5, '0')}`,
      );
      const nested = Array.from(
        { length: 30 },
        (_, index) => `many/sub-${String(index % 10).padStart(2, '0')}/inner-${index}`,
      );
      const all = [...flat, ...nested];
      await forEachLimited(all, 16, async (name) => {
        await store.put(key(context, name), text(name), callOptions(context));
      });
      const expected = all
        .map((name) => key(context, name))
        .sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
      const listing = await store.list(`${context.prefix}/many/`, callOptions(context));
      const listed = listing.objects.map((info) => info.key);
      check(
        listed.length === expected.length,
        `list without delimiter returned ${listed.length} keys, expected ${expected.length}`,
      );
      check(
        JSON.stringify(listed) === JSON.stringify(expected),
        'list without delimiter returned other keys or another order',
      );
      check(listing.commonPrefixes.length === 0, 'list without delimiter returned common prefixes');
      const rolled = await store.list(`${context.prefix}/many/`, {
        ...callOptions(context),
        delimiter: '/',
      });
      check(
        rolled.objects.length === flat.length,
        `list with delimiter returned ${rolled.objects.length} objects, expected ${flat.length}`,
      );
      check(
        JSON.stringify(rolled.objects.map((info) => info.key)) ===
          JSON.stringify(flat.map((name) => key(context, name))),
        'list with delimiter returned other objects',
      );
      const expectedPrefixes = Array.from({ length: 10 }, (_, index) =>
        key(context, `many/sub-${String(index).padStart(2, '0')}/`),
      );
      check(
        JSON.stringify(rolled.commonPrefixes) === JSON.stringify(expectedPrefixes),
        `list with delimiter returned prefixes ${JSON.stringify(rolled.commonPrefixes)}`,
      );
    },
  },
  {
    group: 'basics',
    name: 'listPages lists page by page: with pageSize 7, several pages of at most 7 entries, in key order, together what list returns (with and without a delimiter); a break ends it',
    async run(context) {
      const { store } = context;
      const pageSize = 7;
      check(
        typeof store.listPages === 'function',
        'the store has no `listPages` method: it is optional in ObjectStore, but without it every listing is held in memory whole (build it on the pages of the service: @x/store/adapter has orderedListPages and pagesOf)',
      );
      const flat = Array.from(
        { length: 20 },
        (_, index) => `pages/key-${String(index).padStart(2, '0')}`,
      );
      const nested = Array.from(
        { length: 6 },
        (_, index) => `pages/sub-${String(index % 3).padStart(2, '0')}/inner-${index}`,
      );
      await forEachLimited([...flat, ...nested], 16, async (name) => {
        await store.put(key(context, name), text(name), callOptions(context));
      });
      const under = `${context.prefix}/pages/`;
      const describePage = (page: ListPage) =>
        `${page.objects.length} objects and ${page.commonPrefixes.length} prefixes`;
      for (const delimiter of [undefined, '/'] as const) {
        const how = delimiter ? 'with a delimiter' : 'without a delimiter';
        const pages: ListPage[] = [];
        for await (const page of store.listPages!(under, {
          ...callOptions(context),
          pageSize,
          ...(delimiter ? { delimiter } : {}),
        }))
          pages.push(page);
        const whole = await store.list(under, {
          ...callOptions(context),
          ...(delimiter ? { delimiter } : {}),
        });
        const oversized = pages.find(
          (page) => page.objects.length + page.commonPrefixes.length > pageSize,
        );
        check(
          oversized === undefined,
          `listPages ${how} gave a page of ${oversized ? describePage(oversized) : ''}, more than pageSize ${pageSize}`,
        );
        check(
          pages.every((page) => page.objects.length + page.commonPrefixes.length > 0),
          `listPages ${how} gave an empty page`,
        );
        check(pages.length >= 2, `listPages ${how} gave ${pages.length} page(s), expected several`);
        const objects = pages.flatMap((page) => page.objects);
        const prefixes = pages.flatMap((page) => page.commonPrefixes);
        check(
          JSON.stringify(objects) === JSON.stringify(whole.objects),
          `listPages ${how} gave objects ${JSON.stringify(objects.map((info) => info.key.slice(under.length)))}, list gave ${JSON.stringify(whole.objects.map((info) => info.key.slice(under.length)))}`,
        );
        check(
          JSON.stringify(prefixes) === JSON.stringify(whole.commonPrefixes),
          `listPages ${how} gave prefixes ${JSON.stringify(prefixes)}, list gave ${JSON.stringify(whole.commonPrefixes)}`,
        );
        const expectedKeys = (delimiter ? flat : [...flat, ...nested])
          .map((name) => key(context, name))
          .sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
        check(
          JSON.stringify(objects.map((info) => info.key)) === JSON.stringify(expectedKeys),
          `listPages ${how} gave other keys or another order`,
        );
      }
      let firstPage: ListPage | undefined;
      for await (const page of store.listPages!(under, { ...callOptions(context), pageSize })) {
        firstPage = page;
        break;
      }
      check(
        firstPage?.objects[0]?.key === key(context, flat[0]!),
        `the first page after a break began with ${firstPage?.objects[0]?.key}`,
      );
    },
  },
  {
    group: 'basics',
    name: 'upload in overwrite mode streams chunks and replaces an existing object',
    async run(context) {
      const { store } = context;
      await store.put(key(context, 'uploaded'), text('old'), callOptions(context));
      const chunks = [text('first,'), new Uint8Array(0), text('second,'), text('third')];
      const result = await store.upload(key(context, 'uploaded'), asAsync(chunks), {
        ...callOptions(context),
        mode: 'overwrite',
      });
      check(result.size === 18, `upload reported size ${result.size}, expected 18`);
      await expectText(context, 'uploaded', 'first,second,third', 'after an overwrite upload');
      const info = await store.head(key(context, 'uploaded'), callOptions(context));
      check(
        info !== null && sameVersion(info.version, result.version),
        "head does not report the upload's version",
      );
      const single = await store.upload(
        key(context, 'single-buffer'),
        text('one buffer'),
        callOptions(context),
      );
      check(single.size === 10, `upload of one buffer reported size ${single.size}`);
      await expectText(context, 'single-buffer', 'one buffer', 'after an upload of one buffer');
    },
  },
];
