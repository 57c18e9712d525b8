/**
 * S3Store against every real S3 server the harness runs: the races and
 * large-object guarantees the issue demands, and the adapter's handling of
 * lost answers, aborts and paging — each on the real service.
 */
import { HeadObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import {
  AlreadyExistsError,
  ConflictError,
  NotImplementedError,
  PreconditionFailedError,
} from '@x/store';
import { randomPrefix, type S3TestServer, testServers } from '@x/test-servers';
import { describe, expect, it } from 'vitest';
import { WRITE_ID_METADATA } from '../src/index.ts';
import {
  CLAIMING_ALL,
  clientFor,
  openUploads,
  patternBytes,
  storeFor,
  unevenChunks,
} from './helpers.ts';

const MiB = 1024 * 1024;
const servers = testServers();
const conditionalServers = servers.s3.filter((server) => server.honoursConditionalWrites);

for (const name of ['versitygw', 'minio'] as const) {
  if (!conditionalServers.some((server) => server.name === name)) {
    const reason = servers.missing.find((entry) => entry.name === name)?.reason ?? 'not running';
    describe.skipIf(true)(
      `S3Store on ${name}: ${reason.split('\n')[0]} (pnpm servers:install)`,
      () => {
        it('is skipped', () => {});
      },
    );
  }
}

/** A client whose first answer to `commandName` is lost after the request was applied, so the SDK retries it. */
function clientLosingFirstAnswer(server: S3TestServer, commandName: string) {
  const client = clientFor(server);
  let lost = 0;
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const result = await next(args);
      if (context.commandName === commandName && lost === 0) {
        lost += 1;
        // Looks like a timeout to the SDK's retry strategy: transient, retried.
        throw Object.assign(new Error('answer lost on the way back (simulated)'), {
          name: 'TimeoutError',
        });
      }
      return result;
    },
    { step: 'deserialize', name: 'loseFirstAnswer' },
  );
  return { client, lostCount: () => lost };
}

