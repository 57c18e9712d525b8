/**
 * AzureBlobStore against Azurite (started by @x/test-servers): the behaviour
 * the shared conformance suite does not cover — concurrent staged creates,
 * recognising a retried write, aborts (with the exact reason, and after
 * blocks were staged), list pages, auth variants, and credentials staying
 * out of errors. The 32-way create race and the 20 MiB create upload are
 * conformance cases (conformance.test.ts).
 */
import { createHash, randomBytes } from 'node:crypto';
import { ContainerSASPermissions } from '@azure/storage-blob';
import { AlreadyExistsError, PreconditionFailedError, StoreError, sameVersion } from '@x/store';
import { type AzureTestServer, randomPrefix, testServers } from '@x/test-servers';
import { describe, expect, it } from 'vitest';
import { AzureBlobStore, type AzureBlobStoreOptions } from '../src/index.ts';

const servers = testServers();
const azurite: AzureTestServer | undefined = servers.azure[0];
const missing = servers.missing.find((entry) => entry.name === 'azurite');
if (!azurite && process.env.CI === 'true') {
  throw new Error(`Azurite is required under CI=true: ${missing?.reason ?? 'not provided'}`);
}
const describeOnAzurite = describe.skipIf(!azurite);

function storeFor(
  server: AzureTestServer,
  label: string,
  extra: Partial<AzureBlobStoreOptions> = {},
): AzureBlobStore {
  return new AzureBlobStore({
    connectionString: server.connectionString,
    container: server.container,
    prefix: randomPrefix(label),
    ...extra,
  } as AzureBlobStoreOptions);
}

async function* inChunks(bytes: Uint8Array, chunkSize: number): AsyncIterable<Uint8Array> {
  for (let offset = 0; offset < bytes.byteLength; offset += chunkSize) {
    yield bytes.subarray(offset, Math.min(offset + chunkSize, bytes.byteLength));
  }
}

