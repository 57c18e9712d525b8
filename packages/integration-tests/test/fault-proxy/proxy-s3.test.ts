/**
 * Each fault kind through the proxy, between the real S3 adapter and
 * versitygw: what the adapter's caller sees, and what the server holds.
 */
import { ConflictError, StoreError } from '@x/store';
import { S3Store, type S3StoreOptions } from '@x/store-s3';
import { randomPrefix, type S3TestServer, testServers } from '@x/test-servers';
import { describe, expect, it } from 'vitest';
import { bodyAt, bytes, failureOf, originOf, proxyFactory, text } from './helpers.ts';

const servers = testServers();
const versitygw: S3TestServer | undefined = servers.s3.find(
  (server) => server.name === 'versitygw',
);
if (!versitygw && process.env.CI === 'true') {
  throw new Error('versitygw is required under CI=true');
}
const describeOnVersitygw = versitygw ? describe : describe.skip;

function storeAt(
  server: S3TestServer,
  endpoint: string,
  prefix: string,
  extra: Partial<S3StoreOptions> = {},
): S3Store {
  return new S3Store({
    bucket: server.bucket,
    prefix,
    endpoint,
    region: server.region,
    forcePathStyle: true,
    credentials: { accessKeyId: server.accessKeyId, secretAccessKey: server.secretAccessKey },
    conflictRetry: { attempts: 3, baseDelayMs: 1, maxDelayMs: 5 },
    ...extra,
  });
}

/** Tags every request of `store` with the caller header the proxy's write log reads. */
function tagCaller(store: S3Store, caller: string): void {
  store.client.middlewareStack.add(
    (next) => async (args) => {
      const request = args.request as { headers?: Record<string, string> };
      if (request.headers) request.headers['x-fault-caller'] = caller;
      return next(args);
    },
    { step: 'build', name: `fault-caller-${caller}` },
  );
}

if (!versitygw) {
  describe.skip('fault proxy on versitygw: not running (pnpm servers:install)', () => {
    it('needs versitygw', () => {});
  });
}

