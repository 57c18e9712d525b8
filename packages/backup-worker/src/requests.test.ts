import { FakeClock } from '@x/lease';
import { crc32Hex } from '@x/manifest';
import {
  type CallOptions,
  MemoryStore,
  NotImplementedError,
  type ObjectVersion,
  type PutOptions,
  StoreError,
} from '@x/store';
import { describe, expect, it } from 'vitest';
import { BackupError } from './errors.ts';
import { Requests } from './requests.ts';
import { TestHooks } from './test-hooks.ts';

/** A memory store whose puts can hang (until aborted) or refuse a mode. */
class ScriptedStore extends MemoryStore {
  hangPuts = false;
  refuseConditional = false;
  readonly modes: string[] = [];
  override async put(
    key: string,
    body: Uint8Array,
    options?: PutOptions & CallOptions,
  ): Promise<{ version: ObjectVersion }> {
    const mode = options?.mode ?? 'overwrite';
    this.modes.push(typeof mode === 'string' ? mode : 'ifMatch');
    if (this.refuseConditional && mode !== 'overwrite')
      throw new NotImplementedError('conditional put');
    if (this.hangPuts)
      await new Promise((_resolve, reject) => {
        const signal = options?.signal;
        if (signal?.aborted) reject(signal.reason);
        signal?.addEventListener('abort', () => reject(signal.reason), { once: true });
      });
    return super.put(key, body, options);
  }
}

function layer(
  options: {
    fence?: () => AbortSignal | null;
    conditional?: boolean;
    hooks?: TestHooks;
    store?: ScriptedStore;
  } = {},
) {
  const clock = new FakeClock();
  const store = options.store ?? new ScriptedStore();
  const conflicts: string[] = [];
  const requests = new Requests({
    store,
    clock,
    operationTimeoutMs: 1_000,
    conditional: options.conditional ?? true,
    hooks: options.hooks,
    callbacks: {
      runSignal: () => new AbortController().signal,
      writeFence: options.fence ?? (() => null),
      conflict: (what, key) => {
        conflicts.push(what);
        return new BackupError(what, { code: 'WRITER_CONFLICT', key });
      },
    },
  });
  return { clock, store, requests, conflicts };
}

const bytes = (text: string) => new TextEncoder().encode(text);

