/**
 * What S3Store puts on the wire, recorded by a transparent proxy in front of
 * the real servers: the probe's multipart check sends a real multipart
 * upload, and the `checksums` option decides whether the SDK's checksum
 * headers are sent — including to a service that answers them with 501
 * `NotImplemented`, whose message and header the error must carry; and
 * `listPages` asks for one page per step of the iteration, no more.
 */
import { NotImplementedError } from '@x/store';
import { probeConditionalWrites } from '@x/store-conformance';
import { randomPrefix, type S3TestServer, testServers } from '@x/test-servers';
import { afterEach, describe, expect, it } from 'vitest';
import type { S3StoreOptions } from '../src/index.ts';
import { CLAIMING_ALL, patternBytes, storeFor } from './helpers.ts';
import {
  NOT_IMPLEMENTED_MESSAGE,
  type RecordedRequest,
  type RecordingProxy,
  startRecordingProxy,
} from './recording-proxy.ts';

const MiB = 1024 * 1024;
const servers = testServers();
const conditional = servers.s3.filter((server) => server.honoursConditionalWrites);
if (conditional.length === 0) {
  describe.skip('S3Store on the wire: no server that honours conditional writes (pnpm servers:install)', () => {
    it('is skipped', () => {});
  });
}

/** The SDK's checksum headers (request checksums, their trailer, and response validation). */
const CHECKSUM_HEADER = /^x-amz-(checksum-|sdk-checksum-|trailer$)/;

const open: RecordingProxy[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((proxy) => proxy.close()));
});

async function viaProxy(
  server: S3TestServer,
  prefix: string,
  extra: Partial<S3StoreOptions> = {},
  refuseHeader?: RegExp,
) {
  const proxy = await startRecordingProxy(server.endpoint, refuseHeader ? { refuseHeader } : {});
  open.push(proxy);
  return { proxy, store: storeFor(server, prefix, { endpoint: proxy.url, ...extra }) };
}

/** S3 operations by method and query, as the service sees them. */
function operation(request: RecordedRequest): string {
  const query = new URLSearchParams(request.query);
  if (request.method === 'POST' && query.has('uploads')) return 'CreateMultipartUpload';
  if (request.method === 'PUT' && query.has('partNumber')) return 'UploadPart';
  if (request.method === 'POST' && query.has('uploadId')) return 'CompleteMultipartUpload';
  if (request.method === 'DELETE' && query.has('uploadId')) return 'AbortMultipartUpload';
  if (request.method === 'GET' && query.get('list-type') === '2') return 'ListObjectsV2';
  if (request.method === 'POST' && query.has('delete')) return 'DeleteObjects';
  return (
    { PUT: 'PutObject', GET: 'GetObject', HEAD: 'HeadObject', DELETE: 'DeleteObject' }[
      request.method
    ] ?? request.method
  );
}

function counts(requests: readonly RecordedRequest[]): Record<string, number> {
  const result: Record<string, number> = {};
  for (const request of requests)
    result[operation(request)] = (result[operation(request)] ?? 0) + 1;
  return result;
}