describeOnVersitygw('fault proxy between S3Store and versitygw', () => {
  const server = versitygw!;
  const target = originOf(server.endpoint);
  const startProxy = proxyFactory();

  function stores(prefix: string, proxyUrl: string, extra: Partial<S3StoreOptions> = {}) {
    return {
      viaProxy: storeAt(server, proxyUrl, prefix, extra),
      direct: storeAt(server, server.endpoint, prefix),
    };
  }

  it('keeps SigV4 valid: every operation works through a proxy injecting nothing', async () => {
    const proxy = await startProxy(target, []);
    const { viaProxy } = stores(randomPrefix('s3-clean'), proxy.url);
    const { version } = await viaProxy.put('a/one', bytes('1'), { mode: 'create' });
    await viaProxy.put('a/one', bytes('2'), { mode: { ifMatch: version } });
    expect(text((await viaProxy.get('a/one'))!.body)).toBe('2');
    expect((await viaProxy.list('a/')).objects.map((object) => object.key)).toEqual(['a/one']);
    await viaProxy.delete('a/one');
    expect(await viaProxy.head('a/one')).toBeNull();
    expect(Object.values(proxy.counts()).every((count) => count === 0)).toBe(true);
  });

  it('lost response on every attempt of a create: the object is on the server, the caller saw an error', async () => {
    const proxy = await startProxy(target, [{ kind: 'lostResponse', methods: ['PUT'] }]);
    const { viaProxy, direct } = stores(randomPrefix('s3-lost'), proxy.url);
    const error = await failureOf(viaProxy.put('LEASE', bytes('mine'), { mode: 'create' }));
    expect(StoreError.isInstance(error)).toBe(true);
    expect(await bodyAt(direct, 'LEASE')).toBe('mine');
    // The SDK retried; only the first attempt changed the bucket (the retries were refused 412).
    expect(proxy.counts().lostResponse).toBeGreaterThanOrEqual(2);
    expect(proxy.writeLog()).toEqual([
      expect.objectContaining({ method: 'PUT', status: 200, lost: true }),
    ]);
    expect(proxy.writeLog()[0]!.path).toMatch(/\/LEASE$/);
  });

  it('meta: a reset on every attempt leaves nothing on the server (so the lost-response test tells the two apart)', async () => {
    const proxy = await startProxy(target, [{ kind: 'reset', methods: ['PUT'] }]);
    const { viaProxy, direct } = stores(randomPrefix('s3-not-lost'), proxy.url);
    const error = await failureOf(viaProxy.put('LEASE', bytes('mine'), { mode: 'create' }));
    expect(StoreError.isInstance(error)).toBe(true);
    expect(await direct.head('LEASE')).toBeNull();
    expect(proxy.writeLog()).toEqual([]);
  });

  it('lost response once: the retried create is recognised as the write that landed', async () => {
    const proxy = await startProxy(target, [{ kind: 'lostResponse', methods: ['PUT'], limit: 1 }]);
    const { viaProxy, direct } = stores(randomPrefix('s3-lost-once'), proxy.url);
    const { version } = await viaProxy.put('LEASE', bytes('mine'), { mode: 'create' });
    const stored = await direct.head('LEASE');
    expect(stored?.version.etag).toBe(version.etag);
    expect(proxy.counts().lostResponse).toBe(1);
  });

  it('503 once is retried by the adapter; 503 on every attempt surfaces as StoreError', async () => {
    const once = await startProxy(target, [{ kind: 'error503', methods: ['PUT'], limit: 1 }]);
    const first = stores(randomPrefix('s3-503'), once.url);
    await first.viaProxy.put('k', bytes('v'));
    expect(await bodyAt(first.direct, 'k')).toBe('v');
    expect(once.counts().error503).toBe(1);

    const always = await startProxy(target, [{ kind: 'error503', methods: ['GET'] }]);
    const second = stores(randomPrefix('s3-503-always'), always.url);
    await second.direct.put('k', bytes('v'));
    const error = await failureOf(second.viaProxy.get('k'));
    expect(StoreError.isInstance(error)).toBe(true);
    expect(always.counts().error503).toBeGreaterThanOrEqual(2);
  });

  it('500 on every attempt surfaces as StoreError and writes nothing', async () => {
    const proxy = await startProxy(target, [{ kind: 'error500', methods: ['PUT'] }]);
    const { viaProxy, direct } = stores(randomPrefix('s3-500'), proxy.url);
    const error = await failureOf(viaProxy.put('k', bytes('v')));
    expect(StoreError.isInstance(error)).toBe(true);
    expect(await direct.head('k')).toBeNull();
    expect(proxy.writeLog()).toEqual([]);
  });

  it('409 ConditionalRequestConflict is retried, then reported as ConflictError', async () => {
    const proxy = await startProxy(target, [{ kind: 'conflict', methods: ['PUT'], limit: 1 }]);
    const first = stores(randomPrefix('s3-conflict-once'), proxy.url);
    await first.viaProxy.put('LEASE', bytes('v'), { mode: 'create' });
    expect(await bodyAt(first.direct, 'LEASE')).toBe('v');

    const always = await startProxy(target, [{ kind: 'conflict', methods: ['PUT'] }]);
    const second = stores(randomPrefix('s3-conflict'), always.url);
    const error = await failureOf(second.viaProxy.put('LEASE', bytes('v'), { mode: 'create' }));
    expect(ConflictError.isInstance(error)).toBe(true);
    expect(await second.direct.head('LEASE')).toBeNull();
    expect(always.counts().conflict).toBe(3);
  });

  it('a reset is retried by the SDK; resets on every attempt surface as StoreError', async () => {
    const proxy = await startProxy(target, [{ kind: 'reset', methods: ['PUT'], limit: 1 }]);
    const first = stores(randomPrefix('s3-reset'), proxy.url);
    await first.viaProxy.put('k', bytes('v'));
    expect(await bodyAt(first.direct, 'k')).toBe('v');

    const always = await startProxy(target, [{ kind: 'reset', methods: ['HEAD'] }]);
    const second = stores(randomPrefix('s3-reset-always'), always.url);
    expect(StoreError.isInstance(await failureOf(second.viaProxy.head('k')))).toBe(true);
  });

  it('a partition hangs calls until their signal aborts them, and nothing reaches the server', async () => {
    const proxy = await startProxy(target, []);
    const { viaProxy, direct } = stores(randomPrefix('s3-partition'), proxy.url);
    proxy.setPartition(Number.POSITIVE_INFINITY);
    const started = performance.now();
    const error = await failureOf(
      viaProxy.put('k', bytes('v'), { signal: AbortSignal.timeout(300) }),
    );
    expect((error as Error).name).toMatch(/TimeoutError|AbortError/);
    expect(performance.now() - started).toBeGreaterThanOrEqual(290);
    expect(await direct.head('k')).toBeNull();
    proxy.setPartition(false);
    await viaProxy.put('k', bytes('after'));
    expect(await bodyAt(direct, 'k')).toBe('after');
  });

  it('a partition that ends drops the hung request; the SDK retry then lands', async () => {
    const proxy = await startProxy(target, [
      { kind: 'partition', methods: ['PUT'], durationMs: 300, limit: 1 },
    ]);
    const { viaProxy, direct } = stores(randomPrefix('s3-partition-ends'), proxy.url);
    const started = performance.now();
    await viaProxy.put('k', bytes('v'));
    expect(performance.now() - started).toBeGreaterThanOrEqual(290);
    expect(await bodyAt(direct, 'k')).toBe('v');
    expect(proxy.counts().partition).toBe(1);
    expect(proxy.writeLog()).toHaveLength(1);
  });

  it('stalls a body: get waits it out, a caller with a deadline gives up', async () => {
    const proxy = await startProxy(target, [
      { kind: 'stall', methods: ['GET'], path: /\/big$/, stallMs: 300, stallAfterBytes: 1000 },
    ]);
    const { viaProxy, direct } = stores(randomPrefix('s3-stall'), proxy.url);
    const payload = 'x'.repeat(5000);
    await direct.put('big', bytes(payload));
    const started = performance.now();
    expect(text((await viaProxy.get('big'))!.body)).toBe(payload);
    expect(performance.now() - started).toBeGreaterThanOrEqual(290);

    const streamed = await viaProxy.getStream('big', { signal: AbortSignal.timeout(150) });
    const reading = (async () => {
      for await (const _chunk of streamed!.body) {
        // drain until the stall and the deadline
      }
    })();
    expect(await failureOf(reading)).toBeDefined();
    expect(proxy.counts().stall).toBe(2);
  });

  it('adds latency to the calls it matches only', async () => {
    const proxy = await startProxy(target, [
      { kind: 'latency', methods: ['HEAD'], latencyMs: 200 },
    ]);
    const { viaProxy } = stores(randomPrefix('s3-latency'), proxy.url);
    let started = performance.now();
    await viaProxy.put('k', bytes('v'));
    expect(performance.now() - started).toBeLessThan(200);
    started = performance.now();
    await viaProxy.head('k');
    expect(performance.now() - started).toBeGreaterThanOrEqual(190);
    expect(proxy.counts().latency).toBe(1);
  });

  it('lost response on CompleteMultipartUpload: the upload landed and the adapter reports it', async () => {
    const proxy = await startProxy(target, [
      { kind: 'lostResponse', methods: ['POST'], query: /uploadId=/, limit: 1 },
    ]);
    const { viaProxy, direct } = stores(randomPrefix('s3-multipart'), proxy.url);
    const size = 5 * 1024 * 1024 + 10;
    const payload = new Uint8Array(size).fill(7);
    const outcome = await viaProxy
      .upload('snapshot', payload, { mode: 'create', partSize: 5 * 1024 * 1024 })
      .then(
        (result) => ({ result }),
        (error: unknown) => ({ error }),
      );
    expect(proxy.counts().lostResponse).toBe(1);
    const stored = await direct.head('snapshot');
    expect(stored?.size).toBe(size);
    // The completion landed; the adapter either recognised it or reported an error, never a different object.
    if ('result' in outcome) expect(outcome.result.version.etag).toBe(stored?.version.etag);
    else expect(StoreError.isInstance(outcome.error)).toBe(true);
    const completes = proxy.writeLog().filter((entry) => entry.query.includes('uploadId='));
    expect(completes.filter((entry) => entry.method === 'POST' && entry.lost)).toHaveLength(1);
  });

  it('write log: a per-caller port tags each process without its cooperation (SigV4 still valid)', async () => {
    const proxy = await startProxy(target, []);
    const prefix = randomPrefix('s3-writelog-ports');
    const first = storeAt(server, await proxy.urlFor('process-1'), prefix);
    const second = storeAt(server, await proxy.urlFor('process-2'), prefix);
    await first.put('LEASE', bytes('1'), { mode: 'create' });
    expect(await failureOf(second.put('LEASE', bytes('2'), { mode: 'create' }))).toBeDefined();
    await second.put('other', bytes('3'));
    expect(proxy.writeLog().map((entry) => [entry.path.split('/').at(-1), entry.caller])).toEqual([
      ['LEASE', 'process-1'],
      ['other', 'process-2'],
    ]);
  });

  it('write log: exactly the writes that landed, each with its caller', async () => {
    const proxy = await startProxy(target, [{ kind: 'error503', path: /\/refused-by-fault$/ }]);
    const prefix = randomPrefix('s3-writelog');
    const first = storeAt(server, proxy.url, prefix);
    const second = storeAt(server, proxy.url, prefix);
    tagCaller(first, 'A');
    tagCaller(second, 'B');
    await first.put('x', bytes('1'), { mode: 'create' });
    await second.put('y', bytes('2'), { mode: 'create' });
    // Refused by the server (412): not a write.
    expect(await failureOf(second.put('x', bytes('3'), { mode: 'create' }))).toBeDefined();
    // Refused by the proxy: never reached the server.
    expect(await failureOf(second.put('refused-by-fault', bytes('4')))).toBeDefined();
    await first.get('x');
    await first.delete('y');
    const log = proxy
      .writeLog()
      .map((entry) => [entry.method, entry.path.split('/').at(-1), entry.caller]);
    expect(log).toEqual([
      ['PUT', 'x', 'A'],
      ['PUT', 'y', 'B'],
      ['DELETE', 'y', 'A'],
    ]);
  });
});
