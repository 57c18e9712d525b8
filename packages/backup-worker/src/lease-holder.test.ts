import { BucketLease, FakeClock, leaseKey, readLease } from '@x/lease';
import { type CallOptions, MemoryStore, type ObjectVersion, type PutOptions } from '@x/store';
import { describe, expect, it } from 'vitest';
import { BackupError } from './errors.ts';
import { HealthTracker } from './health.ts';
import { LeaseHolder } from './lease-holder.ts';
import { Requests } from './requests.ts';

const TTL_S = 6;
const INTERVAL_MS = (TTL_S * 1000) / 3;

/** A memory store whose lease PUTs fail while `failLease` is set. */
class FlakyLeaseStore extends MemoryStore {
  failLease = false;
  override async put(
    key: string,
    body: Uint8Array,
    options?: PutOptions & CallOptions,
  ): Promise<{ version: ObjectVersion }> {
    if (this.failLease && key === leaseKey('p')) throw new Error('connection reset');
    return super.put(key, body, options);
  }
}

async function settle(): Promise<void> {
  for (let i = 0; i < 20; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}

function holder(store: MemoryStore = new FlakyLeaseStore()) {
  const clock = new FakeClock();
  const health = new HealthTracker(1_000, 10_000);
  const logs: { level: string; event: string; fields?: object }[] = [];
  const logger = {
    debug: (event: string, fields?: object) => logs.push({ level: 'debug', event, fields }),
    info: (event: string, fields?: object) => logs.push({ level: 'info', event, fields }),
    warn: (event: string, fields?: object) => logs.push({ level: 'warn', event, fields }),
    error: (event: string, fields?: object) => logs.push({ level: 'error', event, fields }),
  };
  let tenuresBegun = 0;
  const lease: LeaseHolder = new LeaseHolder({
    store,
    prefix: 'p',
    instanceId: 'me',
    ttlSeconds: TTL_S,
    conditional: true,
    operationTimeoutMs: 30_000,
    clock,
    logger,
    health,
    requests: new Requests({
      store,
      clock,
      operationTimeoutMs: 30_000,
      conditional: true,
      callbacks: {
        runSignal: () => new AbortController().signal,
        writeFence: () => lease.writeFence(),
        conflict: (what, key, cause) => lease.conflict(what, key, cause),
      },
    }),
    callbacks: {
      runSignal: () => new AbortController().signal,
      started: () => true,
      leaseFailed: () => 1_000,
      newTenure: () => {
        tenuresBegun += 1;
      },
    },
  });
  return { clock, health, logs, lease, store, tenuresBegun: () => tenuresBegun };
}

describe('LeaseHolder', () => {
  it('a refused write drops the lease: the fence falls, health says why, the record is left alone', async () => {
    const { lease, health, store } = holder();
    expect(await lease.take()).toBeNull();
    const fence = lease.writeFence();
    expect(fence?.aborted).toBe(false);
    const error = lease.conflict('LATEST changed', 'p/LATEST');
    expect(BackupError.hasCode(error, 'WRITER_CONFLICT')).toBe(true);
    expect(fence?.aborted).toBe(true);
    expect(BackupError.hasCode(fence?.reason, 'WRITE_FENCED')).toBe(true);
    expect(lease.holds()).toBe(false);
    expect(() => lease.writeFence()).toThrow('the bucket lease was lost');
    expect(health.leaseHeld).toBe(false);
    expect(health.lease).toBe('another writer is using this backup prefix: LATEST changed');
    await lease.release();
    const record = (await readLease(store, 'p'))?.record;
    expect(record?.instanceId).toBe('me');
    expect(record?.released).toBeUndefined();
  });

  it('renews through the keeper, logging how long each renewal took at debug level', async () => {
    const { lease, clock, logs } = holder();
    await lease.take();
    clock.advance(INTERVAL_MS);
    await settle();
    expect(logs.filter((l) => l.event === 'backup.lease_renewed')).toEqual([
      { level: 'debug', event: 'backup.lease_renewed', fields: { tookMs: 0 } },
    ]);
    await lease.release();
  });

  it('counts failed renewals, retries every second, and reports stopped writes until one succeeds', async () => {
    const store = new FlakyLeaseStore();
    const { lease, clock, health } = holder(store);
    await lease.take();
    store.failLease = true;
    clock.advance(INTERVAL_MS);
    await settle();
    expect(health.errorCount).toBe(1);
    expect(health.lease).toBeNull();
    // Retries every RENEW_RETRY_MS: failures at 2, 3, 4 s after the grant; writes stop at 4 s.
    for (let i = 0; i < 2; i++) {
      clock.advance(1_000);
      await settle();
    }
    expect(health.errorCount).toBe(3);
    expect(health.leaseHeld).toBe(false);
    expect(health.lease).toBe(
      'the bucket lease could not be renewed (connection reset); uploads are stopped until it is',
    );
    expect(() => lease.writeFence()).toThrow('not renewed in time');
    store.failLease = false;
    clock.advance(1_000);
    await settle();
    expect(health.lease).toBeNull();
    expect(health.leaseHeld).toBe(true);
    expect(lease.writeFence()?.aborted).toBe(false);
    await lease.release();
    expect((await readLease(store, 'p'))?.record.released).toBe(true);
  });

  it('waits for another holder, at most a third of a TTL', async () => {
    const store = new FlakyLeaseStore();
    await BucketLease.acquireAs(store, {
      prefix: 'p',
      instanceId: 'other',
      ttlSeconds: TTL_S,
      clock: new FakeClock(),
      logger: { info() {}, warn() {} },
    });
    const { lease, health } = holder(store);
    const wait = await lease.take();
    expect(wait).toBeGreaterThan(0);
    expect(wait).toBeLessThanOrEqual(INTERVAL_MS);
    expect(health.lease).toMatch(
      /^the backup bucket's lease is held by another instance \(other on /,
    );
    expect(lease.holds()).toBe(false);
  });

  it('a lease taken over names its successor as keeping this instance out, with no attempt to take it back', async () => {
    const store = new FlakyLeaseStore();
    const { lease, clock, logs } = holder(store);
    await lease.take();
    expect(lease.keptOutBy).toBeNull();
    // Renewals fail until the lease has expired; another instance takes it over.
    store.failLease = true;
    clock.advance(TTL_S * 1000 + 1_000);
    await settle();
    store.failLease = false;
    const otherClock = new FakeClock();
    otherClock.advance(clock.wallNow() - otherClock.wallNow());
    await BucketLease.acquireAs(store, {
      prefix: 'p',
      instanceId: 'other',
      ttlSeconds: TTL_S,
      clock: otherClock,
      logger: { info() {}, warn() {} },
    });
    // The next renewal finds the successor's record: lost, and kept out by it.
    for (let i = 0; i < 3 && !logs.some((l) => l.event === 'backup.lease_lost'); i++) {
      clock.advance(1_000);
      await settle();
    }
    expect(logs.some((l) => l.event === 'backup.lease_lost')).toBe(true);
    expect(lease.holds()).toBe(false);
    expect(lease.keptOutBy).toBe('other');
  });

  it('begins a new tenure (forgetting the bucket) only when the lease is taken again', async () => {
    const { lease, tenuresBegun } = holder();
    await lease.take();
    expect(lease.tenures).toBe(1);
    expect(tenuresBegun()).toBe(0);
    lease.conflict('test');
    await lease.take();
    expect(lease.tenures).toBe(2);
    expect(tenuresBegun()).toBe(1);
    await lease.release();
  });
});
