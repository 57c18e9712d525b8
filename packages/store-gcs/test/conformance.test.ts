/**
 * The full shared conformance suite and the conditional-write probe, run
 * against GcsStore on fake-gcs-server.
 *
 * The pinned release (v1.56.1) ignores ifGenerationMatch on DELETE, so the
 * store is configured as a user would configure it there:
 * `capabilities: { conditionalDelete: false }`. The suite then runs its
 * declared-absent delete case (the adapter must refuse with
 * NotImplementedError) instead of the conditional-delete cases. The probe
 * runs on a store claiming everything: it measures the server, and its
 * verdict on delete is asserted, so a release that honours the condition is
 * noticed (see also gcs-store.test.ts and server-behaviour.test.ts).
 */
import { probeConditionalWrites } from '@x/store-conformance';
import { describeStoreConformance } from '@x/store-conformance/vitest';
import { type GcsTestServer, randomPrefix, testServers } from '@x/test-servers';
import { describe, expect, it } from 'vitest';
import { GcsStore, type GcsStoreOptions } from '../src/index.ts';

const servers = testServers();
const server: GcsTestServer | undefined = servers.gcs[0];
const missing = servers.missing.find((entry) => entry.name === 'fake-gcs-server');
if (!server && process.env.CI === 'true') {
  throw new Error(
    `fake-gcs-server is required under CI=true: ${missing?.reason ?? 'not provided'}`,
  );
}

/** What the pinned fake-gcs-server honours, as measured (docs/compatibility.md). */
const DECLARED = { conditionalDelete: false } as const;

function storeOn(running: GcsTestServer, extra: Partial<GcsStoreOptions> = {}): GcsStore {
  return new GcsStore({
    bucket: running.bucket,
    apiEndpoint: running.apiEndpoint,
    projectId: running.projectId,
    prefix: randomPrefix('gcs-conformance'),
    ...extra,
  });
}

if (!server) {
  describe.skip(`store-gcs conformance: fake-gcs-server not running (${missing?.reason.split('\n')[0] ?? 'not provided'})`, () => {
    it('needs fake-gcs-server', () => {});
  });
} else {
  describeStoreConformance(`GcsStore on fake-gcs-server ${server.version}`, {
    createStore: () => storeOn(server, { capabilities: DECLARED }),
    capabilities: {
      conditionalPut: true,
      multipartCreate: true,
      conditionalDelete: false,
      distinctVersions: true,
    },
  });

  describe(`GcsStore on fake-gcs-server ${server.version}: probe`, () => {
    it('finds create, replace and multipart create honoured, and delete ignored (the reason for conditionalDelete: false)', async () => {
      const report = await probeConditionalWrites(storeOn(server), 'probe');
      expect(report.create.outcome).toBe('honoured');
      expect(report.replace.outcome).toBe('honoured');
      expect(report.multipartCreate?.outcome).toBe('honoured');
      expect(report.delete.outcome).toBe('ignored');
      expect(report.delete.evidence).toMatch(/stale version removed the object/);
      expect(report.cleanupError).toBeUndefined();
    });
  });
}
