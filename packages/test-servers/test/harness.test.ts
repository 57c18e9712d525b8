/**
 * Proves the harness end to end from inside a project: the root global
 * setup's provided value reaches this project's tests, and every listed
 * server answers with its bucket or container in place.
 */
import { describe, expect, it } from 'vitest';
import { randomPrefix, testServers } from '../src/index.ts';
import { azureCreateContainer, s3SignedRequest } from '../src/signing.ts';

describe('test servers provided by the root global setup', () => {
  it('reaches this project through inject', () => {
    const servers = testServers();
    expect(Array.isArray(servers.s3)).toBe(true);
    expect(Array.isArray(servers.missing)).toBe(true);
    const listed = [
      ...servers.s3.map((server) => server.name),
      ...servers.azure.map((server) => server.name),
      ...servers.gcs.map((server) => server.name),
      ...servers.missing.map((entry) => entry.name),
    ].sort();
    // Every server the harness knows is either running or listed as missing.
    expect(listed).toEqual(['azurite', 'fake-gcs-server', 'minio', 's3rver', 'versitygw']);
  });

  it('has every installed server running (none listed as failing to start)', () => {
    const failing = testServers().missing.filter((entry) =>
      entry.reason.startsWith('failed to start'),
    );
    expect(failing).toEqual([]);
  });

  it('lists no required server as missing under CI', () => {
    if (process.env.CI !== 'true') return;
    const missing = testServers().missing.map((entry) => entry.name);
    expect(missing.filter((name) => name !== 'minio')).toEqual([]);
  });

  it('has created the bucket on every S3 server', async () => {
    for (const server of testServers().s3) {
      const response = await s3SignedRequest({
        method: 'HEAD',
        endpoint: server.endpoint,
        path: `/${server.bucket}`,
        region: server.region,
        accessKeyId: server.accessKeyId,
        secretAccessKey: server.secretAccessKey,
      });
      expect({ server: server.name, status: response.status }).toEqual({
        server: server.name,
        status: 200,
      });
      expect(server.endpoint).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(server.version).not.toBe('');
      expect(server.honoursConditionalWrites).toBe(server.name !== 's3rver');
    }
  });

  it('refuses a wrongly signed request on every S3 server, so the bucket check above means something', async () => {
    for (const server of testServers().s3) {
      if (server.name === 's3rver') continue; // s3rver accepts its fixed credentials only, but checks them loosely
      const response = await s3SignedRequest({
        method: 'HEAD',
        endpoint: server.endpoint,
        path: `/${server.bucket}`,
        region: server.region,
        accessKeyId: server.accessKeyId,
        secretAccessKey: `${server.secretAccessKey}-wrong`,
      });
      expect(response.status).toBe(403);
    }
  });

  it('has created the bucket on fake-gcs-server and the container on Azurite', async () => {
    for (const server of testServers().gcs) {
      const response = await fetch(`${server.apiEndpoint}/storage/v1/b/${server.bucket}`);
      expect(response.status).toBe(200);
      expect(((await response.json()) as { name: string }).name).toBe(server.bucket);
    }
    for (const server of testServers().azure) {
      expect(server.blobEndpoint).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/devstoreaccount1$/);
      expect(server.connectionString).toContain(`BlobEndpoint=${server.blobEndpoint};`);
      // Creating it again is refused as a duplicate: it exists and the credentials work.
      const again = await azureCreateContainer(server);
      expect(again.status).toBe(409);
      expect(await again.text()).toContain('ContainerAlreadyExists');
    }
  });

  it('gives a fresh, valid prefix each time', () => {
    const first = randomPrefix('My Label!');
    const second = randomPrefix('My Label!');
    expect(first).not.toBe(second);
    expect(first).toMatch(/^t-my-label-[a-z0-9]+-[0-9a-f]{12}$/);
  });
});