async function settle(): Promise<void> {
  for (let i = 0; i < 10; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}

describe('Requests', () => {
  it('sends no write while the fence refuses, and fails it with the fence’s error', async () => {
    const { store, requests } = layer({
      fence: () => {
        throw new BackupError('the bucket lease was lost', { code: 'WRITE_FENCED' });
      },
    });
    await expect(requests.putConditional('k', bytes('x'), 'create')).rejects.toThrow(
      'the bucket lease was lost',
    );
    expect(store.modes).toEqual([]);
    // Reads do not need the fence.
    expect(await requests.get('k')).toBeNull();
  });

  it('aborts a write in flight when the fence falls, rejecting with its reason', async () => {
    const fence = new AbortController();
    const { store, requests } = layer({ fence: () => fence.signal });
    store.hangPuts = true;
    const put = requests.putConditional('k', bytes('x'), 'create');
    await settle();
    fence.abort(
      new BackupError('another writer is using this backup prefix: test', { code: 'WRITE_FENCED' }),
    );
    await expect(put).rejects.toThrow('another writer is using this backup prefix: test');
    expect(await store.get('k')).toBeNull();
  });

  it('turns an abort whose reason is not a BackupError into a WRITE_FENCED one naming the request', async () => {
    const fence = new AbortController();
    const { store, requests } = layer({ fence: () => fence.signal });
    store.hangPuts = true;
    const put = requests.putConditional('k', bytes('x'), 'create');
    await settle();
    fence.abort(new Error('fence down'));
    const error = await put.catch((caught: unknown) => caught);
    expect(BackupError.hasCode(error, 'WRITE_FENCED')).toBe(true);
    expect((error as Error).message).toBe('PUT k was aborted: fence down');
  });

  it('gives up a request after the operation deadline on the injected clock', async () => {
    const { clock, store, requests } = layer();
    store.hangPuts = true;
    const put = requests.putConditional('k', bytes('x'), 'create');
    await settle();
    clock.advance(999);
    await settle();
    clock.advance(1);
    const error = await put.catch((caught: unknown) => caught);
    expect(BackupError.hasCode(error, 'OPERATION_TIMEOUT')).toBe(true);
    expect(error).toMatchObject({ operation: 'PUT k', timeoutMs: 1_000 });
    expect(BackupError.isInstance(error)).toBe(true);
  });

  it('accepts an immutable object already there with the same CRC, and calls other content a conflict', async () => {
    const { requests, conflicts } = layer();
    await requests.putImmutable('k', bytes('same'), crc32Hex(bytes('same')));
    await requests.putImmutable('k', bytes('same'), crc32Hex(bytes('same')));
    expect(conflicts).toEqual([]);
    await expect(
      requests.putImmutable('k', bytes('other'), crc32Hex(bytes('other'))),
    ).rejects.toSatisfy((error) => BackupError.hasCode(error, 'WRITER_CONFLICT'));
    expect(conflicts).toEqual(['k already exists with other content']);
  });

  it('falls back to an unconditional write where the store cannot do the mode, counting both attempts', async () => {
    const hooks = new TestHooks();
    const store = new ScriptedStore();
    store.refuseConditional = true;
    const { requests } = layer({ hooks, store });
    hooks.failAfterWrites(2);
    await requests.putConditional('k', bytes('x'), 'create');
    expect(store.modes).toEqual(['create', 'overwrite']);
    await expect(requests.deleteMany(['k'])).rejects.toThrow('write budget spent');
  });

  it('deletes many keys in batches of 1,000, tries every key, and answers with the ones that failed', async () => {
    const store = new ScriptedStore();
    const batches: number[] = [];
    const deleteMany = store.deleteMany.bind(store);
    store.deleteMany = async (keys, options) => {
      batches.push(keys.length);
      const result = await deleteMany(keys, options);
      return keys.includes('k/1500')
        ? {
            failed: [
              ...result.failed,
              { key: 'k/1500', error: new StoreError('refused', { key: 'k/1500' }) },
            ],
          }
        : result;
    };
    const keys = Array.from({ length: 2_500 }, (_, i) => `k/${i}`);
    for (const key of keys) await store.put(key, bytes('x'));
    const { requests } = layer({ store });
    const failed = await requests.deleteMany(keys);
    expect(batches).toEqual([1_000, 1_000, 500]);
    expect(failed.map(({ key }) => key)).toEqual(['k/1500']);
    expect((await store.list('k/')).objects).toEqual([]);
  });

  it('refuses a batch delete once the fence fell, deleting nothing', async () => {
    const fenced = new AbortController();
    fenced.abort(new BackupError('lease lost', { code: 'WRITE_FENCED' }));
    const { store, requests } = layer({ fence: () => fenced.signal });
    await store.put('k', bytes('x'));
    await expect(requests.deleteMany(['k'])).rejects.toSatisfy((error) =>
      BackupError.hasCode(error, 'WRITE_FENCED'),
    );
    expect(await store.get('k')).not.toBeNull();
  });

  it('writes unconditionally with conditional: false', async () => {
    const { store, requests } = layer({ conditional: false });
    await requests.putConditional('k', bytes('x'), 'create');
    await requests.putConditional('k', bytes('y'), { ifMatch: { etag: 'made-up' } });
    expect(store.modes).toEqual(['overwrite', 'overwrite']);
  });

  it('reports every LIST to the hooks', async () => {
    const hooks = new TestHooks();
    const { requests } = layer({ hooks });
    await requests.list('p/');
    await requests.list('p/wal/', '/');
    expect(hooks.listRequests()).toBe(2);
  });

  it('reads an object past its cap as too large', async () => {
    const { store, requests } = layer();
    await store.put('big', new Uint8Array(100));
    expect(await requests.getCapped('big', 10)).toBe('too-large');
    expect((await requests.getCapped('big', 100)) !== 'too-large').toBe(true);
  });
});
