/**
 * The conformance cases: one implementation, run by `runConformanceCases`
 * (plain async, for reports and scripts) and by `describeStoreConformance`
 * (a thin vitest wrapper over the same functions).
 *
 * Each case writes only under its own sub-prefix of the run's prefix and
 * deletes what is there when it ends, so a run never touches other keys.
 *
 * Capabilities. A case that needs a capability (conditional put, conditional
 * delete, multipart create) is `not-applicable` when the capability is passed
 * as `false`. Then, if the store itself also declares the capability `false`,
 * a matching case checks that it refuses with `NotImplementedError` rather
 * than silently ignoring the condition (the interface's contract). A store
 * declaring `true` but tested with `false` (e.g. an S3 endpoint known to
 * ignore conditions) gets no check of that capability: use
 * `probeConditionalWrites` to see what it does.
 *
 * `distinctVersions` is different: it is not a precondition a service could
 * ignore but a property the store discloses (S3 ETags are content hashes, so
 * a rewrite of identical bytes keeps the version). The cases that write the
 * same bytes twice apply only when it is tested and the store declares it;
 * a store declaring it `false` is not held to it. Every other case writes
 * distinct bytes wherever it compares versions, so it holds either way.
 *
 * Keys. No case stores a key that is also the folder of another key (`a/b`
 * next to `a/b/c`): the interface allows it, but file-system-backed S3
 * servers refuse or hide it, and no layout that must be portable uses it.
 */
import { createHash } from 'node:crypto';
import {
  AlreadyExistsError,
  ConflictError,
  type ListPage,
  NotImplementedError,
  normalizePrefix,
  type ObjectStore,
  type ObjectVersion,
  PreconditionFailedError,
  type StoreCapabilities,
  sameVersion,
} from '@x/store';
import {
  ConformanceFailure,
  check,
  describeError,
  expectRejection,
  forEachLimited,
  isAbortRejection,
  readText,
  sameBytes,
  text,
} from './assertions.ts';
import {
  type CleanupFailure,
  cleanUpPrefix,
  describeCleanupFailure,
  KeyRecordingStore,
} from './cleanup.ts';

/** The groups cases belong to, in the order they run. */
export const CASE_GROUPS = [
  'basics',
  'create',
  'replace',
  'delete',
  'multipart-create',
  'races',
  'abort',
] as const;
export type CaseGroup = (typeof CASE_GROUPS)[number];

/** What a case gets to work with. */
export interface CaseContext {
  readonly store: ObjectStore;
  /** The case's own prefix (no trailing `/`); every key the case writes is under it. */
  readonly prefix: string;
  readonly capabilities: StoreCapabilities;
  readonly signal?: AbortSignal;
}

/** A capability a case needs (`value: true`), or needs declared absent (`value: false`). */
export interface CapabilityRequirement {
  readonly capability: keyof StoreCapabilities;
  readonly value: boolean;
}

export interface ConformanceCase {
  readonly group: CaseGroup;
  readonly name: string;
  /** What the case needs; it applies only when every requirement is met. */
  readonly requires?: readonly CapabilityRequirement[];
  /** Resolves when the store behaved; throws (usually a `ConformanceFailure`) when not. */
  run(context: CaseContext): Promise<void>;
}

export type CaseOutcome = 'passed' | 'failed' | 'not-applicable';

export interface CaseResult {
  readonly group: CaseGroup;
  readonly name: string;
  readonly outcome: CaseOutcome;
  /** Why it failed or does not apply; empty when it passed. */
  readonly detail: string;
  readonly durationMs: number;
  /** The error a failed case threw. */
  readonly error?: unknown;
  /**
   * Set when the case's cleanup left objects or met errors (the case is then
   * failed too, unless it had already failed for its own reason).
   */
  readonly cleanup?: CleanupFailure;
}

const MIB = 1024 * 1024;

function key(context: CaseContext, name: string): string {
  return `${context.prefix}/${name}`;
}

function callOptions(context: CaseContext): { signal?: AbortSignal } {
  return context.signal ? { signal: context.signal } : {};
}

