import { describe, expect, it } from 'vitest';
import { getCapped, isTooLarge } from './get-capped.ts';
import { MemoryStore } from './memory-store.ts';
import type { GetStreamResult, ObjectStore } from './object-store.ts';

describe('getCapped', () => {
  it('returns the object at or under the limit, null when missing', async () => {
    const store = new MemoryStore();
    await store.put('k', new Uint8Array(10));
    const read = await getCapped(store, 'k', 10);
    expect(isTooLarge(read)).toBe(false);
    expect(read && !isTooLarge(read) ? read.body.byteLength : -1).toBe(10);
    expect(await getCapped(store, 'missing', 10)).toBeNull();
  });

  it('refuses an object over the limit', async () => {
    const store = new MemoryStore();
    await store.put('k', new Uint8Array(11));
    expect(await getCapped(store, 'k', 10)).toEqual({ tooLarge: true, size: 11 });
  });

  it('stops reading a body longer than the size the store announced', async () => {
    let served = 0;
    const lying = {
      async getStream(key: string): Promise<GetStreamResult> {
        async function* endless(): AsyncIterable<Uint8Array> {
          while (true) {
            served += 4;
            yield new Uint8Array(4);
          }
        }
        return { key, size: 1, version: { etag: '"x"' }, body: endless() };
      },
    } as unknown as ObjectStore;
    const read = await getCapped(lying, 'k', 10);
    expect(isTooLarge(read)).toBe(true);
    expect(served).toBeLessThanOrEqual(12);
  });
});
