/**
 * The real servers @x/test-servers started, as store cases: S3 (every server
 * that honours conditional writes; s3rver, which ignores them, cannot hold a
 * conditional lease and is left out), Azure (Azurite), GCS (fake-gcs-server).
 * Each case writes under a fresh random prefix.
 */

import { AzureBlobStore } from '@x/store-azure';
import { GcsStore } from '@x/store-gcs';
import { S3Store } from '@x/store-s3';
import { randomPrefix, testServers } from '@x/test-servers';
import type { StoreCase } from './stores.ts';

export function realStoreCases(): StoreCase[] {
  const servers = testServers();
  const cases: StoreCase[] = [];
  for (const server of servers.s3) {
    if (!server.honoursConditionalWrites) continue;
    cases.push({
      name: `S3 (${server.name} ${server.version})`,
      exhaustive: false,
      async open() {
        const store = new S3Store({
          bucket: server.bucket,
          endpoint: server.endpoint,
          region: server.region,
          forcePathStyle: true,
          credentials: { accessKeyId: server.accessKeyId, secretAccessKey: server.secretAccessKey },
          ...(server.name === 'minio' ? { capabilities: { conditionalDelete: false } } : {}),
        });
        return { store, prefix: randomPrefix('backup-worker'), close: async () => {} };
      },
    });
  }
  for (const server of servers.azure) {
    cases.push({
      name: `Azure (${server.name} ${server.version})`,
      exhaustive: false,
      async open() {
        const store = new AzureBlobStore({
          connectionString: server.connectionString,
          container: server.container,
        });
        return { store, prefix: randomPrefix('backup-worker'), close: async () => {} };
      },
    });
  }
  for (const server of servers.gcs) {
    cases.push({
      name: `GCS (${server.name} ${server.version})`,
      exhaustive: false,
      async open() {
        const store = new GcsStore({
          bucket: server.bucket,
          apiEndpoint: server.apiEndpoint,
          projectId: server.projectId,
        });
        return { store, prefix: randomPrefix('backup-worker'), close: async () => {} };
      },
    });
  }
  return cases;
}
