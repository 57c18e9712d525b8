import { describe, expect, it } from 'vitest';
import { AlreadyExistsError, InvalidKeyError, PreconditionFailedError } from './errors.ts';
import { MemoryStore } from './memory-store.ts';

describe('MemoryStore', () => {
  it('refuses a second create and keeps the first content', async () => {
    const store = new MemoryStore();
    await store.put('a', new TextEncoder().encode('one'), { mode: 'create' });
    await expect(
      store.put('a', new TextEncoder().encode('two'), { mode: 'create' }),
    ).rejects.toBeInstanceOf(AlreadyExistsError);
    expect(new TextDecoder().decode((await store.get('a'))!.body)).toBe('one');
  });
  it('refuses a stale ifMatch', async () => {
    const store = new MemoryStore();
    const first = await store.put('a', new Uint8Array([1]));
    await store.put('a', new Uint8Array([1]));
    await expect(
      store.put('a', new Uint8Array([2]), { mode: { ifMatch: first.version } }),
    ).rejects.toBeInstanceOf(PreconditionFailedError);
  });
  it('refuses keys that climb out', async () => {
    await expect(new MemoryStore().get('../x')).rejects.toBeInstanceOf(InvalidKeyError);
  });
});
