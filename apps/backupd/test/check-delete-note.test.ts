/**
 * `backupd check` on MinIO, which ignores If-Match on DeleteObject: SAFE,
 * and the note about delete-if-version says what the lease really does —
 * release writes a released record with replace-if-version, never deletes.
 */
import { randomPrefix } from '@x/test-servers';
import { describe, expect, test } from 'vitest';
import { runCli, s3Env, s3Url } from './helpers/cli.ts';
import { directStore, missingReason, s3Server } from './helpers/servers.ts';

const minio = s3Server('minio');
if (!minio) console.warn(`backupd check on minio: skipped, ${missingReason('minio')}`);

describe('backupd check: what an ignored delete-if-version means', () => {
  test.skipIf(!minio)(
    'on minio: SAFE, delete-if-version ignored, and release is said to write a released record, not to delete',
    async () => {
      const server = minio!;
      const prefix = randomPrefix('check-delete');
      const result = await runCli(['check', s3Url(server, prefix)], {
        env: s3Env(server),
        timeoutMs: 120_000,
      });
      expect(result.code, `${result.stdout}\n${result.stderr}`).toBe(0);
      const summary = result.stdout.trim().split('\n').at(-1)!;
      expect(summary).toContain(': SAFE');
      expect(summary).toContain(
        'delete-if-version is ignored; backupd does not use it: the lease is released by writing a released record with replace-if-version (If-Match), never by a delete',
      );
      expect(result.stdout).not.toContain('read-check-delete');
      expect((await directStore(server).list(`${prefix}/`)).objects).toEqual([]);
    },
    180_000,
  );
});