describe.each(conditional.map((server) => [`${server.name} ${server.version}`, server] as const))(
  'S3Store on the wire: %s',
  (_label, server) => {
    it('the probe’s multipart check sends two multipart uploads of two parts, the second refused at completion', async () => {
      const { proxy, store } = await viaProxy(server, randomPrefix('wire-probe'), {
        capabilities: CLAIMING_ALL,
      });
      const report = await probeConditionalWrites(store, 'probe', {
        concurrency: 2,
      });
      expect(report.multipartCreate?.outcome, report.multipartCreate?.evidence).toBe('honoured');
      const sent = counts(proxy.requests());
      expect(sent.CreateMultipartUpload).toBe(2);
      expect(sent.UploadPart).toBe(4);
      const completions = proxy
        .requests()
        .filter((request) => operation(request) === 'CompleteMultipartUpload');
      expect(completions.map((request) => request.headerNames.includes('if-none-match'))).toEqual([
        true,
        true,
      ]);
      // The first completes, the second is refused with 412 (create-if-absent at completion).
      expect(completions.map((request) => request.status)).toEqual([200, 412]);
      expect(report.cleanup).toBeUndefined();
    });

    it('listPages sends one ListObjectsV2 per page, with MaxKeys and the continuation token, and none after a break', async () => {
      const { proxy, store } = await viaProxy(server, randomPrefix('wire-pages'));
      const keys = ['p/a', 'p/b', 'p/c', 'p/d', 'p/e'];
      for (const key of keys) await store.put(key, new TextEncoder().encode(key));
      const listings = () =>
        proxy.requests().filter((request) => operation(request) === 'ListObjectsV2');

      const before = listings().length;
      const pages: string[][] = [];
      for await (const page of store.listPages('p/', { pageSize: 2 }))
        pages.push(page.objects.map((info) => info.key));
      expect(pages).toEqual([['p/a', 'p/b'], ['p/c', 'p/d'], ['p/e']]);
      const sent = listings().slice(before);
      expect(sent).toHaveLength(3);
      expect(sent.map((request) => new URLSearchParams(request.query).get('max-keys'))).toEqual([
        '2',
        '2',
        '2',
      ]);
      expect(new URLSearchParams(sent[0]!.query).has('continuation-token')).toBe(false);
      expect(new URLSearchParams(sent[1]!.query).has('continuation-token')).toBe(true);

      const beforeBreak = listings().length;
      for await (const page of store.listPages('p/', { pageSize: 2 })) {
        expect(page.objects.map((info) => info.key)).toEqual(['p/a', 'p/b']);
        break;
      }
      expect(listings().length - beforeBreak).toBe(1);
      expect((await store.list('p/')).objects.map((info) => info.key)).toEqual(keys);
      for (const key of keys) await store.delete(key);
    });

    it('checksums: when-supported sends the SDK’s checksum headers (so the next test can see them missing)', async () => {
      const { proxy, store } = await viaProxy(server, randomPrefix('wire-sums'), {
        checksums: 'when-supported',
      });
      expect(store.checksums).toBe('when-supported');
      await store.put('one', patternBytes(1024, 1));
      await store.get('one');
      const [put, get] = proxy.requests();
      expect(put!.headerNames.filter((name) => CHECKSUM_HEADER.test(name))).not.toEqual([]);
      expect(get!.headerNames).toContain('x-amz-checksum-mode');
    });

    it('checksums: when-required (the default with an endpoint) sends no checksum header on any call', async () => {
      const { proxy, store } = await viaProxy(server, randomPrefix('wire-sums'));
      expect(store.checksums).toBe('when-required');
      const { version } = await store.put('one', patternBytes(1024, 1), { mode: 'create' });
      await store.put('one', patternBytes(1024, 2), { mode: { ifMatch: version } });
      await store.get('one');
      const stream = await store.getStream('one');
      for await (const _chunk of stream!.body) {
        // drained
      }
      await store.head('one');
      await store.list('');
      await store.upload('big', patternBytes(5 * MiB + 10, 3), { partSize: 5 * MiB });
      await store.delete('one');
      await store.delete('big');
      const sent = proxy.requests();
      expect(counts(sent).UploadPart).toBe(2);
      expect(
        sent.flatMap((request) =>
          request.headerNames
            .filter((name) => CHECKSUM_HEADER.test(name))
            .map((name) => `${operation(request)}: ${name}`),
        ),
      ).toEqual([]);
    });

    it('a service that answers the checksum headers with 501: the error carries its message and the header; when-required works there', async () => {
      const prefix = randomPrefix('wire-501');
      const strict = /^x-amz-checksum-/;
      const { store: defaults } = await viaProxy(
        server,
        prefix,
        { checksums: 'when-supported' },
        strict,
      );
      let failure: unknown;
      try {
        await defaults.put('one', patternBytes(64, 1), { mode: 'create' });
      } catch (error) {
        failure = error;
      }
      expect(NotImplementedError.isInstance(failure)).toBe(true);
      const message = (failure as Error).message;
      expect(message).toContain(NOT_IMPLEMENTED_MESSAGE);
      expect(message).toMatch(/header x-amz-checksum-crc32\b/);
      expect(message).toContain("checksums: 'when-required'");
      expect(message).not.toContain(server.secretAccessKey);
      expect(message).not.toContain(server.accessKeyId);

      const getFailure = await defaults.get('missing').catch((error: unknown) => error);
      expect((getFailure as Error).message).toMatch(/header x-amz-checksum-mode\b/);

      const { proxy, store } = await viaProxy(server, prefix, {}, strict);
      await store.put('one', patternBytes(64, 1), { mode: 'create' });
      expect((await store.get('one'))?.size).toBe(64);
      await store.delete('one');
      expect(proxy.requests().filter((request) => request.refused)).toEqual([]);
    });

    it('deleteMany of 1,001 keys sends two DeleteObjects requests (1,000 keys at most) and no single delete', async () => {
      const prefix = randomPrefix('wire-delete-many');
      const keys = Array.from({ length: 1001 }, (_, index) => `k/${index}`);
      const direct = storeFor(server, prefix);
      for (let start = 0; start < keys.length; start += 50)
        await Promise.all(
          keys.slice(start, start + 50).map((key) => direct.put(key, patternBytes(8, 1))),
        );
      const { proxy, store } = await viaProxy(server, prefix);
      const result = await store.deleteMany([...keys, 'k/never-written']);
      expect(result.failed).toEqual([]);
      expect(counts(proxy.requests())).toEqual({ DeleteObjects: 2 });
      expect((await direct.list('')).objects).toEqual([]);
    });

    it('a service that refuses DeleteObjects (501) gets single deletes, then and from then on, with nothing left behind', async () => {
      const prefix = randomPrefix('wire-delete-refused');
      const direct = storeFor(server, prefix);
      for (const key of ['a', 'b', 'c', 'd']) await direct.put(key, patternBytes(8, 1));
      // DeleteObjects must carry a checksum; this service refuses every checksum header.
      const { proxy, store } = await viaProxy(server, prefix, {}, CHECKSUM_HEADER);
      expect((await store.deleteMany(['a', 'b'])).failed).toEqual([]);
      expect((await store.deleteMany(['c', 'd'])).failed).toEqual([]);
      expect(counts(proxy.requests())).toEqual({ DeleteObjects: 1, DeleteObject: 4 });
      expect(proxy.requests().filter((request) => request.refused)).toHaveLength(1);
      expect((await direct.list('')).objects).toEqual([]);
    });
  },
);
