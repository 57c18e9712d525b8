/**
 * Stores without conditional writes: the worker falls back to plain writes
 * where a store answers NotImplementedError, and with `conditional: false`
 * writes manifests and LATEST unconditionally; a service that ignores
 * conditional headers (s3rver) keeps a started worker out, uploading nothing.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BackupWorker } from '@x/backup-worker';
import { FakeClock } from '@x/lease';
import { FramedDirSource } from '@x/source-framed';
import { MemoryStore, NotImplementedError, type PutOptions } from '@x/store';
import { S3Store } from '@x/store-s3';
import { randomPrefix, testServers } from '@x/test-servers';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { checkBucket } from './helpers/check-bucket.ts';
import { waitFor } from './helpers/drive.ts';
import { FramedTestEngine } from './helpers/framed-engine.ts';
import { CountingStore } from './helpers/stores.ts';

/** A store that cannot do conditional puts (answers NotImplementedError). */
class UnconditionalStore extends CountingStore {
  override async put(key: string, body: Uint8Array, options?: PutOptions) {
    if (options?.mode !== undefined && options.mode !== 'overwrite')
      throw new NotImplementedError('conditional put');
    return super.put(key, body, options);
  }
}

describe('without conditional writes', () => {
  let directory: string;
  let engine: FramedTestEngine;

  beforeEach(async () => {
    directory = await mkdtemp(join(tmpdir(), 'backup-worker-conditional-'));
    engine = await FramedTestEngine.create(directory);
    await engine.commit(2);
    await engine.snapshot();
    await engine.commit(2);
  });
  afterEach(() => rm(directory, { recursive: true, force: true }));

  for (const conditional of [true, false]) {
    it(`falls back to plain writes where the store answers NotImplementedError (conditional: ${conditional})`, async () => {
      const inner = new MemoryStore();
      const store = new UnconditionalStore(inner);
      const worker = new BackupWorker({
        store,
        prefix: 'p',
        source: new FramedDirSource({ directory, engine }),
        clock: new FakeClock(),
        manifestIntervalMs: 0,
        conditional,
      });
      await worker.runOnce();
      await engine.commit(1);
      await worker.runOnce();
      const check = await checkBucket(inner, 'p', { content: true });
      expect(check.manifests.get(check.latest!)!.commitSeq).toBe(engine.durableCommits);
    });
  }

  const s3rver = testServers().s3.find((server) => !server.honoursConditionalWrites);
  it.skipIf(!s3rver)(
    'a started worker on a service that ignores conditional headers uploads nothing and says why',
    async () => {
      const server = s3rver!;
      const inner = new S3Store({
        bucket: server.bucket,
        endpoint: server.endpoint,
        region: server.region,
        forcePathStyle: true,
        credentials: { accessKeyId: server.accessKeyId, secretAccessKey: server.secretAccessKey },
      });
      const store = new CountingStore(inner);
      const clock = new FakeClock();
      const prefix = randomPrefix('backup-worker-s3rver');
      const handle = new BackupWorker({
        store,
        prefix,
        source: new FramedDirSource({ directory, engine }),
        clock,
      }).start();
      try {
        await waitFor(clock, () => handle.health().reason !== null, { what: 'the refusal' });
        expect(handle.health()).toMatchObject({ healthy: false, leaseHeld: false });
        expect(handle.health().reason).toMatch(/condition/i);
        expect(store.writes.filter((w) => !w.endsWith('/LEASE'))).toEqual([]);
      } finally {
        let stopped = false;
        void handle.shutdown().then(() => {
          stopped = true;
        });
        await waitFor(clock, () => stopped, { stepMs: 1_000, maxMs: 120_000, what: 'shutdown' });
      }
    },
  );
});
