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
  it('gives a rewrite of identical bytes a new version (distinctVersions)', async () => {
    const store = new MemoryStore();
    expect(store.capabilities.distinctVersions).toBe(true);
    const first = await store.put('a', new Uint8Array([7]));
    const second = await store.put('a', new Uint8Array([7]));
    expect(second.version).not.toEqual(first.version);
  });
  it('with content-hash versions, keeps the version of identical bytes like S3 (distinctVersions false)', async () => {
    const store = new MemoryStore('s3-like', { versions: 'content-hash' });
    expect(store.capabilities.distinctVersions).toBe(false);
    const first = await store.put('a', new Uint8Array([7]));
    expect(first.version).toEqual({ etag: '"89e74e640b8c46257a29de0616794d5d"' });
    const same = await store.put('a', new Uint8Array([7]), { mode: { ifMatch: first.version } });
    expect(same.version).toEqual(first.version);
    const other = await store.put('a', new Uint8Array([8]), { mode: { ifMatch: same.version } });
    expect(other.version).not.toEqual(first.version);
    await expect(
      store.put('a', new Uint8Array([9]), { mode: { ifMatch: first.version } }),
    ).rejects.toBeInstanceOf(PreconditionFailedError);
  });
  it('refuses keys that climb out', async () => {
    await expect(new MemoryStore().get('../x')).rejects.toBeInstanceOf(InvalidKeyError);
  });
});
