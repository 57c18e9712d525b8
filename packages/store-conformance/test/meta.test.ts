/**
 * Meta-tests: the suite and the probe must fail against stores that break
 * the contract, in exactly the cases that check what they break, and pass
 * everything else. Without these, a suite that passed vacuously would look
 * the same as one that works.
 */
import {
  type DeleteOptions,
  type ListOptions,
  type ListPage,
  type ListPagesOptions,
  MemoryStore,
  NotImplementedError,
  type ObjectStore,
  type PutOptions,
  type StoreCapabilities,
} from '@x/store';
import { describe, expect, it } from 'vitest';
import {
  brokenStore,
  type CaseResult,
  conformanceCases,
  probeConditionalWrites,
  runConformanceCases,
  type StoreFlaw,
} from '../src/index.ts';
import { contentHashStore, withoutConditionalPut } from './declared-stores.ts';

const CREATE_TWICE =
  'create of an existing key fails with AlreadyExistsError and keeps the first content';
const CREATE_RACE =
  '32 concurrent creates of one key: exactly one succeeds, 31 fail with AlreadyExistsError';
const UPLOAD_CREATE =
  'a 20 MiB streaming upload in create mode; a second create fails with AlreadyExistsError and the first stays byte-identical';
const INCREMENTS =
  '5 workers × 10 read-modify-write increments with ifMatch and retry reach exactly 50';
const DECLARED_ABSENT = conformanceCases
  .filter((c) => c.requires?.some((requirement) => requirement.value === false))
  .map((c) => c.name);
const SAME_BYTES = [
  'the version changes on every write, also when the same bytes are written again',
  'rewriting the same bytes with ifMatch yields a new version and makes the old one stale',
];
const PLAIN_PREFIX = 'list takes a plain string prefix and lists nothing outside it';
const KEY_CASES = [
  'put and upload refuse invalid keys with InvalidKeyError and write nothing',
  'get, getStream, head and delete refuse invalid keys with InvalidKeyError',
];
const UPLOAD_STREAMS = conformanceCases.find((c) => c.name.startsWith('upload streams:'))!.name;

function names(results: CaseResult[], outcome: CaseResult['outcome']): string[] {
  return results
    .filter((result) => result.outcome === outcome)
    .map((result) => result.name)
    .sort();
}

const expectedFailures: Record<StoreFlaw, string[]> = {
  'ignores-create': [CREATE_TWICE, CREATE_RACE, UPLOAD_CREATE],
  'ignores-if-match': [
    'update with a stale version fails with PreconditionFailedError and keeps the content',
    'update of a missing key fails with PreconditionFailedError and creates nothing',
    'rewriting the same bytes with ifMatch yields a new version and makes the old one stale',
    'conditional delete with a stale version fails with PreconditionFailedError and keeps the object',
    'conditional delete of a missing key fails with PreconditionFailedError',
    INCREMENTS,
  ],
  'not-atomic': [CREATE_RACE, INCREMENTS],
  'ignores-create-on-multipart': [UPLOAD_CREATE],
  'accepts-invalid-keys': KEY_CASES,
  'buffers-uploads': [UPLOAD_STREAMS],
  'skips-batch-deletes': [conformanceCases.find((c) => c.name.startsWith('deleting '))!.name],
};

