/**
 * Fault kinds through the proxy, between the real Azure adapter and Azurite.
 * The Azure SDK retries with growing delays (its second retry waits seconds),
 * so these tests inject a fault once and check the adapter recovers, or
 * assert on a single failing call with a deadline.
 */
import { AzureBlobStore } from '@x/store-azure';
import { type AzureTestServer, randomPrefix, testServers } from '@x/test-servers';
import { describe, expect, it } from 'vitest';
import { bodyAt, bytes, failureOf, originOf, proxyFactory, text } from './helpers.ts';

const servers = testServers();
const azurite: AzureTestServer | undefined = servers.azure[0];
if (!azurite && process.env.CI === 'true') {
  throw new Error('Azurite is required under CI=true');
}
const describeOnAzurite = azurite ? describe : describe.skip;

if (!azurite) {
  describe.skip('fault proxy on Azurite: not running (pnpm servers:install)', () => {
    it('needs Azurite', () => {});
  });
}

describeOnAzurite('fault proxy between AzureBlobStore and Azurite', () => {
  const server = azurite!;
  const target = originOf(server.blobEndpoint);
  const startProxy = proxyFactory();

  function stores(prefix: string, proxyUrl: string) {
    const common = {
      accountName: server.accountName,
      accountKey: server.accountKey,
      container: server.container,
      prefix,
    };
    return {
      viaProxy: new AzureBlobStore({
        ...common,
        blobEndpoint: `${proxyUrl}/${server.accountName}`,
      }),
      direct: new AzureBlobStore({ ...common, blobEndpoint: server.blobEndpoint }),
    };
  }

  it('works through a proxy injecting nothing', async () => {
    const proxy = await startProxy(target, []);
    const { viaProxy } = stores(randomPrefix('az-clean'), proxy.url);
    await viaProxy.put('a', bytes('1'), { mode: 'create' });
    expect(text((await viaProxy.get('a'))!.body)).toBe('1');
    expect((await viaProxy.list('')).objects.map((object) => object.key)).toEqual(['a']);
  });

  it('lost response once on a create: on the server, and the retry is recognised as ours', async () => {
    const proxy = await startProxy(target, [{ kind: 'lostResponse', methods: ['PUT'], limit: 1 }]);
    const { viaProxy, direct } = stores(randomPrefix('az-lost'), proxy.url);
    const { version } = await viaProxy.put('LEASE', bytes('mine'), { mode: 'create' });
    expect((await direct.head('LEASE'))?.version.etag).toBe(version.etag);
    expect(await bodyAt(direct, 'LEASE')).toBe('mine');
    expect(proxy.counts().lostResponse).toBe(1);
    expect(proxy.writeLog().map((entry) => [entry.method, entry.lost])).toEqual([['PUT', true]]);
  });

  it('503 once and a reset once are retried by the SDK', async () => {
    const proxy = await startProxy(target, [
      { kind: 'error503', methods: ['PUT'], limit: 1 },
      { kind: 'reset', methods: ['GET'], limit: 1 },
    ]);
    const { viaProxy, direct } = stores(randomPrefix('az-503'), proxy.url);
    await viaProxy.put('k', bytes('v'));
    expect(await bodyAt(direct, 'k')).toBe('v');
    expect(text((await viaProxy.get('k'))!.body)).toBe('v');
    expect(proxy.counts()).toMatchObject({ error503: 1, reset: 1 });
  });

  it('a partition hangs calls until their signal aborts them', async () => {
    const proxy = await startProxy(target, []);
    const { viaProxy, direct } = stores(randomPrefix('az-partition'), proxy.url);
    proxy.setPartition(Number.POSITIVE_INFINITY);
    const started = performance.now();
    const error = await failureOf(
      viaProxy.put('k', bytes('v'), { signal: AbortSignal.timeout(300) }),
    );
    expect((error as Error).name).toBe('TimeoutError');
    expect(performance.now() - started).toBeGreaterThanOrEqual(290);
    expect(await direct.head('k')).toBeNull();
    expect(proxy.counts().partition).toBeGreaterThanOrEqual(1);
  });

  it('write log: the writes that landed, not the ones refused', async () => {
    const proxy = await startProxy(target, []);
    const { viaProxy } = stores(randomPrefix('az-writelog'), proxy.url);
    await viaProxy.put('x', bytes('1'), { mode: 'create' });
    expect(await failureOf(viaProxy.put('x', bytes('2'), { mode: 'create' }))).toBeDefined();
    await viaProxy.delete('x');
    const log = proxy.writeLog().map((entry) => [entry.method, entry.path.split('/').at(-1)]);
    expect(log).toEqual([
      ['PUT', 'x'],
      ['DELETE', 'x'],
    ]);
  });
});
