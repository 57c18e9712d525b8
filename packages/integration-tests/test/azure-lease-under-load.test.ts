/**
 * @x/lease's bucket lease on AzureBlobStore (Azurite), while the same
 * account is busy: several writers put objects in a loop under another
 * prefix for the whole test. Through more than one TTL of that load:
 *
 * - the holder's keeper keeps the lease: no `lost` or `dropped`, the holder
 *   may write throughout, and a renewal that times out (the one Azurite is
 *   shared by every suite) is retried before writes would stop;
 * - a second contender, with its own client (as a second machine would
 *   have), tries again and again and is refused every time with
 *   ForeignActiveError naming the holder — it never acquires;
 * - once the holder releases, the contender acquires at once, one
 *   generation on.
 *
 * Assertions are on results, not timings: the test waits for a number of
 * renewals (the schedule makes them span more than a TTL), with a generous
 * overall bound.
 */
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  BucketLease,
  ForeignActiveError,
  holdLease,
  type LeaseEvent,
  type LeaseLogger,
  readLease,
} from '@x/lease';
import { AzureBlobStore } from '@x/store-azure';
import { type AzureTestServer, randomPrefix, testServers } from '@x/test-servers';
import { describe, expect, it } from 'vitest';

const servers = testServers();
const azurite: AzureTestServer | undefined = servers.azure[0];
const missing = servers.missing.find((entry) => entry.name === 'azurite');
if (!azurite && process.env.CI === 'true') {
  throw new Error(`Azurite is required under CI=true: ${missing?.reason ?? 'not provided'}`);
}

/** TTL 6 s: renewals every 2 s, each with a 1 s request timeout (the keeper's defaults for it). */
const TTL_S = 6;
/** Renewals to wait for: 4 at 2 s intervals span 8 s, more than the TTL. */
const RENEWALS = 4;
const WRITERS = 6;
/** Each writer overwrites its own few keys. */
const KEYS_PER_WRITER = 4;
/**
 * Small bodies: the load is requests, not bytes. Unpaced writers of 64 KiB
 * bodies took the one Azurite all suites share past 600 MiB in 9 s, and it
 * then stalled for minutes under the suites that ran after.
 */
const BODY = randomBytes(4 * 1024);
/**
 * Between a writer's puts: six writers still keep requests in flight all
 * along, without a flood that grows the shared server's memory by hundreds
 * of MiB (every request leaves records it collects only later).
 */
const WRITER_PAUSE_MS = 20;

const quiet: LeaseLogger = { info() {}, warn() {} };

/** An event of a keeper that still holds: a failed renewal only while writes go on (it is retried). */
function keepsTheLease(event: LeaseEvent): boolean {
  if (event.type === 'renewal-failed') return !event.writesStopped;
  return event.type === 'acquired' || event.type === 'renewed';
}

/** A client of its own on the shared container (its own connections, like another machine). */
function client(server: AzureTestServer, prefix: string): AzureBlobStore {
  return new AzureBlobStore({
    connectionString: server.connectionString,
    container: server.container,
    prefix,
  });
}

async function waitUntil(what: string, condition: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(50);
  }
}

