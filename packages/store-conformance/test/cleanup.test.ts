/**
 * Cleanup after the probe and the cases must not rest on the store's
 * listing, and must say what it could not delete: a store whose listing
 * drops keys is cleaned completely (every key written is remembered), and a
 * store whose deletes fail is reported with the count and the prefix left.
 */
import {
  type DeleteOptions,
  type ListOptions,
  type ListResult,
  MemoryStore,
  type ObjectStore,
  StoreError,
} from '@x/store';
import { describe, expect, it } from 'vitest';
import { cleanUpPrefix, probeConditionalWrites, runConformanceCases } from '../src/index.ts';

/** A MemoryStore whose listings show nothing under `hidden`, as a broken listing would. */
class BlindListingStore extends MemoryStore {
  override async list(prefix: string, options?: ListOptions): Promise<ListResult> {
    const listing = await super.list(prefix, options);
    return { ...listing, objects: listing.objects.filter((info) => !info.key.includes('/')) };
  }
}

/** A MemoryStore whose unconditional deletes under `failing` throw. */
class FailingDeleteStore extends MemoryStore {
  readonly failing: string;
  constructor(failing: string) {
    super();
    this.failing = failing;
  }
  override async delete(key: string, options?: DeleteOptions): Promise<void> {
    if (key.startsWith(this.failing) && !options?.ifMatch)
      throw new StoreError(`injected: delete of ${key} refused`, { key });
    return super.delete(key, options);
  }
}

async function allKeys(store: ObjectStore): Promise<string[]> {
  return (await new MemoryStore().list.call(store, '')).objects.map((info) => info.key);
}

describe('cleanup of the probe and the cases', () => {
  it('the probe leaves nothing behind on a store whose listing hides every key under the prefix', async () => {
    const store = new BlindListingStore();
    const report = await probeConditionalWrites(store, 'probe');
    expect(report.create.outcome).toBe('honoured');
    expect(report.cleanup).toBeUndefined();
    // MemoryStore's own listing (not the blind one) sees what is really there.
    expect(await allKeys(store)).toEqual([]);
  });

  it('the cases leave nothing behind on a store whose listing hides every key under the prefix', async () => {
    const store = new BlindListingStore();
    const results = await runConformanceCases(store, {
      prefix: 'run',
      groups: ['create', 'replace', 'delete'],
    });
    expect(results.filter((result) => result.cleanup !== undefined)).toEqual([]);
    expect(await allKeys(store)).toEqual([]);
  });

  it('the probe reports how many objects it left under which prefix when deletes fail', async () => {
    const store = new FailingDeleteStore('probe/');
    const report = await probeConditionalWrites(store, 'probe');
    expect(report.cleanup).toBeDefined();
    const left = await allKeys(store);
    expect(left.length).toBeGreaterThan(0);
    expect(report.cleanup!.left).toBe(left.length);
    expect(report.cleanup!.prefix).toMatch(/^probe\/conditional-write-probe-/);
    expect(left.every((key) => key.startsWith(`${report.cleanup!.prefix}/`))).toBe(true);
    expect(report.cleanup!.listed).toBe(true);
    expect(report.cleanup!.errors.join('\n')).toContain('injected: delete of');
    expect(report.cleanupError).toContain(
      `${left.length} objects left under ${report.cleanup!.prefix}/`,
    );
  });

  it('a case whose cleanup fails is failed and carries what was left where', async () => {
    const store = new FailingDeleteStore('run/');
    const results = await runConformanceCases(store, { prefix: 'run', groups: ['create'] });
    const reported = results.filter((result) => result.cleanup !== undefined);
    expect(reported.length).toBeGreaterThan(0);
    for (const result of reported) {
      // Failed, for its own reason or for the cleanup's.
      expect(result.outcome).toBe('failed');
      expect(result.cleanup!.prefix).toMatch(/^run\/\d\d-create$/);
      expect(result.cleanup!.errors.join('\n')).toContain('injected: delete of');
    }
    const cleanupOnly = reported.filter((result) => result.detail.includes('cleanup:'));
    expect(cleanupOnly.length).toBeGreaterThan(0);
    for (const result of cleanupOnly)
      expect(result.detail).toMatch(/cleanup: \d+ objects? left under run\/\d\d-create\//);
    const left = await allKeys(store);
    expect(reported.reduce((sum, result) => sum + result.cleanup!.left, 0)).toBe(left.length);
  });

  it('cleanUpPrefix says the count is a lower bound when the final listing fails, and never touches other keys', async () => {
    const store = new MemoryStore();
    await store.put('scratch/a', new Uint8Array([1]));
    await store.put('scratch/b', new Uint8Array([2]));
    await store.put('scratch-neighbour', new Uint8Array([3]));
    const failingList = Object.assign(Object.create(store) as MemoryStore, {
      list: async () => {
        throw new StoreError('injected: list refused');
      },
      delete: async (key: string) => {
        if (key === 'scratch/b') throw new StoreError('injected: delete refused', { key });
        return store.delete(key);
      },
    });
    const failure = await cleanUpPrefix(failingList, 'scratch', [
      'scratch/a',
      'scratch/b',
      'other',
    ]);
    expect(failure).toMatchObject({
      prefix: 'scratch',
      left: 1,
      sample: ['scratch/b'],
      listed: false,
    });
    expect(failure!.errors.join('\n')).toMatch(/injected: list refused/);
    expect(failure!.errors.join('\n')).toMatch(/injected: delete refused/);
    expect((await store.list('')).objects.map((info) => info.key)).toEqual([
      'scratch-neighbour',
      'scratch/b',
    ]);
  });
});
