/**
 * Fault kinds through the proxy, between the real GCS adapter and
 * fake-gcs-server. The adapter retries by itself (`maxRetries`); 0 shows
 * what a single failed request looks like to the caller.
 */
import { StoreError } from '@x/store';
import { GcsStore, type GcsStoreOptions } from '@x/store-gcs';
import { type GcsTestServer, randomPrefix, testServers } from '@x/test-servers';
import { describe, expect, it } from 'vitest';
import { bodyAt, bytes, failureOf, originOf, proxyFactory, text } from './helpers.ts';

const servers = testServers();
const fakeGcs: GcsTestServer | undefined = servers.gcs[0];
if (!fakeGcs && process.env.CI === 'true') {
  throw new Error('fake-gcs-server is required under CI=true');
}
const describeOnFakeGcs = fakeGcs ? describe : describe.skip;

if (!fakeGcs) {
  describe.skip('fault proxy on fake-gcs-server: not running (pnpm servers:install)', () => {
    it('needs fake-gcs-server', () => {});
  });
}

describeOnFakeGcs('fault proxy between GcsStore and fake-gcs-server', () => {
  const server = fakeGcs!;
  const target = originOf(server.apiEndpoint);
  const startProxy = proxyFactory();

  function stores(prefix: string, proxyUrl: string, extra: Partial<GcsStoreOptions> = {}) {
    const common = { bucket: server.bucket, projectId: server.projectId, prefix };
    return {
      viaProxy: new GcsStore({ ...common, apiEndpoint: proxyUrl, ...extra }),
      direct: new GcsStore({ ...common, apiEndpoint: server.apiEndpoint }),
    };
  }

  it('works through a proxy injecting nothing', async () => {
    const proxy = await startProxy(target, []);
    const { viaProxy } = stores(randomPrefix('gcs-clean'), proxy.url);
    const { version } = await viaProxy.put('a', bytes('1'), { mode: 'create' });
    await viaProxy.put('a', bytes('2'), { mode: { ifMatch: version } });
    expect(text((await viaProxy.get('a'))!.body)).toBe('2');
    expect((await viaProxy.list('')).objects.map((object) => object.key)).toEqual(['a']);
  });

  it('lost response on a create without retries: on the server, and the caller saw an error', async () => {
    const proxy = await startProxy(target, [{ kind: 'lostResponse', methods: ['POST'] }]);
    const { viaProxy, direct } = stores(randomPrefix('gcs-lost'), proxy.url, { maxRetries: 0 });
    const error = await failureOf(viaProxy.put('LEASE', bytes('mine'), { mode: 'create' }));
    expect(StoreError.isInstance(error)).toBe(true);
    expect(await bodyAt(direct, 'LEASE')).toBe('mine');
    expect(proxy.writeLog()).toEqual([expect.objectContaining({ method: 'POST', lost: true })]);
  });

  it('lost response once with retries: the retried create is recognised as ours', async () => {
    const proxy = await startProxy(target, [{ kind: 'lostResponse', methods: ['POST'], limit: 1 }]);
    const { viaProxy, direct } = stores(randomPrefix('gcs-lost-once'), proxy.url);
    const { version } = await viaProxy.put('LEASE', bytes('mine'), { mode: 'create' });
    expect((await direct.head('LEASE'))?.version.generation).toBe(version.generation);
    expect(proxy.counts().lostResponse).toBe(1);
  });

  it('503 surfaces as StoreError without retries, and is retried with them', async () => {
    const always = await startProxy(target, [{ kind: 'error503', methods: ['GET'] }]);
    const first = stores(randomPrefix('gcs-503'), always.url, { maxRetries: 0 });
    await first.direct.put('k', bytes('v'));
    expect(StoreError.isInstance(await failureOf(first.viaProxy.head('k')))).toBe(true);

    const once = await startProxy(target, [{ kind: 'error503', methods: ['GET'], limit: 1 }]);
    const second = stores(randomPrefix('gcs-503-once'), once.url);
    await second.direct.put('k', bytes('v'));
    expect((await second.viaProxy.head('k'))?.size).toBe(1);
    expect(once.counts().error503).toBe(1);
  });

  it('a partition hangs calls until their signal aborts them', async () => {
    const proxy = await startProxy(target, []);
    const { viaProxy } = stores(randomPrefix('gcs-partition'), proxy.url);
    proxy.setPartition(Number.POSITIVE_INFINITY);
    const started = performance.now();
    const error = await failureOf(viaProxy.head('k', { signal: AbortSignal.timeout(300) }));
    expect((error as Error).name).toMatch(/TimeoutError|AbortError/);
    expect(performance.now() - started).toBeGreaterThanOrEqual(290);
    expect(proxy.counts().partition).toBe(1);
  });

  it('keeps a resumable upload going through the proxy (its session URL is rewritten)', async () => {
    const proxy = await startProxy(target, []);
    const { viaProxy, direct } = stores(randomPrefix('gcs-upload'), proxy.url);
    const payload = new Uint8Array(600 * 1024).fill(3);
    await viaProxy.upload('snapshot', payload, { mode: 'create', partSize: 256 * 1024 });
    expect((await direct.head('snapshot'))?.size).toBe(payload.byteLength);
    const writes = proxy.writeLog().map((entry) => entry.method);
    // The session start (POST) and the data (PUT) both came through the proxy.
    expect(writes[0]).toBe('POST');
    expect(writes.filter((method) => method === 'PUT').length).toBeGreaterThanOrEqual(1);
  });

  it('stalls a download body until the stall ends', async () => {
    const proxy = await startProxy(target, [
      { kind: 'stall', methods: ['GET'], path: /big$/, stallMs: 300, stallAfterBytes: 100 },
    ]);
    const { viaProxy, direct } = stores(randomPrefix('gcs-stall'), proxy.url);
    const payload = 'y'.repeat(2000);
    await direct.put('big', bytes(payload));
    const started = performance.now();
    expect(text((await viaProxy.get('big'))!.body)).toBe(payload);
    expect(performance.now() - started).toBeGreaterThanOrEqual(290);
    expect(proxy.counts().stall).toBeGreaterThanOrEqual(1);
  });
});
