/**
 * Directory placeholders (`dir/`, zero bytes) on every real S3 server the
 * harness runs: created through the S3 API as the AWS console and tools
 * create them, they must not appear in `S3Store.list` (no key of the store
 * ends in `/`). The servers here list them with an ETag; a placeholder
 * listed without one, and any other entry without one, are pinned by the
 * unit tests in src/s3-store.test.ts on the SDK's response shape.
 */
import { PutObjectCommand } from '@aws-sdk/client-s3';
import { randomPrefix, testServers } from '@x/test-servers';
import { describe, expect, it } from 'vitest';
import { clientFor, storeFor } from './helpers.ts';

const servers = testServers();

for (const name of ['s3rver', 'versitygw', 'minio'] as const) {
  if (!servers.s3.some((server) => server.name === name)) {
    const reason = servers.missing.find((entry) => entry.name === name)?.reason ?? 'not running';
    describe.skipIf(true)(`directory placeholders on ${name}: ${reason.split('\n')[0]}`, () => {
      it('is skipped', () => {});
    });
  }
}

describe.each(servers.s3.map((server) => [`${server.name} ${server.version}`, server]))(
  'directory placeholders on %s',
  (_label, server) => {
    it('list leaves out zero-byte keys ending in /, with and without a delimiter', async () => {
      const prefix = randomPrefix('placeholders');
      const client = clientFor(server);
      const placeholder = (key: string) =>
        client.send(
          new PutObjectCommand({ Bucket: server.bucket, Key: key, Body: new Uint8Array(0) }),
        );
      const store = storeFor(server, prefix);
      // The store's own prefix as a placeholder, one above a key, and an empty one.
      await placeholder(`${prefix}/`);
      await placeholder(`${prefix}/dir/`);
      await placeholder(`${prefix}/empty/`);
      await store.put('dir/inside', new TextEncoder().encode('inside'));
      await store.put('top', new TextEncoder().encode('top'));

      const all = await store.list('');
      expect(all.objects.map((info) => [info.key, info.size])).toEqual([
        ['dir/inside', 6],
        ['top', 3],
      ]);
      expect(all.objects.every((info) => typeof info.version.etag === 'string')).toBe(true);
      expect((await store.list('dir/')).objects.map((info) => info.key)).toEqual(['dir/inside']);
      expect((await store.list('empty/')).objects).toEqual([]);
      const rolled = await store.list('', { delimiter: '/' });
      expect(rolled.objects.map((info) => info.key)).toEqual(['top']);
      // A folder that holds only its placeholder still rolls up: S3 reports
      // the prefix, and the listing passes it on as the service gives it.
      expect(rolled.commonPrefixes).toEqual(['dir/', 'empty/']);
    });
  },
);
