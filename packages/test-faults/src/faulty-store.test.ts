import { ConflictError, listPages, MemoryStore, type ObjectStore, StoreError } from '@x/store';
import { STORE_OPERATIONS } from '@x/store/adapter';
import { describe, expect, it } from 'vitest';
import { ManualClock, settle } from './clock.ts';
import { faultyStore } from './faulty-store.ts';
import { injectedFaultKind } from './injected-fault.ts';
import type { FaultRule } from './schedule.ts';

const bytes = (text: string) => new TextEncoder().encode(text);
const text = (body: Uint8Array) => new TextDecoder().decode(body);

function setup(rules: FaultRule[], seed = 1) {
  const inner = new MemoryStore();
  const clock = new ManualClock();
  const store = faultyStore(inner, { schedule: { rules }, seed, clock });
  return { inner, clock, store };
}

/** Settles a promise into a value or an error, without letting it reject unobserved. */
function outcome<T>(promise: Promise<T>) {
  const state: { done: boolean; value?: T; error?: unknown } = { done: false };
  promise.then(
    (value) => Object.assign(state, { done: true, value }),
    (error: unknown) => Object.assign(state, { done: true, error }),
  );
  return state;
}

describe('faultyStore', () => {
  it('passes calls through unchanged when no rule fires', async () => {
    const { inner, store } = setup([{ kind: 'reset', probability: 0 }]);
    await store.put('a', bytes('one'));
    expect(text((await inner.get('a'))!.body)).toBe('one');
    expect(text((await store.get('a'))!.body)).toBe('one');
    expect((await store.list('')).objects.map((object) => object.key)).toEqual(['a']);
    expect(Object.values(store.counts()).every((count) => count === 0)).toBe(true);
    expect(store.requests()).toBe(3);
  });

  it('delays a call by the latency on the injected clock, without sleeping', async () => {
    const { clock, store } = setup([{ kind: 'latency', methods: ['put'], latencyMs: 250 }]);
    const put = outcome(store.put('a', bytes('x')));
    await clock.tick(249);
    expect(put.done).toBe(false);
    await clock.tick(1);
    expect(put.done).toBe(true);
    expect(put.error).toBeUndefined();
    expect(store.counts().latency).toBe(1);
    expect(store.faults()[0]).toMatchObject({ kind: 'latency', method: 'put', path: 'a', ms: 250 });
  });

  it('fails a reset without calling the inner store', async () => {
    const { inner, store } = setup([{ kind: 'reset', methods: ['put'] }]);
    const error = await store.put('a', bytes('x')).catch((caught: unknown) => caught);
    expect(StoreError.isInstance(error)).toBe(true);
    expect(injectedFaultKind(error)).toBe('reset');
    expect(await inner.head('a')).toBeNull();
    expect(store.counts().reset).toBe(1);
  });

  it('answers 500 and 503 as StoreErrors naming the status, without calling the inner store', async () => {
    const { inner, store } = setup([
      { kind: 'error500', path: 'five-hundred' },
      { kind: 'error503', path: 'five-oh-three' },
    ]);
    const first = await store.put('five-hundred', bytes('x')).catch((caught: unknown) => caught);
    const second = await store.put('five-oh-three', bytes('x')).catch((caught: unknown) => caught);
    expect(StoreError.isInstance(first) && first.message).toMatch(/500/);
    expect(StoreError.isInstance(second) && second.message).toMatch(/503/);
    expect((await inner.list('')).objects).toHaveLength(0);
    expect(store.counts()).toMatchObject({ error500: 1, error503: 1 });
  });

  it('answers a conflict as ConflictError, without writing', async () => {
    const { inner, store } = setup([{ kind: 'conflict', methods: ['put'], limit: 1 }]);
    const error = await store.put('LEASE', bytes('x'), { mode: 'create' }).catch((e: unknown) => e);
    expect(ConflictError.isInstance(error)).toBe(true);
    expect(await inner.head('LEASE')).toBeNull();
    // The limit is spent: the retry goes through.
    await store.put('LEASE', bytes('x'), { mode: 'create' });
    expect(text((await inner.get('LEASE'))!.body)).toBe('x');
  });

  it('applies a write whose answer is lost, and still fails the call', async () => {
    const { inner, store } = setup([{ kind: 'lostResponse', methods: ['put'] }]);
    const error = await store
      .put('LEASE', bytes('mine'), { mode: 'create' })
      .catch((e: unknown) => e);
    expect(StoreError.isInstance(error)).toBe(true);
    expect(injectedFaultKind(error)).toBe('lostResponse');
    expect(text((await inner.get('LEASE'))!.body)).toBe('mine');
    expect(store.counts().lostResponse).toBe(1);
  });

  it('loses the answer even when the inner store refused the call', async () => {
    const { inner, store } = setup([{ kind: 'lostResponse', methods: ['put'], skip: 1 }]);
    await store.put('LEASE', bytes('first'), { mode: 'create' });
    const error = await store
      .put('LEASE', bytes('second'), { mode: 'create' })
      .catch((e: unknown) => e);
    expect(injectedFaultKind(error)).toBe('lostResponse');
    expect(text((await inner.get('LEASE'))!.body)).toBe('first');
  });

  it("stalls getStream's body after the given bytes, until the clock moves", async () => {
    const { inner, clock, store } = setup([
      { kind: 'stall', methods: ['getStream'], stallMs: 500, stallAfterBytes: 3 },
    ]);
    await inner.put('big', bytes('abcdefgh'));
    const result = await store.getStream('big');
    const iterator = result!.body[Symbol.asyncIterator]();
    const first = await iterator.next();
    expect(text(first.value as Uint8Array)).toBe('abc');
    const second = outcome(iterator.next());
    await clock.tick(499);
    expect(second.done).toBe(false);
    await clock.tick(1);
    expect(second.done).toBe(true);
    expect(text((second.value as IteratorResult<Uint8Array>).value as Uint8Array)).toBe('defgh');
    expect(store.counts().stall).toBe(1);
  });

  it('lets the signal abort a stalled body', async () => {
    const { inner, store } = setup([{ kind: 'stall', methods: ['getStream'], stallMs: 10_000 }]);
    await inner.put('big', bytes('abc'));
    const controller = new AbortController();
    const result = await store.getStream('big', { signal: controller.signal });
    const reading = (async () => {
      for await (const _chunk of result!.body) {
        // drain
      }
    })().catch((error: unknown) => error);
    await settle();
    controller.abort(new Error('gave up'));
    expect(((await reading) as Error).message).toBe('gave up');
  });

  it('holds back the answer of a stalled put after applying it', async () => {
    const { inner, clock, store } = setup([{ kind: 'stall', methods: ['put'], stallMs: 100 }]);
    const put = outcome(store.put('a', bytes('x')));
    await settle();
    expect(await inner.head('a')).not.toBeNull();
    expect(put.done).toBe(false);
    await clock.tick(100);
    expect(put.done).toBe(true);
  });

  it('hangs every call during a partition until the signal aborts it', async () => {
    const { inner, store } = setup([]);
    store.setPartition(Number.POSITIVE_INFINITY);
    const controller = new AbortController();
    const put = outcome(store.put('a', bytes('x'), { signal: controller.signal }));
    const get = outcome(store.get('a', { signal: AbortSignal.abort(new Error('already')) }));
    await settle();
    expect(put.done).toBe(false);
    controller.abort(new Error('deadline'));
    await settle();
    expect((put.error as Error).message).toBe('deadline');
    expect((get.error as Error).message).toBe('already');
    expect(await inner.head('a')).toBeNull();
  });

  it('fails hung calls with a StoreError when the partition ends, and lets later calls through', async () => {
    const { inner, clock, store } = setup([
      { kind: 'partition', methods: ['put'], durationMs: 1000, limit: 1 },
    ]);
    const first = outcome(store.put('a', bytes('x')));
    const second = outcome(store.head('a'));
    await clock.tick(999);
    expect(first.done || second.done).toBe(false);
    expect(store.partitioned()).toBe(true);
    await clock.tick(1);
    expect(StoreError.isInstance(first.error)).toBe(true);
    expect(injectedFaultKind(second.error)).toBe('partition');
    expect(store.partitioned()).toBe(false);
    await store.put('a', bytes('y'));
    expect(text((await inner.get('a'))!.body)).toBe('y');
    expect(store.counts().partition).toBe(2);
  });

  it('ends a partition early with setPartition(false)', async () => {
    const { store } = setup([]);
    store.partitionFor(60_000);
    const call = outcome(store.list(''));
    await settle();
    store.setPartition(false);
    await settle();
    expect(StoreError.isInstance(call.error)).toBe(true);
    expect(await store.list('')).toEqual({ objects: [], commonPrefixes: [] });
  });

  it('injects the same faults for the same seed and call order, different ones for another seed', async () => {
    const rules: FaultRule[] = [
      { kind: 'error503', probability: 0.4 },
      { kind: 'lostResponse', methods: ['put'], probability: 0.3 },
    ];
    async function run(seed: number): Promise<string[]> {
      const { store } = setup(rules, seed);
      const seen: string[] = [];
      for (let index = 0; index < 60; index += 1) {
        const call =
          index % 2 === 0
            ? store.put(`k${index % 5}`, bytes(`${index}`))
            : store.get(`k${index % 5}`);
        seen.push(
          await call.then(
            () => 'ok',
            (error: unknown) => injectedFaultKind(error) ?? 'real',
          ),
        );
      }
      return seen;
    }
    const first = await run(11);
    expect(await run(11)).toEqual(first);
    expect(await run(12)).not.toEqual(first);
    expect(first).toContain('error503');
    expect(first).toContain('lostResponse');
  });
});