describe.skipIf(!azurite)('the bucket lease on Azurite under concurrent write load', () => {
  it('keeps renewing through more than a TTL, refuses a contender throughout, and hands over after release', async () => {
    const server = azurite!;
    const leasePrefix = randomPrefix('lease-under-load');
    const holderStore = client(server, leasePrefix);
    const contenderStore = client(server, leasePrefix);
    const loadStore = client(server, randomPrefix('lease-load-writers'));
    const job = 'job';

    // The load: writers putting objects in a loop under another prefix, until told to stop.
    let stopWriters = false;
    const writerErrors: unknown[] = [];
    let writes = 0;
    const writers = Array.from({ length: WRITERS }, async (_, writer) => {
      for (let n = 0; !stopWriters; n++) {
        try {
          await loadStore.put(`w${writer}/${n % KEYS_PER_WRITER}`, BODY, { mode: 'overwrite' });
          writes++;
          await sleep(WRITER_PAUSE_MS);
        } catch (error) {
          writerErrors.push(error);
        }
      }
    });
    await waitUntil('the writers to get going', () => writes >= WRITERS * 2, 10_000);

    const events: LeaseEvent[] = [];
    const keeper = await holdLease(holderStore, {
      prefix: job,
      instanceId: 'holder-under-load',
      ttlSeconds: TTL_S,
      logger: quiet,
      onEvent: (event) => events.push(event),
    });
    const generation = keeper.generation;
    const renewals = () => events.filter((event) => event.type === 'renewed');

    // The contender: acquire, again and again, while the holder renews.
    let stopContender = false;
    const refusals: ForeignActiveError[] = [];
    const contenderOther: unknown[] = [];
    const acquiredWhileHeld: BucketLease[] = [];
    let mayWriteThroughout = true;
    const contender = (async () => {
      while (!stopContender) {
        try {
          acquiredWhileHeld.push(
            await BucketLease.acquireAs(contenderStore, {
              prefix: job,
              instanceId: 'contender-under-load',
              ttlSeconds: TTL_S,
              logger: quiet,
            }),
          );
        } catch (error) {
          if (ForeignActiveError.isInstance(error)) refusals.push(error as ForeignActiveError);
          else contenderOther.push(error);
        }
        if (!keeper.mayWrite()) mayWriteThroughout = false;
        await sleep(100);
      }
    })();

    try {
      await waitUntil(
        `${RENEWALS} renewals`,
        () => renewals().length >= RENEWALS || events.some((event) => !keepsTheLease(event)),
        RENEWALS * (TTL_S / 3) * 1000 + 6_000,
      );
    } finally {
      stopContender = true;
      await contender;
    }

    // The holder kept the lease through more than a TTL of load.
    expect(
      events.filter((event) => !keepsTheLease(event)),
      'no lost or dropped event, no failed renewal that stopped writes',
    ).toEqual([]);
    const renewed = renewals();
    expect(renewed.length).toBeGreaterThanOrEqual(RENEWALS);
    const last = renewed.at(-1)!;
    if (last.type !== 'renewed') throw new Error('unreachable');
    expect(last.record.renewedAt - last.record.acquiredAt).toBeGreaterThan(TTL_S * 1000);
    for (const event of renewed) {
      if (event.type !== 'renewed') continue;
      expect(event.record.instanceId).toBe('holder-under-load');
      expect(event.record.generation).toBe(generation);
    }
    expect(mayWriteThroughout).toBe(true);
    expect(keeper.mayWrite()).toBe(true);
    // What the bucket says, through another client: the holder's last renewal.
    const stored = await readLease(contenderStore, job);
    expect(stored?.record).toMatchObject({
      instanceId: 'holder-under-load',
      generation,
      renewedAt: keeper.lease.record.renewedAt,
    });

    // The contender tried throughout and was refused every time, naming the holder.
    expect(acquiredWhileHeld).toEqual([]);
    expect(contenderOther).toEqual([]);
    expect(refusals.length).toBeGreaterThan(RENEWALS * 2);
    for (const refusal of refusals) expect(refusal.holder.instanceId).toBe('holder-under-load');

    // The load was real, and went on until now.
    const writesBeforeStop = writes;
    stopWriters = true;
    await Promise.all(writers);
    expect(writerErrors).toEqual([]);
    expect(writesBeforeStop).toBeGreaterThan(WRITERS * RENEWALS);

    // After release, the contender acquires at once, one generation on.
    await keeper.release();
    expect(events.at(-1)?.type).toBe('released');
    const next = await BucketLease.acquireAs(contenderStore, {
      prefix: job,
      instanceId: 'contender-under-load',
      ttlSeconds: TTL_S,
      logger: quiet,
    });
    try {
      expect(next.generation).toBe(generation + 1);
      expect((await readLease(holderStore, job))?.record.instanceId).toBe('contender-under-load');
    } finally {
      await next.release();
    }
  }, 40_000);
});
