/**
 * s3rver is a real S3 server that ignores conditional headers. These tests
 * pin that, as expected results: if s3rver starts honouring them (or the
 * adapter stops sending them), something here fails and the compatibility
 * report must be looked at again. They are also the meta-tests of the race
 * and create tests in s3-servers.test.ts: run against a server that does not
 * honour conditions, those assertions do fail.
 */
import { AlreadyExistsError } from '@x/store';
import { randomPrefix, testServers } from '@x/test-servers';
import { describe, expect, it } from 'vitest';
import { CLAIMING_ALL, storeFor } from './helpers.ts';

const server = testServers().s3.find((entry) => entry.name === 's3rver');
const allClaimed = CLAIMING_ALL;

describe.skipIf(!server)(
  `S3Store on s3rver ${server?.version ?? '(not running: pnpm servers:install)'}`,
  () => {
    it('is marked as not honouring conditional writes by the harness', () => {
      expect(server?.honoursConditionalWrites).toBe(false);
    });

    it('lets a create overwrite an existing object (If-None-Match ignored)', async () => {
      const store = storeFor(server!, randomPrefix('s3rver-create'), { capabilities: allClaimed });
      await store.put('k', new TextEncoder().encode('first'), { mode: 'create' });
      const second = await store
        .put('k', new TextEncoder().encode('second'), { mode: 'create' })
        .catch((error: unknown) => error);
      expect(AlreadyExistsError.isInstance(second)).toBe(false);
      expect(new TextDecoder().decode((await store.get('k'))?.body)).toBe('second');
    });

    it('lets a stale replace and a stale delete through (If-Match ignored)', async () => {
      const store = storeFor(server!, randomPrefix('s3rver-replace'), { capabilities: allClaimed });
      const { version: v1 } = await store.put('k', new TextEncoder().encode('v1'));
      await store.put('k', new TextEncoder().encode('v2'));
      await store.put('k', new TextEncoder().encode('stale'), { mode: { ifMatch: v1 } });
      expect(new TextDecoder().decode((await store.get('k'))?.body)).toBe('stale');
      await store.delete('k', { ifMatch: v1 });
      expect(await store.head('k')).toBeNull();
    });

    it('(meta) 32 concurrent creates: every one "wins", so the exactly-one-winner assertion can fail', async () => {
      const store = storeFor(server!, randomPrefix('s3rver-race'), { capabilities: allClaimed });
      const results = await Promise.allSettled(
        Array.from({ length: 32 }, (_, index) =>
          store.put('contended', new TextEncoder().encode(`writer ${index}`), { mode: 'create' }),
        ),
      );
      const winners = results.filter((result) => result.status === 'fulfilled').length;
      expect(winners).toBeGreaterThan(1);
    });

    it('(meta) a second multipart create replaces the first, so the byte-identical assertion can fail', async () => {
      const store = storeFor(server!, randomPrefix('s3rver-multipart'), {
        capabilities: allClaimed,
      });
      const MiB = 1024 * 1024;
      await store.upload('big', new Uint8Array(6 * MiB).fill(1), {
        mode: 'create',
        partSize: 5 * MiB,
      });
      const second = await store
        .upload('big', new Uint8Array(6 * MiB).fill(2), { mode: 'create', partSize: 5 * MiB })
        .catch((error: unknown) => error);
      expect(AlreadyExistsError.isInstance(second)).toBe(false);
      expect((await store.get('big'))?.body[0]).toBe(2);
    });
  },
);
