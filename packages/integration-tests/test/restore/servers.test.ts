/**
 * Restore and verify against every real storage server the harness runs
 * (S3 servers, Azurite, fake-gcs-server): the same bucket contents as the
 * local suites, written and read through the real adapters.
 */
import { join } from 'node:path';
import { ObjectCorruptError, verify } from '@x/restore';
import { restoreFramedStore } from '@x/source-framed';
import type { ObjectStore } from '@x/store';
import { AzureBlobStore } from '@x/store-azure';
import { GcsStore } from '@x/store-gcs';
import { S3Store } from '@x/store-s3';
import { randomPrefix, testServers } from '@x/test-servers';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { readFiles, snapshotTree, writeFixture } from './fixture.ts';
import { scratchDirectory } from './stores.ts';

const servers = testServers();
const PREFIX = 'backups/db1';

const cases: { label: string; open: () => ObjectStore }[] = [
  ...servers.s3.map((server) => ({
    label: `${server.name} ${server.version}`,
    open: () =>
      new S3Store({
        bucket: server.bucket,
        endpoint: server.endpoint,
        region: server.region,
        forcePathStyle: true,
        credentials: { accessKeyId: server.accessKeyId, secretAccessKey: server.secretAccessKey },
        prefix: randomPrefix('restore'),
      }),
  })),
  ...servers.azure.map((server) => ({
    label: `${server.name} ${server.version}`,
    open: () =>
      new AzureBlobStore({
        connectionString: server.connectionString,
        container: server.container,
        prefix: randomPrefix('restore'),
      }),
  })),
  ...servers.gcs.map((server) => ({
    label: `${server.name} ${server.version}`,
    open: () =>
      new GcsStore({
        bucket: server.bucket,
        apiEndpoint: server.apiEndpoint,
        projectId: server.projectId,
        prefix: randomPrefix('restore'),
      }),
  })),
];

for (const missing of servers.missing) {
  describe.skip(`restore on ${missing.name}: ${missing.reason.split('\n')[0]} (pnpm servers:install)`, () => {
    it('is skipped', () => {});
  });
}

describe.each(cases.map((entry) => [entry.label, entry]))(
  'restore and verify on %s',
  (_label, entry) => {
    let scratch: { path: string; cleanup(): Promise<void> };
    beforeEach(async () => {
      scratch = await scratchDirectory();
    });
    afterEach(async () => {
      await scratch.cleanup();
    });

    it('restores LATEST and chosen commits byte for byte; verify (deep) finds nothing wrong', async () => {
      const store = entry.open();
      const fixture = await writeFixture(store, PREFIX, { seed: 3 });
      for (const commitSeq of [undefined, 7, 14, 19]) {
        const target = join(scratch.path, `c-${commitSeq ?? 'latest'}`);
        const result = await restoreFramedStore(
          store,
          PREFIX,
          target,
          commitSeq === undefined ? {} : { target: { kind: 'commit', commitSeq } },
        );
        const files = await readFiles(target);
        files.delete('backup.parent');
        const expected = fixture.expectedFiles(result.commitSeq);
        expect([...files.keys()].sort()).toEqual([...expected.keys()].sort());
        for (const [name, bytes] of expected) {
          expect(Buffer.from(files.get(name)!).equals(Buffer.from(bytes)), name).toBe(true);
        }
      }
      const report = await verify(store, PREFIX, { deep: true });
      expect(report.ok).toBe(true);
      expect(report.manifests.map((manifest) => manifest.status)).toEqual(['ok', 'ok', 'ok', 'ok']);
    });

    it('refuses a corrupted segment before writing anything; verify reports its CRC', async () => {
      const store = entry.open();
      const fixture = await writeFixture(store, PREFIX, { seed: 4 });
      const key = fixture.manifests.at(-1)!.manifest.segments.at(-1)!.key;
      const damaged = fixture.objects.get(key)!.slice();
      damaged[0]! ^= 0x01;
      await store.put(key, damaged, { mode: 'overwrite' });
      const target = join(scratch.path, 'target');
      const error = await restoreFramedStore(store, PREFIX, target).catch((e: unknown) => e);
      expect(ObjectCorruptError.isInstance(error)).toBe(true);
      expect((error as ObjectCorruptError).key).toBe(key);
      expect(await snapshotTree(target)).toEqual(new Map([['.', 'absent']]));
      const report = await verify(store, PREFIX, { deep: true });
      expect(report.ok).toBe(false);
      const latest = report.manifests.find((manifest) => manifest.key === fixture.latestKey)!;
      expect(latest.problems.map((problem) => [problem.kind, problem.key])).toEqual([
        ['object-crc', key],
      ]);
    });
  },
);