describe('faultyStore covers every method', () => {
  const call = async (store: ObjectStore, operation: (typeof STORE_OPERATIONS)[number]) => {
    switch (operation) {
      case 'get':
        return store.get('k');
      case 'getStream':
        return store.getStream('k');
      case 'head':
        return store.head('k');
      case 'put':
        return store.put('k', bytes('x'));
      case 'delete':
        return store.delete('k');
      case 'list':
        return store.list('');
      case 'listPages':
        return collect(listPages(store, ''));
      case 'deleteMany':
        return store.deleteMany?.(['k']);
      case 'upload':
        return store.upload('k', bytes('x'));
    }
  };

  it('answers a rule for each method of ObjectStore with the fault, without calling the inner store', async () => {
    for (const operation of STORE_OPERATIONS) {
      // A page request of listPages is a list request; a batch delete is a delete.
      const scheduled =
        operation === 'listPages' ? 'list' : operation === 'deleteMany' ? 'delete' : operation;
      const inner = new MemoryStore();
      await inner.put('k', bytes('before'));
      let innerCalls = 0;
      const counting = new Proxy(inner, {
        get(target, property, receiver) {
          const value = Reflect.get(target, property, receiver);
          if (typeof value !== 'function') return value;
          if (property === 'listPages')
            // Making the listing sends nothing; asking it for a page does.
            return (...args: unknown[]) => {
              const pages = (value.apply(target, args) as AsyncIterable<unknown>)[
                Symbol.asyncIterator
              ]();
              return {
                [Symbol.asyncIterator]: () => ({
                  next: () => {
                    innerCalls++;
                    return pages.next();
                  },
                }),
              };
            };
          return (...args: unknown[]) => {
            innerCalls++;
            return value.apply(target, args);
          };
        },
      });
      const store = faultyStore(counting, {
        schedule: { rules: [{ kind: 'error500', methods: [scheduled] }] },
        seed: 1,
      });
      const error = await call(store, operation).then(
        () => undefined,
        (caught: unknown) => caught,
      );
      expect(injectedFaultKind(error), operation).toBe('error500');
      expect(innerCalls, operation).toBe(0);
      expect(store.counts().error500, operation).toBe(1);
      expect(text((await inner.get('k'))!.body), operation).toBe('before');
    }
  });

  it('asks the schedule once per page of listPages, so a fault can hit a later page', async () => {
    const { inner, store } = setup([{ kind: 'reset', methods: ['list'], skip: 1 }]);
    for (const key of ['a', 'b', 'c', 'd']) await inner.put(key, bytes(key));
    const pages: string[][] = [];
    const error = await (async () => {
      for await (const page of listPages(store, '', { pageSize: 2 }))
        pages.push(page.objects.map((object) => object.key));
    })().then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(pages).toEqual([['a', 'b']]);
    expect(injectedFaultKind(error)).toBe('reset');
    expect(store.requests()).toBe(2);
  });

  it('lists every page through the schedule when no rule fires', async () => {
    const { inner, store } = setup([]);
    for (const key of ['a', 'b', 'c']) await inner.put(key, bytes(key));
    const pages = await collect(listPages(store, '', { pageSize: 2 }));
    expect(pages.map((page) => page.objects.map((object) => object.key))).toEqual([
      ['a', 'b'],
      ['c'],
    ]);
    // Two pages and the step that ends the listing.
    expect(store.requests()).toBe(3);
  });
});

async function collect<T>(items: AsyncIterable<T>): Promise<T[]> {
  const all: T[] = [];
  for await (const item of items) all.push(item);
  return all;
}
