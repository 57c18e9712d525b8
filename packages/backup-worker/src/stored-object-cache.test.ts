import { describe, expect, it } from 'vitest';
import { StoredObjectCache } from './stored-object-cache.ts';

const bytes = (n: number, fill = 1) => new Uint8Array(n).fill(fill);

describe('StoredObjectCache', () => {
  it('hands an entry out once', () => {
    const cache = new StoredObjectCache(100);
    cache.remember('a', bytes(10, 7));
    expect(cache.take('a')).toEqual(bytes(10, 7));
    expect(cache.take('a')).toBeUndefined();
    expect(cache.bytes).toBe(0);
  });

  it('evicts the oldest entries beyond its bound, and keeps nothing larger than it', () => {
    const cache = new StoredObjectCache(25);
    cache.remember('a', bytes(10));
    cache.remember('b', bytes(10));
    cache.remember('c', bytes(10));
    expect(cache.take('a')).toBeUndefined();
    expect(cache.bytes).toBe(20);
    cache.remember('huge', bytes(26));
    expect(cache.take('huge')).toBeUndefined();
    expect(cache.take('b')).toBeDefined();
    expect(cache.take('c')).toBeDefined();
  });

  it('replaces an entry remembered again, counting its bytes once', () => {
    const cache = new StoredObjectCache(100);
    cache.remember('a', bytes(10));
    cache.remember('a', bytes(30, 2));
    expect(cache.bytes).toBe(30);
    expect(cache.take('a')).toEqual(bytes(30, 2));
    cache.remember('b', bytes(5));
    cache.clear();
    expect(cache.bytes).toBe(0);
    expect(cache.take('b')).toBeUndefined();
  });
});