describe.each(conditionalServers.map((server) => [`${server.name} ${server.version}`, server]))(
  'S3Store on %s',
  (_label, server) => {
    it('32 concurrent creates of one key: exactly one wins, the others get AlreadyExistsError', async () => {
      const store = storeFor(server, randomPrefix('race'));
      const bodies = Array.from({ length: 32 }, (_, index) =>
        new TextEncoder().encode(`writer ${index}`),
      );
      const results = await Promise.allSettled(
        bodies.map((body) => store.put('contended', body, { mode: 'create' })),
      );
      const winners = results.flatMap((result, index) =>
        result.status === 'fulfilled' ? [index] : [],
      );
      expect(winners).toHaveLength(1);
      const losers = results.filter((result) => result.status === 'rejected');
      for (const loser of losers) {
        const reason = (loser as PromiseRejectedResult).reason;
        expect(AlreadyExistsError.isInstance(reason) || ConflictError.isInstance(reason)).toBe(
          true,
        );
      }
      const stored = await store.get('contended');
      const winner = winners[0]!;
      expect(new TextDecoder().decode(stored?.body)).toBe(`writer ${winner}`);
      expect(stored?.version).toEqual(
        (results[winner] as PromiseFulfilledResult<{ version: unknown }>).value.version,
      );
    });

    it('20 MiB multipart create twice: the second gets AlreadyExistsError, the first stays byte-identical, no upload left open', async () => {
      const prefix = randomPrefix('multipart');
      const store = storeFor(server, prefix);
      const first = patternBytes(20 * MiB, 1);
      const second = patternBytes(20 * MiB, 2);
      const created = await store.upload('big', unevenChunks(first), {
        mode: 'create',
        partSize: 5 * MiB,
      });
      expect(created.size).toBe(first.byteLength);
      // Multipart ETags end in -<parts>: this really went up in parts.
      expect(created.version.etag).toMatch(/-4"$/);
      const refused = await store
        .upload('big', unevenChunks(second), { mode: 'create', partSize: 5 * MiB })
        .catch((error: unknown) => error);
      expect(AlreadyExistsError.isInstance(refused)).toBe(true);
      const stored = await store.get('big');
      expect(stored?.size).toBe(first.byteLength);
      expect(Buffer.compare(Buffer.from(stored!.body), Buffer.from(first))).toBe(0);
      expect(stored?.version).toEqual(created.version);
      expect(await openUploads(store, `${prefix}/`)).toEqual([]);
    });

    it('recognises its own create when the first answer was lost and the SDK retry is answered 412', async () => {
      const prefix = randomPrefix('lost-answer');
      const { client, lostCount } = clientLosingFirstAnswer(server, 'PutObjectCommand');
      const store = storeFor(server, prefix, { client });
      const result = await store.put('k', new TextEncoder().encode('mine'), { mode: 'create' });
      expect(lostCount()).toBe(1);
      const stored = await store.get('k');
      expect(result.version).toEqual(stored?.version);
      expect(new TextDecoder().decode(stored?.body)).toBe('mine');
    });

    it('(meta) without the read-back, that same lost answer surfaces as 412 from the SDK', async () => {
      const prefix = randomPrefix('lost-answer-raw');
      const { client } = clientLosingFirstAnswer(server, 'PutObjectCommand');
      const error = await client
        .send(
          new PutObjectCommand({
            Bucket: server.bucket,
            Key: `${prefix}/k`,
            Body: 'mine',
            IfNoneMatch: '*',
          }),
        )
        .catch(
          (caught: unknown) =>
            caught as { $metadata?: { httpStatusCode?: number; attempts?: number } },
        );
      expect(error?.$metadata?.httpStatusCode).toBe(412);
      expect(error?.$metadata?.attempts).toBe(2);
    });

    it('recognises its own replace after a lost answer, and still refuses a genuinely stale one', async () => {
      const prefix = randomPrefix('lost-replace');
      const plain = storeFor(server, prefix);
      const { version: v1 } = await plain.put('k', new TextEncoder().encode('v1'), {
        mode: 'create',
      });
      const { client, lostCount } = clientLosingFirstAnswer(server, 'PutObjectCommand');
      const flaky = storeFor(server, prefix, { client });
      const { version: v2 } = await flaky.put('k', new TextEncoder().encode('v2'), {
        mode: { ifMatch: v1 },
      });
      expect(lostCount()).toBe(1);
      expect((await plain.head('k'))?.version).toEqual(v2);
      // The write id is on the object, which is how the read-back knew.
      const head = await plain.client.send(
        new HeadObjectCommand({ Bucket: server.bucket, Key: `${prefix}/k` }),
      );
      expect(head.Metadata?.[WRITE_ID_METADATA]).toMatch(/^[0-9a-f-]{36}$/);
      const stale = await plain
        .put('k', new TextEncoder().encode('v3'), { mode: { ifMatch: v1 } })
        .catch((error: unknown) => error);
      expect(PreconditionFailedError.isInstance(stale)).toBe(true);
    });

    it('recognises its own multipart create after a lost Complete answer', async () => {
      const prefix = randomPrefix('lost-complete');
      const { client, lostCount } = clientLosingFirstAnswer(
        server,
        'CompleteMultipartUploadCommand',
      );
      const store = storeFor(server, prefix, { client });
      const body = patternBytes(6 * MiB, 3);
      const result = await store.upload('k', body, { mode: 'create', partSize: 5 * MiB });
      expect(lostCount()).toBe(1);
      const stored = await store.get('k');
      expect(stored?.version).toEqual(result.version);
      expect(Buffer.compare(Buffer.from(stored!.body), Buffer.from(body))).toBe(0);
    });

    it('an upload aborted midway rejects with the signal reason and leaves no object and no open upload', async () => {
      const prefix = randomPrefix('abort');
      const store = storeFor(server, prefix);
      const controller = new AbortController();
      const reason = new Error('stop now');
      async function* source(): AsyncIterable<Uint8Array> {
        yield patternBytes(5 * MiB, 4);
        yield patternBytes(5 * MiB, 5);
        controller.abort(reason);
        yield patternBytes(1 * MiB, 6);
      }
      const error = await store
        .upload('k', source(), { mode: 'create', partSize: 5 * MiB, signal: controller.signal })
        .catch((caught: unknown) => caught);
      expect(error).toBe(reason);
      expect(await store.head('k')).toBeNull();
      expect(await openUploads(store, `${prefix}/`)).toEqual([]);
    });

    it('upload reads the source no further ahead than one part (bounded memory)', async () => {
      const client = clientFor(server);
      let uploaded = 0;
      client.middlewareStack.add(
        (next, context) => async (args) => {
          const result = await next(args);
          if (context.commandName === 'UploadPartCommand')
            uploaded += (args.input as { Body: Uint8Array }).Body.byteLength;
          return result;
        },
        { step: 'initialize', name: 'countUploadedParts' },
      );
      const store = storeFor(server, randomPrefix('bounded'), { client });
      const chunk = 1 * MiB;
      let yielded = 0;
      let furthestAhead = 0;
      async function* source(): AsyncIterable<Uint8Array> {
        for (let index = 0; index < 24; index += 1) {
          yielded += chunk;
          furthestAhead = Math.max(furthestAhead, yielded - uploaded);
          yield patternBytes(chunk, index + 10);
        }
      }
      const result = await store.upload('k', source(), { partSize: 5 * MiB });
      expect(result.size).toBe(24 * MiB);
      expect(uploaded).toBe(24 * MiB);
      expect(furthestAhead).toBeLessThanOrEqual(5 * MiB + chunk);
      expect(furthestAhead).toBeGreaterThan(4 * MiB);
    });

    it('lists every page (paging forced to 2 keys a page) with rolled-up prefixes', async () => {
      const prefix = randomPrefix('paging');
      const client = clientFor(server);
      client.middlewareStack.add(
        (next) => async (args) => {
          (args.input as { MaxKeys?: number }).MaxKeys = 2;
          return next(args);
        },
        { step: 'initialize', name: 'smallPages' },
      );
      const store = storeFor(server, prefix, { client });
      const keys = ['a', 'b/1', 'b/2', 'c', 'd', 'e/f/g', 'é'];
      await Promise.all(keys.map((key) => store.put(key, new TextEncoder().encode(key))));
      const all = await store.list('');
      expect(all.objects.map((info) => info.key)).toEqual(keys);
      expect(all.objects.every((info) => info.size === Buffer.byteLength(info.key))).toBe(true);
      const rolled = await store.list('', { delimiter: '/' });
      expect(rolled.objects.map((info) => info.key)).toEqual(['a', 'c', 'd', 'é']);
      expect(rolled.commonPrefixes).toEqual(['b/', 'e/']);
    });

    it('streams an object and stops cleanly when the reader aborts', async () => {
      const store = storeFor(server, randomPrefix('stream'));
      const body = patternBytes(3 * MiB, 7);
      await store.put('k', body);
      const streamed = await store.getStream('k');
      const parts: Uint8Array[] = [];
      for await (const chunk of streamed!.body) parts.push(chunk);
      expect(Buffer.compare(Buffer.concat(parts), Buffer.from(body))).toBe(0);
      expect(streamed?.size).toBe(body.byteLength);
      const controller = new AbortController();
      const reason = new Error('reader gave up');
      const aborted = await store.getStream('k', { signal: controller.signal });
      const error = await (async () => {
        for await (const _chunk of aborted!.body) controller.abort(reason);
      })().catch((caught: unknown) => caught);
      expect(error).toBe(reason);
      expect(await store.getStream('missing')).toBeNull();
    });
  },
);

describe.each(
  servers.s3.filter((server) => server.name === 'minio').map((server) => [server.version, server]),
)('S3Store on minio %s: conditional delete', (_version, server) => {
  it('is declared off and refused, because MinIO deletes regardless of If-Match', async () => {
    const prefix = randomPrefix('minio-delete');
    const store = storeFor(server, prefix);
    const { version } = await store.put('k', new TextEncoder().encode('x'), { mode: 'create' });
    const refused = await store.delete('k', { ifMatch: version }).catch((error: unknown) => error);
    expect(NotImplementedError.isInstance(refused)).toBe(true);
    // The reason it is off: the server ignores a stale If-Match and deletes anyway.
    const pretending = storeFor(server, prefix, { capabilities: CLAIMING_ALL });
    await pretending.put('k', new TextEncoder().encode('y'));
    await pretending.delete('k', { ifMatch: version });
    expect(await store.head('k')).toBeNull();
  });
});
