import { crc32Hex } from '@x/manifest';
import type { GetStreamResult, ObjectStore } from '@x/store';
import { describe, expect, it } from 'vitest';
import { ObjectCorruptError, ObjectMissingError } from './restore-errors.ts';
import { downloadVerified } from './verified-download.ts';

/** A store whose one object streams in the given chunks, reporting `size`. */
function storeServing(chunks: Uint8Array[] | null, size?: number) {
  let pulled = 0;
  const store = {
    async getStream(key: string): Promise<GetStreamResult | null> {
      if (chunks === null) return null;
      const total = size ?? chunks.reduce((sum, chunk) => sum + chunk.byteLength, 0);
      return {
        key,
        size: total,
        version: { etag: '"1"' },
        body: (async function* () {
          for (const chunk of chunks) {
            pulled += 1;
            yield chunk;
          }
        })(),
      };
    },
  } as unknown as ObjectStore;
  return { store, pulled: () => pulled };
}

const bytes = new Uint8Array([1, 2, 3, 4, 5, 6, 7, 8, 9]);
const chunks = [bytes.subarray(0, 3), bytes.subarray(3, 6), bytes.subarray(6)];
const expected = { key: 'p/o', size: bytes.byteLength, crc32: crc32Hex(bytes) };

describe('downloadVerified', () => {
  it('hands every chunk to the sink in order and resolves when size and CRC match', async () => {
    const { store } = storeServing(chunks);
    const seen: number[] = [];
    const progress: number[] = [];
    await downloadVerified(
      store,
      expected,
      async (chunk) => {
        await new Promise((resolve) => setImmediate(resolve));
        seen.push(...chunk);
      },
      { manifestKey: 'm', onBytes: (read) => progress.push(read) },
    );
    expect(seen).toEqual([...bytes]);
    expect(progress).toEqual([3, 6, 9]);
  });

  it('refuses a wrong reported size before reading a byte', async () => {
    const { store, pulled } = storeServing(chunks, 10);
    const error = await downloadVerified(store, expected, () => {}, { manifestKey: 'm' }).catch(
      (e: unknown) => e,
    );
    expect(ObjectCorruptError.isInstance(error)).toBe(true);
    expect(error).toMatchObject({ key: 'p/o', property: 'size', expected: '9', actual: '10' });
    expect(pulled()).toBe(0);
  });

  it('cuts off a body longer than it said, and refuses a shorter one', async () => {
    const longer = storeServing([...chunks, new Uint8Array([0])], 9);
    const sunk: Uint8Array[] = [];
    const tooLong = await downloadVerified(
      longer.store,
      expected,
      (chunk) => {
        sunk.push(chunk);
      },
      { manifestKey: 'm' },
    ).catch((e: unknown) => e);
    expect(tooLong).toMatchObject({ property: 'size', actual: 'more than 9' });
    expect(sunk).toHaveLength(3);
    const shorter = storeServing(chunks.slice(0, 2), 9);
    const tooShort = await downloadVerified(shorter.store, expected, () => {}, {
      manifestKey: 'm',
    }).catch((e: unknown) => e);
    expect(tooShort).toMatchObject({ property: 'size', expected: '9', actual: '6' });
  });

  it('refuses a CRC mismatch naming both values', async () => {
    const damaged = bytes.slice();
    damaged[4] = 0;
    const { store } = storeServing([damaged]);
    const error = await downloadVerified(store, expected, () => {}, { manifestKey: 'm' }).catch(
      (e: unknown) => e,
    );
    expect(error).toMatchObject({
      property: 'crc32',
      expected: crc32Hex(bytes),
      actual: crc32Hex(damaged),
    });
  });

  it('a missing object is ObjectMissingError naming the manifest', async () => {
    const { store } = storeServing(null);
    const error = await downloadVerified(store, expected, () => {}, {
      manifestKey: 'p/manifest/1',
    }).catch((e: unknown) => e);
    expect(ObjectMissingError.isInstance(error)).toBe(true);
    expect(error).toMatchObject({ key: 'p/o', manifestKey: 'p/manifest/1' });
  });

  it('a sink failure (a full disk) rejects the download with that failure, without an unhandled rejection', async () => {
    const { store } = storeServing(chunks);
    const full = new Error('ENOSPC: no space left on device');
    let calls = 0;
    const error = await downloadVerified(
      store,
      expected,
      async () => {
        calls += 1;
        if (calls === 1) throw full;
      },
      { manifestKey: 'm' },
    ).catch((e: unknown) => e);
    expect(error).toBe(full);
    expect(calls).toBe(1);
  });
});