describe('runConformanceCases', () => {
  it('passes every applicable case for MemoryStore and reports the declared-absent cases as not applicable', async () => {
    const results = await runConformanceCases(new MemoryStore(), { prefix: 'run' });
    expect(results).toHaveLength(conformanceCases.length);
    expect(names(results, 'failed')).toEqual([]);
    expect(names(results, 'not-applicable')).toEqual([...DECLARED_ABSENT].sort());
    expect(results.filter((result) => result.outcome === 'passed').length).toBe(
      conformanceCases.length - DECLARED_ABSENT.length,
    );
  });

  for (const flaw of Object.keys(expectedFailures) as StoreFlaw[]) {
    it(`fails exactly the matching cases for a store that ${flaw.replaceAll('-', ' ')}`, async () => {
      const results = await runConformanceCases(brokenStore(new MemoryStore(), flaw), {
        prefix: `broken-${flaw}`,
      });
      expect(names(results, 'failed')).toEqual([...expectedFailures[flaw]].sort());
      expect(names(results, 'not-applicable')).toEqual([...DECLARED_ABSENT].sort());
      for (const failed of results.filter((result) => result.outcome === 'failed'))
        expect(failed.detail).not.toBe('');
    });
  }

  it('writes only under its prefix and leaves nothing there', async () => {
    const store = new MemoryStore();
    await store.put('outside/keep', new Uint8Array([1]));
    await store.put('run-neighbour', new Uint8Array([2]));
    await runConformanceCases(store, { prefix: 'run', groups: ['basics', 'create'] });
    const left = (await store.list('')).objects.map((info) => info.key);
    expect(left).toEqual(['outside/keep', 'run-neighbour']);
  });

  it('marks capability cases not applicable when told the capability is absent', async () => {
    const results = await runConformanceCases(new MemoryStore(), {
      prefix: 'run',
      capabilities: { conditionalDelete: false },
      groups: ['delete'],
    });
    expect(results.map((result) => result.outcome)).toEqual([
      // Deleting many keys needs no capability.
      'passed',
      'not-applicable',
      'not-applicable',
      'not-applicable',
      // MemoryStore itself declares conditional delete, so no NotImplementedError is expected of it.
      'not-applicable',
    ]);
  });

  it('the same-bytes cases are exactly the ones that need distinctVersions', () => {
    const needing = conformanceCases
      .filter((c) =>
        c.requires?.some((requirement) => requirement.capability === 'distinctVersions'),
      )
      .map((c) => c.name);
    expect(needing.sort()).toEqual([...SAME_BYTES].sort());
  });

  it('passes a store with content-hash versions that declares distinctVersions false, the same-bytes cases not applicable with the reason', async () => {
    const store = new MemoryStore('s3-like', { versions: 'content-hash' });
    const results = await runConformanceCases(store, { prefix: 'run' });
    expect(names(results, 'failed')).toEqual([]);
    expect(names(results, 'not-applicable')).toEqual([...DECLARED_ABSENT, ...SAME_BYTES].sort());
    for (const name of SAME_BYTES)
      expect(results.find((result) => result.name === name)?.detail).toMatch(
        /declares distinctVersions: false/,
      );
  });

  it('fails exactly the same-bytes cases for a store with content-hash versions that claims distinctVersions', async () => {
    const store = claiming(new MemoryStore('s3-like', { versions: 'content-hash' }), {
      distinctVersions: true,
    });
    const results = await runConformanceCases(store, { prefix: 'run' });
    expect(names(results, 'failed')).toEqual([...SAME_BYTES].sort());
  });

  it('marks the same-bytes cases not applicable when told distinctVersions is absent', async () => {
    const results = await runConformanceCases(new MemoryStore(), {
      prefix: 'run',
      capabilities: { distinctVersions: false },
    });
    expect(names(results, 'failed')).toEqual([]);
    expect(names(results, 'not-applicable')).toEqual([...DECLARED_ABSENT, ...SAME_BYTES].sort());
  });

  it('fails the plain-prefix listing case for a store that lists a prefix as a folder', async () => {
    const inner = new MemoryStore();
    const folderLister = new Proxy(inner, {
      get(target, property, receiver) {
        if (property === 'list')
          return (prefix: string, options?: ListOptions) =>
            target.list(prefix === '' || prefix.endsWith('/') ? prefix : `${prefix}/`, options);
        const value = Reflect.get(target, property, receiver);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const results = await runConformanceCases(folderLister, { prefix: 'run', groups: ['basics'] });
    expect(names(results, 'failed')).toEqual([PLAIN_PREFIX]);
  });

  it('fails the listPages case, and only it, for a store without listPages and for one whose pages ignore pageSize, drop a key or come out of order', async () => {
    const listPagesCase = conformanceCases.find((testCase) =>
      testCase.name.startsWith('listPages'),
    )!;
    const flawed: Record<string, (inner: MemoryStore) => ObjectStore> = {
      'no listPages': (inner) => withListPages(inner, undefined),
      // One page with everything, as a store that collects the listing first.
      'pageSize ignored': (inner) =>
        withListPages(inner, async function* (prefix, options) {
          yield await inner.list(prefix, options);
        }),
      'a key dropped': (inner) =>
        withListPages(inner, async function* (prefix, options) {
          let first = true;
          for await (const page of inner.listPages(prefix, options)) {
            yield first ? { ...page, objects: page.objects.slice(1) } : page;
            first = false;
          }
        }),
      'pages reversed': (inner) =>
        withListPages(inner, async function* (prefix, options) {
          const pages: ListPage[] = [];
          for await (const page of inner.listPages(prefix, options)) pages.push(page);
          yield* pages.reverse();
        }),
    };
    for (const [flaw, make] of Object.entries(flawed)) {
      const results = await runConformanceCases(make(new MemoryStore()), {
        prefix: 'run',
        groups: ['basics'],
      });
      expect(names(results, 'failed'), flaw).toEqual([listPagesCase.name]);
      if (flaw === 'no listPages')
        // Checked on the store as given, not on the suite's own wrapper (which has one).
        expect(results.find((result) => result.outcome === 'failed')?.detail).toMatch(
          /the store has no `listPages` method/,
        );
    }
    const honest = await runConformanceCases(new MemoryStore(), {
      prefix: 'run',
      groups: ['basics'],
    });
    expect(names(honest, 'failed')).toEqual([]);
    expect(names(honest, 'passed')).toContain(listPagesCase.name);
  });

  it('names a missing required method in every case instead of failing on it', async () => {
    const inner = new MemoryStore();
    const noUpload = new Proxy(inner, {
      get(target, property, receiver) {
        if (property === 'upload') return undefined;
        const value = Reflect.get(target, property, receiver);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const results = await runConformanceCases(noUpload, { prefix: 'run', groups: ['create'] });
    expect(results.length).toBeGreaterThan(0);
    for (const result of results.filter((r) => r.outcome !== 'not-applicable')) {
      expect(result.outcome).toBe('failed');
      expect(result.detail).toMatch(
        /^ConformanceFailure: the store has no `upload` method: an ObjectStore must have get, getStream, head, put, delete, list, upload$/,
      );
    }
    expect((await inner.list('')).objects).toEqual([]);
  });

  it('requires NotImplementedError from a store that declares no conditional put, also with content-hash versions', async () => {
    const declaredCase = DECLARED_ABSENT.find((name) => name.includes('conditional put'))!;
    const options = {
      prefix: 'run',
      capabilities: { conditionalPut: false },
      groups: ['create'] as const,
    };
    for (const inner of [new MemoryStore(), contentHashStore()]) {
      const refusing = await runConformanceCases(withoutConditionalPut(inner, 'refuses'), options);
      expect(refusing.find((result) => result.name === declaredCase)?.outcome).toBe('passed');
      const lying = await runConformanceCases(withoutConditionalPut(inner, 'accepts'), options);
      const lyingResult = lying.find((result) => result.name === declaredCase);
      expect(lyingResult?.outcome).toBe('failed');
      expect(lyingResult?.detail).toMatch(/expected NotImplementedError, but it succeeded/);
    }
  });

  it('reports the declared-absent case not applicable, never passed, for a store that declares the capability it is told is off', async () => {
    const declaredCase = DECLARED_ABSENT.find((name) => name.includes('conditional put'))!;
    for (const store of [new MemoryStore(), contentHashStore()]) {
      const results = await runConformanceCases(store, {
        prefix: 'run',
        capabilities: { conditionalPut: false },
        groups: ['create'],
      });
      expect(results.find((result) => result.name === declaredCase)).toMatchObject({
        outcome: 'not-applicable',
        detail:
          'conditionalPut is declared by the store but not tested; run probeConditionalWrites',
      });
    }
  });

  it('requires NotImplementedError from a store that declares no conditional delete', async () => {
    const refusing = withoutConditionalDelete(new MemoryStore(), 'refuses');
    const silent = withoutConditionalDelete(new MemoryStore(), 'ignores');
    const options = {
      prefix: 'run',
      capabilities: { conditionalDelete: false },
      groups: ['delete'] as const,
    };
    const refusingResults = await runConformanceCases(refusing, options);
    const silentResults = await runConformanceCases(silent, options);
    const declaredCase = DECLARED_ABSENT.find((name) => name.includes('conditional delete'))!;
    expect(refusingResults.find((result) => result.name === declaredCase)?.outcome).toBe('passed');
    const silentResult = silentResults.find((result) => result.name === declaredCase);
    expect(silentResult?.outcome).toBe('failed');
    expect(silentResult?.detail).toMatch(/NotImplementedError/);
  });
});

describe('probeConditionalWrites', () => {
  it('reports everything honoured for MemoryStore and cleans up', async () => {
    const store = new MemoryStore();
    const report = await probeConditionalWrites(store, 'probe');
    expect(report.create.outcome).toBe('honoured');
    expect(report.replace.outcome).toBe('honoured');
    expect(report.delete.outcome).toBe('honoured');
    expect(report.multipartCreate?.outcome).toBe('honoured');
    expect(report.cleanupError).toBeUndefined();
    expect((await store.list('')).objects).toEqual([]);
  });

  const expectedVerdicts: Record<
    StoreFlaw,
    Record<'create' | 'replace' | 'delete' | 'multipartCreate', string>
  > = {
    'ignores-create': {
      create: 'ignored',
      replace: 'honoured',
      delete: 'honoured',
      multipartCreate: 'ignored',
    },
    'ignores-if-match': {
      create: 'honoured',
      replace: 'ignored',
      delete: 'ignored',
      multipartCreate: 'honoured',
    },
    'not-atomic': {
      create: 'ignored',
      replace: 'ignored',
      delete: 'honoured',
      multipartCreate: 'honoured',
    },
    // Key rules and streaming are not what the probe looks at.
    'accepts-invalid-keys': {
      create: 'honoured',
      replace: 'honoured',
      delete: 'honoured',
      multipartCreate: 'honoured',
    },
    'buffers-uploads': {
      create: 'honoured',
      replace: 'honoured',
      delete: 'honoured',
      multipartCreate: 'honoured',
    },
    'skips-batch-deletes': {
      create: 'honoured',
      replace: 'honoured',
      delete: 'honoured',
      multipartCreate: 'honoured',
    },
    // Honours If-None-Match on a single write, not when a multipart upload
    // completes: only a probe that uploads more than one part can tell.
    'ignores-create-on-multipart': {
      create: 'honoured',
      replace: 'honoured',
      delete: 'honoured',
      multipartCreate: 'ignored',
    },
  };
  for (const flaw of Object.keys(expectedVerdicts) as StoreFlaw[]) {
    it(`reports what a store that ${flaw.replaceAll('-', ' ')} ignores`, async () => {
      const inner = new MemoryStore();
      const report = await probeConditionalWrites(brokenStore(inner, flaw), 'probe');
      expect({
        create: report.create.outcome,
        replace: report.replace.outcome,
        delete: report.delete.outcome,
        multipartCreate: report.multipartCreate?.outcome,
      }).toEqual(expectedVerdicts[flaw]);
      expect((await inner.list('')).objects).toEqual([]);
    });
  }

  it('reports everything honoured for a store whose versions are content hashes (it writes distinct bytes)', async () => {
    const store = new MemoryStore('s3-like', { versions: 'content-hash' });
    const report = await probeConditionalWrites(store, 'probe');
    expect({
      create: report.create.outcome,
      replace: report.replace.outcome,
      delete: report.delete.outcome,
      multipartCreate: report.multipartCreate?.outcome,
    }).toEqual({
      create: 'honoured',
      replace: 'honoured',
      delete: 'honoured',
      multipartCreate: 'honoured',
    });
  });

  it('names non-atomic checking in its evidence', async () => {
    const report = await probeConditionalWrites(
      brokenStore(new MemoryStore(), 'not-atomic'),
      'probe',
    );
    expect(report.create.evidence).toMatch(/not atomically: in round 1 of 4, \d+ of 8 concurrent/);
  });

  it('races several rounds: a store that double-wins only in a later round is caught, and one round would miss it', async () => {
    const plain = new MemoryStore();
    const broken = brokenStore(plain, 'not-atomic');
    // Atomic except for the third round of the create race.
    const laterRoundOnly = new Proxy(plain, {
      get(target, property) {
        if (property === 'put')
          return (key: string, body: Uint8Array, options?: PutOptions) =>
            (key.includes('create-race-3') ? broken : target).put(key, body, options);
        const value: unknown = Reflect.get(target, property);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const byDefault = await probeConditionalWrites(laterRoundOnly, 'probe', { multipart: false });
    expect(byDefault.create.outcome).toBe('ignored');
    expect(byDefault.create.evidence).toMatch(/in round 3 of 4, [2-8] of 8 concurrent creates/);
    const oneRound = await probeConditionalWrites(laterRoundOnly, 'probe-1', {
      multipart: false,
      rounds: 1,
    });
    expect(oneRound.create.outcome).toBe('honoured');
  });

  it('reports not-implemented for a store that refuses conditional deletes', async () => {
    const report = await probeConditionalWrites(
      withoutConditionalDelete(new MemoryStore(), 'refuses'),
      'probe',
      {
        multipart: false,
      },
    );
    expect(report.delete.outcome).toBe('not-implemented');
    expect(report.create.outcome).toBe('honoured');
    expect(report.multipartCreate).toBeUndefined();
  });

  it('rejects with the abort reason when aborted', async () => {
    const controller = new AbortController();
    controller.abort(new Error('stop probing'));
    await expect(
      probeConditionalWrites(new MemoryStore(), 'probe', { signal: controller.signal }),
    ).rejects.toThrow('stop probing');
  });
});

/** `inner` with its listPages replaced (`undefined`: none), nothing else changed. */
function withListPages(
  inner: MemoryStore,
  listPages: ((prefix: string, options?: ListPagesOptions) => AsyncIterable<ListPage>) | undefined,
): ObjectStore {
  return new Proxy(inner, {
    has(target, property) {
      return property === 'listPages' ? listPages !== undefined : Reflect.has(target, property);
    },
    get(target, property, receiver) {
      if (property === 'listPages') return listPages;
      const value = Reflect.get(target, property, receiver);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

/** `inner` declaring other capabilities than its own, nothing else changed. */
function claiming(inner: MemoryStore, claims: Partial<StoreCapabilities>): ObjectStore {
  const capabilities: StoreCapabilities = { ...inner.capabilities, ...claims };
  return new Proxy(inner, {
    get(target, property, receiver) {
      if (property === 'capabilities') return capabilities;
      const value = Reflect.get(target, property, receiver);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

/** MemoryStore declaring no conditional delete, which either refuses (correct) or silently ignores ifMatch. */
function withoutConditionalDelete(
  inner: MemoryStore,
  behaviour: 'refuses' | 'ignores',
): ObjectStore {
  const capabilities: StoreCapabilities = { ...inner.capabilities, conditionalDelete: false };
  return new Proxy(inner, {
    get(target, property, receiver) {
      if (property === 'capabilities') return capabilities;
      if (property === 'delete')
        return async (key: string, options: DeleteOptions = {}) => {
          if (options.ifMatch) {
            if (behaviour === 'refuses')
              throw new NotImplementedError('conditional delete', { key });
            return target.delete(key, options.signal ? { signal: options.signal } : {});
          }
          return target.delete(key, options);
        };
      const value = Reflect.get(target, property, receiver);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}
