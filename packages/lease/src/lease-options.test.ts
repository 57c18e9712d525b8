import { MemoryStore, type ObjectStore } from '@x/store';
import { describe, expect, it } from 'vitest';
import { BucketLease, releaseOwnRecord } from './bucket-lease.ts';
import { FakeClock } from './clock.ts';
import { LeaseError, LeaseOptionsError } from './errors.ts';
import { holdLease } from './keeper.ts';
import type { AcquireOptions } from './lease-options.ts';
import { MAX_SANE_TTL_S, readLease } from './record.ts';

const silent = { info() {}, warn() {} };

/** A store that fails the test if the lease sends anything. */
const untouchable = new Proxy({} as ObjectStore, {
  get(_target, property) {
    if (property === 'description') return 'untouchable';
    throw new Error(`the store was used (${String(property)}) before the options were checked`);
  },
});

const base: AcquireOptions = { prefix: 'db', instanceId: 'me', clock: new FakeClock() };

async function optionError(options: AcquireOptions): Promise<LeaseOptionsError> {
  for (const attempt of [
    () => BucketLease.acquireAs(untouchable, options),
    () => holdLease(untouchable, options),
  ]) {
    try {
      await attempt();
    } catch (error) {
      expect(LeaseOptionsError.isInstance(error)).toBe(true);
      expect(LeaseError.isInstance(error)).toBe(true);
      continue;
    }
    throw new Error('expected a LeaseOptionsError');
  }
  try {
    await BucketLease.acquireAs(untouchable, options);
  } catch (error) {
    return error as LeaseOptionsError;
  }
  throw new Error('unreachable');
}

describe('invalid options are refused before any request', () => {
  it('a TTL under 3 s', async () => {
    const error = await optionError({ ...base, ttlSeconds: 2 });
    expect(error.option).toBe('ttlSeconds');
    expect(error.message).toMatch(/at least 3 s/);
  });
  it('a TTL over MAX_SANE_TTL_S', async () => {
    const error = await optionError({ ...base, ttlSeconds: MAX_SANE_TTL_S + 1 });
    expect(error.option).toBe('ttlSeconds');
    expect(error.message).toMatch(/MAX_SANE_TTL_S/);
  });
  it('a fractional TTL', async () => {
    expect((await optionError({ ...base, ttlSeconds: 4.5 })).option).toBe('ttlSeconds');
  });
  it('an empty prefix', async () => {
    const error = await optionError({ ...base, prefix: '' });
    expect(error.option).toBe('prefix');
  });
  it('an empty instance id', async () => {
    expect((await optionError({ ...base, instanceId: '' })).option).toBe('instanceId');
  });
  it('a renewal timeout that is not positive (holdLease)', async () => {
    await expect(holdLease(untouchable, { ...base, renewTimeoutMs: 0 })).rejects.toSatisfy(
      (error) => LeaseOptionsError.isInstance(error) && error.option === 'renewTimeoutMs',
    );
  });
  it('a negative term', async () => {
    expect((await optionError({ ...base, term: -1 })).option).toBe('term');
  });
  it('an ownRecord other than continue or reclaim', async () => {
    const error = await optionError({ ...base, ownRecord: 'steal' as 'reclaim' });
    expect(error.option).toBe('ownRecord');
    expect(error.message).toMatch(/'continue' or 'reclaim'/);
  });
});

describe('unknown options are refused, naming the option', () => {
  it('a misspelt TTL (ttlMs) on acquireAs and holdLease', async () => {
    const error = await optionError({ ...base, ttlMs: 5000 } as AcquireOptions);
    expect(error.option).toBe('ttlMs');
    expect(error.message).toMatch(/`ttlMs`: not an option of BucketLease\.acquireAs/);
    expect(error.message).toMatch(/did you mean `ttlSeconds`\?/);
    await expect(
      holdLease(untouchable, { ...base, ttlMs: 5000 } as AcquireOptions),
    ).rejects.toThrow(/not an option of holdLease/);
  });
  it('a keeper option given to acquireAs', async () => {
    await expect(
      BucketLease.acquireAs(untouchable, { ...base, renewRetry: 'steady' } as AcquireOptions),
    ).rejects.toSatisfy(
      (error) => LeaseOptionsError.isInstance(error) && error.option === 'renewRetry',
    );
  });
  it('readLease, releaseOwnRecord and FakeClock', async () => {
    const refused = (option: string) => (error: unknown) =>
      LeaseOptionsError.isInstance(error) && error.option === option;
    await expect(readLease(untouchable, 'db', { timeoutMs: 5 } as never)).rejects.toSatisfy(
      refused('timeoutMs'),
    );
    await expect(
      releaseOwnRecord(untouchable, 'db', 'me', { clok: new FakeClock() } as never),
    ).rejects.toSatisfy(refused('clok'));
    expect(() => new FakeClock({ wall: 5 } as never)).toThrow(/`wall`: not an option/);
  });
  it('renew and release of a held lease and its keeper', async () => {
    const clock = new FakeClock();
    const store = new MemoryStore();
    const keeper = await holdLease(store, { ...base, clock, logger: silent });
    const refused = (option: string) => (error: unknown) =>
      LeaseOptionsError.isInstance(error) && error.option === option;
    await expect(keeper.lease.renew({ term: 3 } as never)).rejects.toSatisfy(refused('term'));
    await expect(keeper.lease.release({ force: true } as never)).rejects.toSatisfy(
      refused('force'),
    );
    await expect(keeper.release({ force: true } as never)).rejects.toSatisfy(refused('force'));
    expect(keeper.mayWrite()).toBe(true);
    await keeper.release();
  });
});
