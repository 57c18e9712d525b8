/**
 * The stores the lease scenarios run on: MemoryStore and FsStore always, and
 * every real server @x/test-servers started (S3 on versitygw/minio, Azure on
 * Azurite, GCS on fake-gcs-server). A store that cannot run here is listed in
 * `skipped` with the reason; under CI=true nothing may be skipped.
 */

import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FsStore, MemoryStore, NotImplementedError, type ObjectStore } from '@x/store';
import type { S3TestServer, TestServers } from '@x/test-servers';
import type { StoreTarget, StoreUnderTest } from './scenarios.ts';

export const inCi = process.env.CI === 'true';

export interface Targets {
  readonly targets: StoreTarget[];
  /** S3 servers that ignore conditional headers (s3rver): acquire must refuse there. */
  readonly ignoringServers: { name: string; open(): Promise<StoreUnderTest> }[];
  /** Stores skipped because their code is not there (never allowed under CI=true). */
  readonly skipped: { name: string; reason: string }[];
  /** Servers the harness did not start (listed in its `missing`). */
  readonly notRunning: { name: string; reason: string }[];
  /** Temporary directories to remove after the run. */
  readonly cleanup: () => Promise<void>;
}

function localPrefix(label: string): string {
  return `lease/${label}-${randomBytes(6).toString('hex')}`;
}

async function loadTestServers(skipped: Targets['skipped']): Promise<TestServers | undefined> {
  try {
    const module = await import('@x/test-servers');
    return module.testServers();
  } catch (error) {
    if (inCi) throw error;
    skipped.push({
      name: 'real servers',
      reason: `@x/test-servers unavailable (${(error as Error).message}); run the tests from the repository root after \`pnpm servers:install\``,
    });
    return undefined;
  }
}

function s3Opener(
  server: S3TestServer,
  module: typeof import('@x/store-s3'),
): () => Promise<StoreUnderTest> {
  const store: ObjectStore = new module.S3Store({
    bucket: server.bucket,
    region: server.region,
    endpoint: server.endpoint,
    forcePathStyle: true,
    credentials: { accessKeyId: server.accessKeyId, secretAccessKey: server.secretAccessKey },
  });
  return async () => ({ store, prefix: `lease/${randomBytes(8).toString('hex')}` });
}

async function importAdapter<T>(
  name: string,
  load: () => Promise<T>,
  skipped: Targets['skipped'],
): Promise<T | undefined> {
  try {
    return await load();
  } catch (error) {
    if (inCi) throw error;
    skipped.push({
      name,
      reason: `${name} could not be loaded (${(error as Error).message}): its source is not there yet`,
    });
    return undefined;
  }
}

export async function buildTargets(): Promise<Targets> {
  const skipped: Targets['skipped'] = [];
  const notRunning: Targets['skipped'] = [];
  const targets: StoreTarget[] = [];
  const ignoringServers: Targets['ignoringServers'] = [];
  const directories: string[] = [];

  targets.push({
    name: 'MemoryStore',
    open: async () => ({ store: new MemoryStore('lease-test'), prefix: localPrefix('memory') }),
  });

  const fsRoot = await mkdtemp(join(tmpdir(), 'lease-fs-'));
  directories.push(fsRoot);
  try {
    const fsStore = new FsStore({ root: fsRoot }) as ObjectStore;
    targets.push({
      name: 'FsStore',
      open: async () => ({ store: fsStore, prefix: localPrefix('fs') }),
    });
  } catch (error) {
    if (inCi || !NotImplementedError.isInstance(error)) throw error;
    skipped.push({ name: 'FsStore', reason: 'FsStore is not implemented yet in @x/store' });
  }

  const servers = await loadTestServers(skipped);
  if (servers) {
    // Missing servers are the harness's to judge (it fails CI for required ones).
    for (const missing of servers.missing)
      notRunning.push({ name: missing.name, reason: missing.reason });
    if (servers.s3.length > 0) {
      const s3 = await importAdapter('@x/store-s3', () => import('@x/store-s3'), skipped);
      if (s3) {
        for (const server of servers.s3) {
          const open = s3Opener(server, s3);
          const name = `S3Store on ${server.name} ${server.version}`;
          if (server.honoursConditionalWrites) targets.push({ name, open });
          else ignoringServers.push({ name, open });
        }
      }
    }
    if (servers.azure.length > 0) {
      const azure = await importAdapter('@x/store-azure', () => import('@x/store-azure'), skipped);
      if (azure) {
        for (const server of servers.azure) {
          const store: ObjectStore = new azure.AzureBlobStore({
            connectionString: server.connectionString,
            container: server.container,
          });
          targets.push({
            name: `AzureBlobStore on ${server.name} ${server.version}`,
            open: async () => ({ store, prefix: `lease/${randomBytes(8).toString('hex')}` }),
          });
        }
      }
    }
    if (servers.gcs.length > 0) {
      const gcs = await importAdapter('@x/store-gcs', () => import('@x/store-gcs'), skipped);
      if (gcs) {
        for (const server of servers.gcs) {
          const store: ObjectStore = new gcs.GcsStore({
            bucket: server.bucket,
            projectId: server.projectId,
            apiEndpoint: server.apiEndpoint,
          });
          targets.push({
            name: `GcsStore on ${server.name} ${server.version}`,
            open: async () => ({ store, prefix: `lease/${randomBytes(8).toString('hex')}` }),
          });
        }
      }
    }
  }

  return {
    targets,
    ignoringServers,
    skipped,
    notRunning,
    cleanup: async () => {
      await Promise.all(
        directories.map((directory) => rm(directory, { recursive: true, force: true })),
      );
    },
  };
}
