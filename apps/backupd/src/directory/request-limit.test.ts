import { MemoryStore, type ObjectStore } from '@x/store';
import { ForwardingStore, type StoreOperation } from '@x/store/adapter';
import { describe, expect, it } from 'vitest';
import { LimitedStore, RequestLimit, requestOwner } from './request-limit.ts';

/** Records the order calls start in, and holds each until `open()`. */
class GatedStore extends ForwardingStore {
  readonly started: string[] = [];
  #gates: (() => void)[] = [];
  inFlight = 0;
  highest = 0;

  protected override async intercept<T>(
    _operation: StoreOperation,
    key: string,
    _signal: AbortSignal | undefined,
    proceed: () => Promise<T>,
  ): Promise<T> {
    this.started.push(key);
    this.inFlight += 1;
    this.highest = Math.max(this.highest, this.inFlight);
    await new Promise<void>((resolve) => this.#gates.push(resolve));
    this.inFlight -= 1;
    return proceed();
  }

  /** Lets every held call go on. */
  open(): number {
    const gates = this.#gates;
    this.#gates = [];
    for (const gate of gates) gate();
    return gates.length;
  }
}

async function settle(): Promise<void> {
  for (let i = 0; i < 20; i += 1) await Promise.resolve();
}

async function drain(gated: GatedStore, calls: Promise<unknown>[]): Promise<void> {
  let done = false;
  void Promise.all(calls).finally(() => {
    done = true;
  });
  while (!done) {
    gated.open();
    await settle();
  }
}

describe('LimitedStore', () => {
  it('shares turns round-robin among owners, each owner in the order it asked', async () => {
    const gated = new GatedStore(new MemoryStore());
    const limit = new RequestLimit(1);
    const store: ObjectStore = new LimitedStore(gated, limit);
    const hot = { name: 'hot' };
    const quiet = [{ name: 'a' }, { name: 'b' }];
    const asked = (owner: object, key: string) =>
      requestOwner.run(owner, () => store.put(key, new Uint8Array([1])));
    // The hot database asks first, and for many; each quiet one asks once after.
    const calls = Array.from({ length: 6 }, (_, i) => asked(hot, `hot/${i}`));
    calls.push(asked(quiet[0]!, 'a/0'), asked(quiet[1]!, 'b/0'));
    await settle();
    await drain(gated, calls);
    expect(gated.started).toEqual([
      'hot/0',
      'hot/1',
      'a/0',
      'b/0',
      'hot/2',
      'hot/3',
      'hot/4',
      'hot/5',
    ]);
    expect(limit.waiting).toBe(0);
  });

  it('drops an owner from the rotation when its only waiting request aborts', async () => {
    const gated = new GatedStore(new MemoryStore());
    const limit = new RequestLimit(1);
    const store: ObjectStore = new LimitedStore(gated, limit);
    const [a, b, c] = [{ name: 'a' }, { name: 'b' }, { name: 'c' }];
    const asked = (owner: object, key: string, signal?: AbortSignal) =>
      requestOwner.run(owner, () => store.put(key, new Uint8Array([1]), { signal }));
    const first = asked(a, 'a/0');
    const controller = new AbortController();
    const abandoned = asked(b, 'b/0', controller.signal);
    const rest = [asked(c, 'c/0'), asked(a, 'a/1')];
    await settle();
    controller.abort(new Error('gave up'));
    await expect(abandoned).rejects.toThrow('gave up');
    expect(limit.waiting).toBe(2);
    // Back in the rotation, b asks again: it comes last, not in its old place.
    rest.push(asked(b, 'b/1'));
    await settle();
    await drain(gated, [first, ...rest]);
    expect(gated.started).toEqual(['a/0', 'c/0', 'a/1', 'b/1']);
    expect(limit).toMatchObject({ waiting: 0, inFlight: 0 });
  });

  it('never has more than max requests in flight, and starts them in the order asked', async () => {
    const gated = new GatedStore(new MemoryStore());
    const store: ObjectStore = new LimitedStore(gated, new RequestLimit(4));
    const keys = Array.from({ length: 40 }, (_, i) => `db-${i % 5}/object-${i}`);
    const calls = keys.map((key) => store.put(key, new Uint8Array([1])));
    await settle();
    expect(gated.started).toHaveLength(4);
    await drain(gated, calls);
    expect(gated.highest).toBe(4);
    expect(gated.started).toEqual(keys);
  });

  it('lets a lease record through at once, however many wait', async () => {
    const gated = new GatedStore(new MemoryStore());
    const store = new LimitedStore(gated, new RequestLimit(1));
    const uploads = Array.from({ length: 5 }, (_, i) =>
      store.put(`db/object-${i}`, new Uint8Array([1])),
    );
    const renewal = store.put('db/LEASE', new Uint8Array([2]));
    await settle();
    expect([...gated.started].sort()).toEqual(['db/LEASE', 'db/object-0']);
    await drain(gated, [...uploads, renewal]);
  });

  it('gives up its place when its signal aborts while it waits', async () => {
    const gated = new GatedStore(new MemoryStore());
    const limit = new RequestLimit(1);
    const store = new LimitedStore(gated, limit);
    const first = store.put('a', new Uint8Array([1]));
    const controller = new AbortController();
    const abandoned = store.put('b', new Uint8Array([1]), { signal: controller.signal });
    const third = store.put('c', new Uint8Array([1]));
    await settle();
    controller.abort(new Error('gave up'));
    await expect(abandoned).rejects.toThrow('gave up');
    expect(limit.waiting).toBe(1);
    await drain(gated, [first, third]);
    expect(gated.started).toEqual(['a', 'c']);
    expect(limit.inFlight).toBe(0);
  });

  it('refuses a limit below one', () => {
    expect(() => new RequestLimit(0)).toThrow(RangeError);
  });
});
