/**
 * `deleteMany` on Azurite, seen through a proxy: keys go in Blob Batch
 * requests of at most 256 deletes, names that need escaping included, and a
 * service that refuses the batch call gets single deletes from then on.
 */
import { type InterceptingProxy, startInterceptingProxy } from '@x/test-faults';
import { type AzureTestServer, randomPrefix, testServers } from '@x/test-servers';
import { afterEach, describe, expect, it } from 'vitest';
import { AzureBlobStore } from '../src/index.ts';

const azurite: AzureTestServer | undefined = testServers().azure[0];
if (!azurite && process.env.CI === 'true') throw new Error('Azurite is required under CI=true');

interface Seen {
  readonly method: string;
  readonly query: string;
}

const proxies: InterceptingProxy[] = [];
afterEach(async () => {
  await Promise.all(proxies.splice(0).map((proxy) => proxy.close()));
});

/** A store on Azurite and one on the same prefix through a proxy recording each request. */
async function storesFor(server: AzureTestServer, refuseBatch: boolean) {
  const endpoint = /BlobEndpoint=(http:\/\/[^/;]+)/.exec(server.connectionString)?.[1];
  if (!endpoint) throw new Error('no BlobEndpoint in the connection string');
  const seen: Seen[] = [];
  const proxy = await startInterceptingProxy({
    target: endpoint,
    intercept(request) {
      seen.push({ method: request.method, query: request.query });
      const batch = new URLSearchParams(request.query).get('comp') === 'batch';
      return refuseBatch && batch ? { status: 501, body: 'not implemented here' } : undefined;
    },
  });
  proxies.push(proxy);
  const prefix = randomPrefix('batch-delete');
  const options = { container: server.container, prefix };
  const direct = new AzureBlobStore({ connectionString: server.connectionString, ...options });
  const proxied = new AzureBlobStore({
    connectionString: server.connectionString.replace(endpoint, proxy.url),
    ...options,
  });
  return { direct, proxied, seen };
}

function kinds(seen: readonly Seen[]): Record<string, number> {
  const result: Record<string, number> = {};
  for (const { method, query } of seen) {
    const kind = new URLSearchParams(query).get('comp') === 'batch' ? 'batch' : method;
    result[kind] = (result[kind] ?? 0) + 1;
  }
  return result;
}

describe.skipIf(!azurite)('AzureBlobStore deleteMany on Azurite', { timeout: 180_000 }, () => {
  it('deletes 300 keys in two batch requests and no single delete', async () => {
    const { direct, proxied, seen } = await storesFor(azurite!, false);
    const keys = Array.from({ length: 300 }, (_, index) => `a b&c%2F é/${index}`);
    for (let start = 0; start < keys.length; start += 50)
      await Promise.all(
        keys.slice(start, start + 50).map((key) => direct.put(key, new Uint8Array([1]))),
      );
    const result = await proxied.deleteMany([...keys, 'never-written']);
    expect(result.failed).toEqual([]);
    expect(kinds(seen)).toEqual({ batch: 2 });
    expect((await direct.list('')).objects).toEqual([]);
  });

  it('a service that refuses the batch call gets single deletes, then and from then on', async () => {
    const { direct, proxied, seen } = await storesFor(azurite!, true);
    for (const key of ['a', 'b', 'c']) await direct.put(key, new Uint8Array([1]));
    expect((await proxied.deleteMany(['a', 'b'])).failed).toEqual([]);
    expect((await proxied.deleteMany(['c'])).failed).toEqual([]);
    expect(kinds(seen)).toEqual({ batch: 1, DELETE: 3 });
    expect((await direct.list('')).objects).toEqual([]);
  });
});
