/**
 * What fake-gcs-server itself does with preconditions and resumable-upload
 * status queries, measured with plain HTTP (no adapter in between), so the
 * compatibility report and the adapter's README rest on a run, not on release
 * notes. Deviations from Google Cloud Storage are asserted as the expected
 * result for the pinned release; a release that changes them fails here.
 */
import { randomBytes } from 'node:crypto';
import { type GcsTestServer, randomPrefix, testServers } from '@x/test-servers';
import { describe, expect, it } from 'vitest';

const servers = testServers();
const server: GcsTestServer | undefined = servers.gcs[0];
const missing = servers.missing.find((entry) => entry.name === 'fake-gcs-server');
if (!server && process.env.CI === 'true') {
  throw new Error(
    `fake-gcs-server is required under CI=true: ${missing?.reason ?? 'not provided'}`,
  );
}

if (!server) {
  describe.skip(`fake-gcs-server behaviour: not running (${missing?.reason.split('\n')[0] ?? 'not provided'})`, () => {
    it('needs fake-gcs-server', () => {});
  });
} else {
  const base = server.apiEndpoint;
  const bucket = encodeURIComponent(server.bucket);

  async function mediaUpload(
    name: string,
    body: string,
    ifGenerationMatch: string,
  ): Promise<number> {
    const url = `${base}/upload/storage/v1/b/${bucket}/o?uploadType=media&name=${encodeURIComponent(name)}&ifGenerationMatch=${ifGenerationMatch}`;
    const response = await fetch(url, { method: 'POST', body });
    await response.body?.cancel();
    return response.status;
  }

  async function metadataOf(
    name: string,
  ): Promise<{ status: number; size?: string; generation?: string }> {
    const response = await fetch(`${base}/storage/v1/b/${bucket}/o/${encodeURIComponent(name)}`);
    if (!response.ok) {
      await response.body?.cancel();
      return { status: response.status };
    }
    const json = (await response.json()) as { size: string; generation: string };
    return { status: response.status, size: json.size, generation: json.generation };
  }

  async function readText(name: string): Promise<string> {
    const response = await fetch(
      `${base}/storage/v1/b/${bucket}/o/${encodeURIComponent(name)}?alt=media`,
    );
    return response.text();
  }

  describe(`fake-gcs-server ${server.version} (plain HTTP)`, () => {
    it('honours ifGenerationMatch on simple (media) uploads: 0 on an existing object and a stale generation are 412', async () => {
      const name = `${randomPrefix('media')}/object`;
      expect(await mediaUpload(name, 'first', '0')).toBe(200);
      expect(await mediaUpload(name, 'second', '0')).toBe(412);
      expect(await mediaUpload(name, 'third', '1')).toBe(412);
      expect(await readText(name)).toBe('first');
    });

    // Google Cloud Storage answers 412; v1.56.1 deletes (fixed upstream after
    // this release). Why the suites declare conditionalDelete: false here.
    it('DELETE with a stale ifGenerationMatch: ignored, the object is deleted (v1.56.1)', async () => {
      const name = `${randomPrefix('delete')}/object`;
      expect(await mediaUpload(name, 'kept?', '0')).toBe(200);
      const { generation } = await metadataOf(name);
      const stale = (BigInt(generation!) + 1n).toString();
      const response = await fetch(
        `${base}/storage/v1/b/${bucket}/o/${encodeURIComponent(name)}?ifGenerationMatch=${stale}`,
        { method: 'DELETE' },
      );
      await response.body?.cancel();
      expect(response.status).toBeLessThan(300);
      expect((await metadataOf(name)).status).toBe(404);
    });

    it('finalizes a resumable upload on a status query, with the bytes received so far (v1.56.1)', async () => {
      const name = `${randomPrefix('status-query')}/object`;
      const opened = await fetch(
        `${base}/upload/storage/v1/b/${bucket}/o?uploadType=resumable&name=${encodeURIComponent(name)}&ifGenerationMatch=0`,
        { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{}' },
      );
      await opened.body?.cancel();
      const session = opened.headers.get('location');
      expect(session).toBeTruthy();
      const chunk = await fetch(session!, {
        method: 'PUT',
        headers: { 'Content-Range': 'bytes 0-262143/*' },
        body: randomBytes(262144),
      });
      await chunk.body?.cancel();
      expect(chunk.status).toBe(308);
      expect((await metadataOf(name)).status).toBe(404);
      const query = await fetch(session!, {
        method: 'PUT',
        headers: { 'Content-Range': 'bytes */*' },
      });
      await query.body?.cancel();
      // Google Cloud Storage answers 308 and keeps the session open; v1.56.1 finalizes it.
      expect(query.status).toBe(200);
      expect(await metadataOf(name)).toMatchObject({ status: 200, size: '262144' });
    });
  });
}