function sha256(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

if (!azurite) {
  describe.skipIf(true)(
    `store-azure on Azurite: not running (${missing?.reason.split('\n')[0] ?? 'not provided'})`,
    () => {
      it('needs Azurite', () => {});
    },
  );
}

// One Azurite serves every suite of a run, some of which load it on
// purpose (integration-tests' lease under load): a request may wait out a
// stall of the shared server. The cases assert results, never timings, so
// each gets three minutes rather than the default minute.
describeOnAzurite('AzureBlobStore on Azurite', { timeout: 180_000 }, () => {
  const server = azurite!;

  it('lets exactly one of three concurrent staged creates of one key win', async () => {
    const store = storeFor(server, 'upload-race');
    const bodies = [0, 1, 2].map(() => randomBytes(600 * 1024));
    const outcomes = await Promise.allSettled(
      bodies.map((body) =>
        store.upload('archive', inChunks(body, 100 * 1024), {
          mode: 'create',
          partSize: 256 * 1024,
        }),
      ),
    );
    const winners = outcomes.flatMap((outcome, index) =>
      outcome.status === 'fulfilled' ? [index] : [],
    );
    expect(winners).toHaveLength(1);
    for (const outcome of outcomes) {
      if (outcome.status === 'rejected')
        expect(AlreadyExistsError.isInstance(outcome.reason)).toBe(true);
    }
    const stored = await store.get('archive');
    expect(sha256(stored!.body)).toBe(sha256(bodies[winners[0]!]!));
  });

  it('reports a refused write that carries its own write id as the success it was', async () => {
    // A retry whose first attempt landed is refused by that attempt; the same write id proves it.
    const prefix = randomPrefix('write-id');
    const retrying = storeFor(server, 'unused', { prefix, newWriteId: () => 'retried-write' });
    const other = storeFor(server, 'unused', { prefix });
    const first = await retrying.put('LATEST', new Uint8Array([1]), { mode: 'create' });
    const again = await retrying.put('LATEST', new Uint8Array([1]), { mode: 'create' });
    expect(sameVersion(again.version, first.version)).toBe(true);
    await expect(other.put('LATEST', new Uint8Array([2]), { mode: 'create' })).rejects.toSatisfy(
      AlreadyExistsError.isInstance,
    );
    const replaced = await other.put('LATEST', new Uint8Array([3]), {
      mode: { ifMatch: first.version },
    });
    await expect(
      other.put('LATEST', new Uint8Array([4]), { mode: { ifMatch: first.version } }),
    ).rejects.toSatisfy(PreconditionFailedError.isInstance);
    expect(sameVersion((await other.head('LATEST'))!.version, replaced.version)).toBe(true);
  });

  it('rejects with the signal reason and writes nothing when aborted before or during an upload', async () => {
    const store = storeFor(server, 'abort');
    const before = new AbortController();
    const reason = new Error('fence fired');
    before.abort(reason);
    await expect(store.put('a', new Uint8Array([1]), { signal: before.signal })).rejects.toBe(
      reason,
    );
    expect(await store.head('a')).toBeNull();

    const during = new AbortController();
    async function* source(): AsyncIterable<Uint8Array> {
      yield randomBytes(300 * 1024);
      yield randomBytes(300 * 1024);
      during.abort(reason);
      yield randomBytes(300 * 1024);
    }
    await expect(
      store.upload('b', source(), { mode: 'create', partSize: 256 * 1024, signal: during.signal }),
    ).rejects.toBe(reason);
    expect(await store.head('b')).toBeNull();
    expect((await store.list('')).objects).toEqual([]);
  });

  it('stops reading a stream when its signal fires', async () => {
    const store = storeFor(server, 'abort-read');
    await store.put('big', randomBytes(4 * 1024 * 1024));
    const controller = new AbortController();
    const reason = new Error('stop reading');
    const opened = await store.getStream('big', { signal: controller.signal });
    let read = 0;
    const consume = async (): Promise<void> => {
      for await (const chunk of opened!.body) {
        read += chunk.byteLength;
        controller.abort(reason);
      }
    };
    await expect(consume()).rejects.toBe(reason);
    expect(read).toBeLessThan(4 * 1024 * 1024);
  });

  it('lists every page, with and without a delimiter', async () => {
    const store = storeFor(server, 'pages', { listPageSize: 2 });
    const keys = ['a/1', 'a/2', 'b', 'c/1', 'd', 'e'];
    for (const key of keys) await store.put(key, new TextEncoder().encode(key));
    const flat = await store.list('');
    expect(flat.objects.map((info) => info.key)).toEqual(keys);
    const rolled = await store.list('', { delimiter: '/' });
    expect(rolled.objects.map((info) => info.key)).toEqual(['b', 'd', 'e']);
    expect(rolled.commonPrefixes).toEqual(['a/', 'c/']);
    const head = await store.head('b');
    expect(sameVersion(flat.objects[2]!.version, head!.version)).toBe(true);
  });

  it('works with a SAS URL and keeps the signature out of errors', async () => {
    const prefix = randomPrefix('sas');
    const keyed = new AzureBlobStore({
      accountName: server.accountName,
      accountKey: server.accountKey,
      blobEndpoint: server.blobEndpoint,
      container: server.container,
      prefix,
    });
    const expiresOn = new Date(Date.now() + 60 * 60 * 1000);
    const sasUrl = await keyed.containerClient.generateSasUrl({
      permissions: ContainerSASPermissions.parse('rcwdl'),
      expiresOn,
    });
    const query = sasUrl.slice(sasUrl.indexOf('?'));
    const viaSas = new AzureBlobStore({
      sasUrl: `${server.blobEndpoint}${query}`,
      container: server.container,
      prefix,
    });
    await viaSas.put('x', new Uint8Array([7]), { mode: 'create' });
    expect([...(await keyed.get('x'))!.body]).toEqual([7]);
    expect(viaSas.description).not.toContain('sig=');

    const signature = new URLSearchParams(query).get('sig')!;
    const forged = query.replace(
      encodeURIComponent(signature),
      encodeURIComponent(`${signature.slice(0, -4)}AAA=`),
    );
    const badSas = new AzureBlobStore({
      sasUrl: `${server.blobEndpoint}${forged}`,
      container: server.container,
      prefix,
    });
    const error = await badSas.put('y', new Uint8Array([1])).then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(StoreError.isInstance(error)).toBe(true);
    expect((error as Error).message).toMatch(/HTTP 403/);
    const shown = `${String(error)} ${JSON.stringify(error)} ${String((error as Error).cause)} ${JSON.stringify((error as Error).cause)}`;
    expect(shown).not.toContain(signature);
    expect(shown).not.toContain(signature.slice(0, -4));
  });

  it('keeps the account key out of errors and the description', async () => {
    const wrongKey = Buffer.from('not the right key, but long enough').toString('base64');
    const store = new AzureBlobStore({
      accountName: server.accountName,
      accountKey: wrongKey,
      blobEndpoint: server.blobEndpoint,
      container: server.container,
    });
    const error = await store.put('x', new Uint8Array([1])).then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(StoreError.isInstance(error)).toBe(true);
    expect((error as Error).message).toMatch(/HTTP 403/);
    const shown = `${String(error)} ${JSON.stringify(error)} ${JSON.stringify((error as Error).cause)} ${store.description}`;
    expect(shown).not.toContain(wrongKey);
    expect(
      new AzureBlobStore({ connectionString: server.connectionString, container: server.container })
        .description,
    ).not.toContain(server.accountKey);
  });

  it('reports a missing container as a StoreError naming it', async () => {
    const store = new AzureBlobStore({
      connectionString: server.connectionString,
      container: 'no-such-container',
    });
    await expect(store.head('x')).rejects.toThrow(/container not found.*no-such-container/);
  });
});
