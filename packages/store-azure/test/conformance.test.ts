/**
 * The shared conformance suite and the conditional-write probe, run against
 * AzureBlobStore on Azurite, holding the store to every capability.
 */
import { probeConditionalWrites } from '@x/store-conformance';
import { describeStoreConformance } from '@x/store-conformance/vitest';
import { type AzureTestServer, randomPrefix, testServers } from '@x/test-servers';
import { describe, expect, it } from 'vitest';
import { AzureBlobStore } from '../src/index.ts';

const servers = testServers();
const server: AzureTestServer | undefined = servers.azure[0];
const missing = servers.missing.find((entry) => entry.name === 'azurite');
if (!server && process.env.CI === 'true') {
  throw new Error(`Azurite is required under CI=true: ${missing?.reason ?? 'not provided'}`);
}

function storeOn(running: AzureTestServer): AzureBlobStore {
  return new AzureBlobStore({
    connectionString: running.connectionString,
    container: running.container,
    prefix: randomPrefix('azure-conformance'),
  });
}

if (!server) {
  describe.skipIf(true)(
    `store-azure conformance: Azurite not running (${missing?.reason.split('\n')[0] ?? 'not provided'})`,
    () => {
      it('needs Azurite', () => {});
    },
  );
} else {
  describeStoreConformance(`AzureBlobStore on Azurite ${server.version}`, {
    createStore: () => storeOn(server),
    capabilities: {
      conditionalPut: true,
      conditionalDelete: true,
      multipartCreate: true,
      distinctVersions: true,
    },
  });

  describe(`AzureBlobStore on Azurite ${server.version}: probe`, () => {
    it('finds create, replace, delete and multipart create honoured', async () => {
      const report = await probeConditionalWrites(storeOn(server), 'probe');
      expect(report.create.outcome).toBe('honoured');
      expect(report.replace.outcome).toBe('honoured');
      expect(report.delete.outcome).toBe('honoured');
      expect(report.multipartCreate?.outcome).toBe('honoured');
      expect(report.cleanupError).toBeUndefined();
    });
  });
}