async function expectText(
  context: CaseContext,
  name: string,
  expected: string | null,
  why: string,
) {
  const actual = await readText(context.store, key(context, name), context.signal);
  check(
    actual === expected,
    `${why}: expected ${expected === null ? 'no object' : JSON.stringify(expected)} at ${name}, found ${actual === null ? 'no object' : JSON.stringify(actual)}`,
  );
}

function isRetryable(error: unknown): boolean {
  return PreconditionFailedError.isInstance(error) || ConflictError.isInstance(error);
}

/** Deterministic pseudo-random bytes, so the 20 MiB upload needs no 20 MiB buffer. */
function* patternChunks(
  totalBytes: number,
  chunkBytes: number,
  seed: number,
): Generator<Uint8Array> {
  let state = seed >>> 0 || 1;
  for (let offset = 0; offset < totalBytes; offset += chunkBytes) {
    const chunk = new Uint8Array(Math.min(chunkBytes, totalBytes - offset));
    const words = new Uint32Array(chunk.buffer, 0, chunk.byteLength >>> 2);
    for (let index = 0; index < words.length; index++) {
      state ^= state << 13;
      state ^= state >>> 17;
      state ^= state << 5;
      words[index] = state >>> 0;
    }
    yield chunk;
  }
}

async function* asAsync(chunks: Iterable<Uint8Array>): AsyncIterable<Uint8Array> {
  for (const chunk of chunks) yield chunk;
}

async function streamDigest(
  store: ObjectStore,
  objectKey: string,
  signal?: AbortSignal,
): Promise<{ size: number; sha256: string } | null> {
  const result = await store.getStream(objectKey, signal ? { signal } : {});
  if (!result) return null;
  const hash = createHash('sha256');
  let size = 0;
  for await (const chunk of result.body) {
    hash.update(chunk);
    size += chunk.byteLength;
  }
  return { size, sha256: hash.digest('hex') };
}

const needsPut: CapabilityRequirement = { capability: 'conditionalPut', value: true };
const needsDelete: CapabilityRequirement = { capability: 'conditionalDelete', value: true };
const needsMultipart: CapabilityRequirement = { capability: 'multipartCreate', value: true };
const needsDistinctVersions: CapabilityRequirement = {
  capability: 'distinctVersions',
  value: true,
};

const basics: ConformanceCase[] = [
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
        'the store has no listPages, so a listing is only ever held in memory whole',
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

const create: ConformanceCase[] = [
  {
    group: 'create',
    name: 'create of a new key succeeds and get returns its bytes and version',
    requires: [needsPut],
    async run(context) {
      const written = await context.store.put(key(context, 'fresh'), text('first'), {
        ...callOptions(context),
        mode: 'create',
      });
      const read = await context.store.get(key(context, 'fresh'), callOptions(context));
      check(
        read !== null && sameBytes(read.body, text('first')),
        'created object does not read back',
      );
      check(
        sameVersion(read.version, written.version),
        'get reports another version than create returned',
      );
    },
  },
  {
    group: 'create',
    name: 'create of an existing key fails with AlreadyExistsError and keeps the first content',
    requires: [needsPut],
    async run(context) {
      const first = await context.store.put(key(context, 'once'), text('first'), {
        ...callOptions(context),
        mode: 'create',
      });
      await expectRejection(
        context.store.put(key(context, 'once'), text('second'), {
          ...callOptions(context),
          mode: 'create',
        }),
        AlreadyExistsError.isInstance,
        'AlreadyExistsError',
        'second create of the same key',
      );
      await expectText(context, 'once', 'first', 'after a refused create');
      const info = await context.store.head(key(context, 'once'), callOptions(context));
      check(
        info !== null && sameVersion(info.version, first.version),
        'a refused create changed the version',
      );
    },
  },
  {
    group: 'create',
    name: 'create succeeds again after the object is deleted',
    requires: [needsPut],
    async run(context) {
      await context.store.put(key(context, 'again'), text('first'), {
        ...callOptions(context),
        mode: 'create',
      });
      await context.store.delete(key(context, 'again'), callOptions(context));
      await context.store.put(key(context, 'again'), text('second'), {
        ...callOptions(context),
        mode: 'create',
      });
      await expectText(context, 'again', 'second', 'create after delete');
    },
  },
  {
    group: 'create',
    name: 'a store that declares no conditional put refuses create and ifMatch with NotImplementedError',
    requires: [{ capability: 'conditionalPut', value: false }],
    async run(context) {
      await context.store.put(key(context, 'object'), text('kept'), callOptions(context));
      const current = await context.store.head(key(context, 'object'), callOptions(context));
      check(current !== null, 'object missing after put');
      await expectRejection(
        context.store.put(key(context, 'object'), text('create'), {
          ...callOptions(context),
          mode: 'create',
        }),
        NotImplementedError.isInstance,
        'NotImplementedError',
        'create on a store without conditional put',
      );
      await expectRejection(
        context.store.put(key(context, 'object'), text('ifMatch'), {
          ...callOptions(context),
          mode: { ifMatch: current.version },
        }),
        NotImplementedError.isInstance,
        'NotImplementedError',
        'ifMatch on a store without conditional put',
      );
      await expectText(context, 'object', 'kept', 'after refused conditional puts');
    },
  },
];

const replace: ConformanceCase[] = [
  {
    group: 'replace',
    name: 'update with the current version succeeds and returns a new version',
    requires: [needsPut],
    async run(context) {
      const first = await context.store.put(
        key(context, 'object'),
        text('one'),
        callOptions(context),
      );
      const second = await context.store.put(key(context, 'object'), text('two'), {
        ...callOptions(context),
        mode: { ifMatch: first.version },
      });
      check(!sameVersion(first.version, second.version), 'the update returned the old version');
      await expectText(context, 'object', 'two', 'after an update with the current version');
      const info = await context.store.head(key(context, 'object'), callOptions(context));
      check(
        info !== null && sameVersion(info.version, second.version),
        "head does not report the update's version",
      );
    },
  },
  {
    group: 'replace',
    name: 'update with a stale version fails with PreconditionFailedError and keeps the content',
    requires: [needsPut],
    async run(context) {
      const first = await context.store.put(
        key(context, 'object'),
        text('one'),
        callOptions(context),
      );
      const second = await context.store.put(
        key(context, 'object'),
        text('two'),
        callOptions(context),
      );
      await expectRejection(
        context.store.put(key(context, 'object'), text('three'), {
          ...callOptions(context),
          mode: { ifMatch: first.version },
        }),
        PreconditionFailedError.isInstance,
        'PreconditionFailedError',
        'update with a stale version',
      );
      await expectText(context, 'object', 'two', 'after a refused stale update');
      const info = await context.store.head(key(context, 'object'), callOptions(context));
      check(
        info !== null && sameVersion(info.version, second.version),
        'a refused update changed the version',
      );
    },
  },
  {
    group: 'replace',
    name: 'update of a missing key fails with PreconditionFailedError and creates nothing',
    requires: [needsPut],
    async run(context) {
      const elsewhere = await context.store.put(
        key(context, 'elsewhere'),
        text('x'),
        callOptions(context),
      );
      await expectRejection(
        context.store.put(key(context, 'missing'), text('y'), {
          ...callOptions(context),
          mode: { ifMatch: elsewhere.version },
        }),
        PreconditionFailedError.isInstance,
        'PreconditionFailedError',
        'update of a missing key',
      );
      await expectText(context, 'missing', null, 'after a refused update of a missing key');
    },
  },
  {
    group: 'replace',
    name: 'rewriting the same bytes with ifMatch yields a new version and makes the old one stale',
    requires: [needsPut, needsDistinctVersions],
    async run(context) {
      const first = await context.store.put(
        key(context, 'object'),
        text('same'),
        callOptions(context),
      );
      const second = await context.store.put(key(context, 'object'), text('same'), {
        ...callOptions(context),
        mode: { ifMatch: first.version },
      });
      check(
        !sameVersion(first.version, second.version),
        'rewriting the same bytes kept the version',
      );
      await expectRejection(
        context.store.put(key(context, 'object'), text('other'), {
          ...callOptions(context),
          mode: { ifMatch: first.version },
        }),
        PreconditionFailedError.isInstance,
        'PreconditionFailedError',
        'update with the version before a same-bytes rewrite',
      );
      await expectText(context, 'object', 'same', 'after a refused update');
    },
  },
];

const deleteCases: ConformanceCase[] = [
  {
    group: 'delete',
    name: 'conditional delete with the current version removes the object',
    requires: [needsDelete],
    async run(context) {
      const written = await context.store.put(
        key(context, 'object'),
        text('x'),
        callOptions(context),
      );
      await context.store.delete(key(context, 'object'), {
        ...callOptions(context),
        ifMatch: written.version,
      });
      check(
        (await context.store.head(key(context, 'object'), callOptions(context))) === null,
        'object still there after a conditional delete with the current version',
      );
    },
  },
  {
    group: 'delete',
    name: 'conditional delete with a stale version fails with PreconditionFailedError and keeps the object',
    requires: [needsDelete],
    async run(context) {
      const first = await context.store.put(
        key(context, 'object'),
        text('one'),
        callOptions(context),
      );
      await context.store.put(key(context, 'object'), text('two'), callOptions(context));
      await expectRejection(
        context.store.delete(key(context, 'object'), {
          ...callOptions(context),
          ifMatch: first.version,
        }),
        PreconditionFailedError.isInstance,
        'PreconditionFailedError',
        'delete with a stale version',
      );
      await expectText(context, 'object', 'two', 'after a refused conditional delete');
    },
  },
  {
    group: 'delete',
    name: 'conditional delete of a missing key fails with PreconditionFailedError',
    requires: [needsDelete],
    async run(context) {
      const written = await context.store.put(
        key(context, 'object'),
        text('x'),
        callOptions(context),
      );
      await context.store.delete(key(context, 'object'), callOptions(context));
      await expectRejection(
        context.store.delete(key(context, 'object'), {
          ...callOptions(context),
          ifMatch: written.version,
        }),
        PreconditionFailedError.isInstance,
        'PreconditionFailedError',
        'conditional delete of a missing key',
      );
    },
  },
  {
    group: 'delete',
    name: 'a store that declares no conditional delete refuses ifMatch with NotImplementedError and deletes nothing',
    requires: [{ capability: 'conditionalDelete', value: false }],
    async run(context) {
      const written = await context.store.put(
        key(context, 'object'),
        text('kept'),
        callOptions(context),
      );
      await expectRejection(
        context.store.delete(key(context, 'object'), {
          ...callOptions(context),
          ifMatch: written.version,
        }),
        NotImplementedError.isInstance,
        'NotImplementedError',
        'conditional delete on a store without conditional delete',
      );
      await expectText(context, 'object', 'kept', 'after a refused conditional delete');
    },
  },
];

const multipart: ConformanceCase[] = [
  {
    group: 'multipart-create',
    name: 'a 20 MiB streaming upload in create mode; a second create fails with AlreadyExistsError and the first stays byte-identical',
    requires: [needsMultipart],
    async run(context) {
      const { store } = context;
      const total = 20 * MIB;
      const expectedHash = createHash('sha256');
      for (const chunk of patternChunks(total, MIB, 7)) expectedHash.update(chunk);
      const expected = expectedHash.digest('hex');
      const first = await store.upload(
        key(context, 'large'),
        asAsync(patternChunks(total, MIB, 7)),
        { ...callOptions(context), mode: 'create', partSize: 5 * MIB },
      );
      check(first.size === total, `upload reported size ${first.size}, expected ${total}`);
      await expectRejection(
        store.upload(key(context, 'large'), asAsync(patternChunks(6 * MIB, MIB, 99)), {
          ...callOptions(context),
          mode: 'create',
          partSize: 5 * MIB,
        }),
        AlreadyExistsError.isInstance,
        'AlreadyExistsError',
        'second create upload of the same key',
      );
      const info = await store.head(key(context, 'large'), callOptions(context));
      check(
        info !== null && info.size === total,
        `head reports size ${info?.size}, expected ${total}`,
      );
      check(sameVersion(info.version, first.version), 'the refused upload changed the version');
      const digest = await streamDigest(store, key(context, 'large'), context.signal);
      check(
        digest !== null && digest.size === total && digest.sha256 === expected,
        "the first upload's bytes changed or were never stored intact",
      );
    },
  },
  {
    group: 'multipart-create',
    name: 'a store that declares no multipart create refuses upload in create mode with NotImplementedError',
    requires: [{ capability: 'multipartCreate', value: false }],
    async run(context) {
      await expectRejection(
        context.store.upload(key(context, 'object'), asAsync([text('x')]), {
          ...callOptions(context),
          mode: 'create',
        }),
        NotImplementedError.isInstance,
        'NotImplementedError',
        'create upload on a store without multipart create',
      );
      await expectText(context, 'object', null, 'after a refused create upload');
    },
  },
];

const races: ConformanceCase[] = [
  {
    group: 'races',
    name: '32 concurrent creates of one key: exactly one succeeds, 31 fail with AlreadyExistsError',
    requires: [needsPut],
    async run(context) {
      const attempts = Array.from({ length: 32 }, (_, index) =>
        context.store.put(key(context, 'contested'), text(`writer ${index}`), {
          ...callOptions(context),
          mode: 'create',
        }),
      );
      const settled = await Promise.allSettled(attempts);
      const winners = settled.flatMap((result, index) =>
        result.status === 'fulfilled' ? [index] : [],
      );
      const others = settled.filter(
        (result) => result.status === 'rejected' && !AlreadyExistsError.isInstance(result.reason),
      );
      check(
        others.length === 0,
        `unexpected errors: ${others.map((result) => describeError((result as PromiseRejectedResult).reason)).join('; ')}`,
      );
      check(
        winners.length === 1,
        `${winners.length} of 32 concurrent creates succeeded, expected exactly 1`,
      );
      await expectText(context, 'contested', `writer ${winners[0]}`, "the winner's content");
    },
  },
  {
    group: 'races',
    name: '5 workers × 10 read-modify-write increments with ifMatch and retry reach exactly 50',
    requires: [needsPut],
    async run(context) {
      const { store } = context;
      const counter = key(context, 'counter');
      await store.put(counter, text('0'), callOptions(context));
      let attempts = 0;
      const worker = async () => {
        for (let done = 0; done < 10; ) {
          if (++attempts > 5000)
            throw new ConformanceFailure(
              'more than 5000 attempts for 50 increments: the store keeps refusing',
            );
          const current = await store.get(counter, callOptions(context));
          check(current !== null, 'the counter disappeared');
          const next = Number(new TextDecoder().decode(current.body)) + 1;
          try {
            await store.put(counter, text(String(next)), {
              ...callOptions(context),
              mode: { ifMatch: current.version },
            });
            done++;
          } catch (error) {
            if (!isRetryable(error)) throw error;
          }
        }
      };
      await Promise.all(Array.from({ length: 5 }, worker));
      await expectText(
        context,
        'counter',
        '50',
        'after 50 successful increments (lost updates otherwise)',
      );
    },
  },
];

const abort: ConformanceCase[] = [
  {
    group: 'abort',
    name: 'put with an aborted signal rejects with the abort reason and writes nothing',
    async run(context) {
      const controller = new AbortController();
      controller.abort();
      const modes = context.capabilities.conditionalPut
        ? (['overwrite', 'create'] as const)
        : (['overwrite'] as const);
      for (const mode of modes) {
        await expectRejection(
          context.store.put(key(context, `aborted-${mode}`), text('x'), {
            signal: controller.signal,
            mode,
          }),
          (error) => isAbortRejection(error, controller.signal),
          'the abort reason',
          `put (${mode}) with an aborted signal`,
        );
      }
      const listing = await context.store.list(`${context.prefix}/`, callOptions(context));
      check(listing.objects.length === 0, `aborted puts left ${listing.objects.length} object(s)`);
    },
  },
  {
    group: 'abort',
    name: 'upload aborted mid-stream rejects with the abort reason and leaves no object',
    async run(context) {
      const modes = context.capabilities.multipartCreate
        ? (['overwrite', 'create'] as const)
        : (['overwrite'] as const);
      for (const mode of modes) {
        const controller = new AbortController();
        async function* source(): AsyncIterable<Uint8Array> {
          yield new Uint8Array(MIB).fill(1);
          yield new Uint8Array(MIB).fill(2);
          controller.abort();
          yield new Uint8Array(MIB).fill(3);
          yield new Uint8Array(MIB).fill(4);
        }
        await expectRejection(
          context.store.upload(key(context, `aborted-${mode}`), source(), {
            signal: controller.signal,
            mode,
          }),
          (error) => isAbortRejection(error, controller.signal),
          'the abort reason',
          `upload (${mode}) aborted mid-stream`,
        );
        check(
          (await context.store.head(key(context, `aborted-${mode}`), callOptions(context))) ===
            null,
          `an aborted ${mode} upload left an object`,
        );
      }
      const listing = await context.store.list(`${context.prefix}/`, callOptions(context));
      check(
        listing.objects.length === 0,
        `aborted uploads left ${listing.objects.length} object(s)`,
      );
      // The key is free: a later create succeeds.
      await context.store.put(key(context, 'aborted-create'), text('later'), callOptions(context));
      await expectText(context, 'aborted-create', 'later', 'a write after an aborted upload');
    },
  },
  {
    group: 'abort',
    name: 'delete with an aborted signal rejects and keeps the object',
    async run(context) {
      await context.store.put(key(context, 'kept'), text('kept'), callOptions(context));
      const controller = new AbortController();
      controller.abort(new Error('custom abort reason'));
      await expectRejection(
        context.store.delete(key(context, 'kept'), { signal: controller.signal }),
        (error) => isAbortRejection(error, controller.signal),
        'the abort reason',
        'delete with an aborted signal',
      );
      await expectText(context, 'kept', 'kept', 'after an aborted delete');
    },
  },
];

/** Every case, in run order. */
export const conformanceCases: readonly ConformanceCase[] = [
  ...basics,
  ...create,
  ...replace,
  ...deleteCases,
  ...multipart,
  ...races,
  ...abort,
];

/**
 * Why `testCase` does not apply, or `undefined` when it does. `declared` is
 * the store's own `capabilities` (known only once the store exists).
 */
export function notApplicableReason(
  testCase: ConformanceCase,
  capabilities: StoreCapabilities,
  declared?: StoreCapabilities,
): string | undefined {
  for (const requirement of testCase.requires ?? []) {
    const reason = requirementUnmet(requirement, capabilities, declared);
    if (reason !== undefined) return reason;
  }
  return undefined;
}

function requirementUnmet(
  requirement: CapabilityRequirement,
  capabilities: StoreCapabilities,
  declared: StoreCapabilities | undefined,
): string | undefined {
  const { capability } = requirement;
  const tested = capabilities[capability];
  if (requirement.value) {
    // A disclosure, not a precondition: a store that says its versions are
    // content hashes is not held to distinct versions of identical bytes.
    if (capability === 'distinctVersions' && declared?.distinctVersions === false)
      return 'the store declares distinctVersions: false (e.g. S3 ETags are content hashes): a rewrite of identical bytes may keep its version';
    return tested ? undefined : `${capability} is not claimed`;
  }
  if (tested) return `${capability} is claimed`;
  if (declared?.[capability])
    return `${capability} is declared by the store but not tested; run probeConditionalWrites`;
  return undefined;
}

/** A stable, path-safe id for a case, used in its sub-prefix. */
export function caseId(testCase: ConformanceCase): string {
  const index = conformanceCases.indexOf(testCase);
  return `${String(index).padStart(2, '0')}-${testCase.group}`;
}

/**
 * Runs one case under `runPrefix/<case id>` and deletes what it wrote there.
 * Never throws: the outcome says what happened.
 */
export async function executeCase(
  testCase: ConformanceCase,
  options: {
    store: ObjectStore;
    runPrefix: string;
    capabilities: StoreCapabilities;
    signal?: AbortSignal;
  },
): Promise<CaseResult> {
  const started = performance.now();
  const base = { group: testCase.group, name: testCase.name };
  const reason = notApplicableReason(testCase, options.capabilities, options.store.capabilities);
  if (reason !== undefined)
    return { ...base, outcome: 'not-applicable', detail: reason, durationMs: 0 };
  const prefix = `${normalizePrefix(options.runPrefix)}/${caseId(testCase)}`;
  // Every key the case writes is remembered, so cleanup does not depend on
  // the store's listing being right (a broken one would leave them behind).
  const recording = new KeyRecordingStore(options.store);
  const context: CaseContext = {
    store: recording,
    prefix,
    capabilities: options.capabilities,
    ...(options.signal ? { signal: options.signal } : {}),
  };
  let failure: unknown;
  try {
    await testCase.run(context);
  } catch (error) {
    failure = error;
  }
  let cleanup: CleanupFailure | undefined;
  try {
    cleanup = await cleanUpPrefix(options.store, prefix, recording.written(), options.signal);
  } catch (error) {
    // Only an abort gets here (cleanUpPrefix reports every other failure).
    cleanup = { prefix, left: 0, sample: [], listed: false, errors: [describeError(error)] };
  }
  if (cleanup) failure ??= new ConformanceFailure(`cleanup: ${describeCleanupFailure(cleanup)}`);
  const durationMs = performance.now() - started;
  const cleanupField = cleanup ? { cleanup } : {};
  if (failure !== undefined)
    return {
      ...base,
      outcome: 'failed',
      detail: describeError(failure),
      durationMs,
      error: failure,
      ...cleanupField,
    };
  return { ...base, outcome: 'passed', detail: '', durationMs };
}

export interface RunConformanceOptions {
  /** Where the run writes (a fresh random prefix is best); only keys under it are written and deleted. */
  readonly prefix: string;
  /** What to test; defaults to what the store declares. */
  readonly capabilities?: Partial<StoreCapabilities>;
  /** Only these groups (default: all). */
  readonly groups?: readonly CaseGroup[];
  readonly signal?: AbortSignal;
}

/** Resolves the capabilities a run tests: the given ones, the store's declaration for the rest. */
export function resolveCapabilities(
  store: ObjectStore | undefined,
  given: Partial<StoreCapabilities> | undefined,
): StoreCapabilities {
  const declared: StoreCapabilities = store?.capabilities ?? {
    conditionalPut: true,
    conditionalDelete: true,
    multipartCreate: true,
    distinctVersions: true,
  };
  return {
    conditionalPut: given?.conditionalPut ?? declared.conditionalPut,
    conditionalDelete: given?.conditionalDelete ?? declared.conditionalDelete,
    multipartCreate: given?.multipartCreate ?? declared.multipartCreate,
    distinctVersions: given?.distinctVersions ?? declared.distinctVersions,
  };
}

/**
 * Runs every case (or the chosen groups) one after another against `store`
 * and returns one result per case. Never throws for a failing case.
 */
export async function runConformanceCases(
  store: ObjectStore,
  options: RunConformanceOptions,
): Promise<CaseResult[]> {
  const runPrefix = normalizePrefix(options.prefix);
  if (runPrefix === '') throw new TypeError('runConformanceCases needs a non-empty prefix');
  const capabilities = resolveCapabilities(store, options.capabilities);
  const results: CaseResult[] = [];
  for (const testCase of conformanceCases) {
    if (options.groups && !options.groups.includes(testCase.group)) continue;
    options.signal?.throwIfAborted();
    results.push(
      await executeCase(testCase, {
        store,
        runPrefix,
        capabilities,
        ...(options.signal ? { signal: options.signal } : {}),
      }),
    );
  }
  return results;
}
