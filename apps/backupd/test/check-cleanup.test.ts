/**
 * `backupd check` cleans up without trusting the service's listing, and
 * reports what it could not clean: run against versitygw behind a proxy
 * whose listings of the scratch prefix come back empty, it still leaves
 * nothing (every key written is remembered and deleted); with deletes of two
 * probe objects refused as well, it names the count and the prefix left and
 * exits 1 although the service is SAFE. The server is looked at directly,
 * not through the proxy.
 */
import { randomPrefix, type S3TestServer } from '@x/test-servers';
import { describe, expect, test } from 'vitest';
import { runCli, s3Env, s3Url } from './helpers/cli.ts';
import { startManglingS3Proxy } from './helpers/mangling-s3-proxy.ts';
import { directStore, missingReason, s3Server } from './helpers/servers.ts';

const versitygw = s3Server('versitygw');
if (!versitygw) console.warn(`backupd check cleanup: skipped, ${missingReason('versitygw')}`);

interface Verdict {
  safe: boolean;
  summary: string;
  cleanup: { clean: boolean; prefix: string; left: number; listed: boolean; failures: string[] };
}

async function checkThrough(server: S3TestServer, prefix: string, refuseDeletes?: RegExp) {
  const proxy = await startManglingS3Proxy(server.endpoint, {
    emptyListingsUnder: '.backupd-check-',
    ...(refuseDeletes ? { refuseDeletes } : {}),
  });
  try {
    const url = s3Url({ ...server, endpoint: proxy.url }, prefix);
    const result = await runCli(['check', url, '--json'], {
      env: s3Env(server),
      timeoutMs: 240_000,
    });
    return { result, verdict: JSON.parse(result.stdout) as Verdict };
  } finally {
    // Each test closes its own proxy: the tests run concurrently.
    await proxy.close();
  }
}

describe.concurrent('backupd check cleanup', () => {
  test.skipIf(!versitygw)(
    'leaves nothing behind where the listing of its scratch prefix comes back empty',
    async () => {
      const server = versitygw!;
      const prefix = randomPrefix('check-blind');
      const { result, verdict } = await checkThrough(server, prefix);
      expect(verdict.safe, verdict.summary).toBe(true);
      expect(verdict.cleanup, JSON.stringify(verdict.cleanup)).toMatchObject({ clean: true });
      expect(verdict.cleanup.failures).toEqual([]);
      expect(result.code, result.stderr).toBe(0);
      expect((await directStore(server).list(`${prefix}/`)).objects).toEqual([]);
    },
    300_000,
  );

  test.skipIf(!versitygw)(
    'reports the objects it could not delete — how many, under which prefix — and exits 1',
    async () => {
      const server = versitygw!;
      const prefix = randomPrefix('check-stuck');
      const { result, verdict } = await checkThrough(
        server,
        prefix,
        /\/probe\/conditional-write-probe-[^/]+\/(create-race-1|upload)$/,
      );
      const direct = directStore(server);
      const left = (await direct.list(`${prefix}/`)).objects.map((info) => info.key);
      try {
        expect(left).toHaveLength(2);
        expect(verdict.safe).toBe(true);
        expect(result.code).toBe(1);
        expect(verdict.cleanup).toMatchObject({ clean: false, left: 2, listed: true });
        expect(verdict.cleanup.prefix).toMatch(
          new RegExp(`^${prefix}/\\.backupd-check-[0-9a-f]{12}$`),
        );
        expect(left.every((key) => key.startsWith(`${verdict.cleanup.prefix}/`))).toBe(true);
        expect(verdict.cleanup.failures.some((line) => line.startsWith('probe: '))).toBe(true);
        expect(verdict.cleanup.failures.at(-1)).toMatch(/^final sweep: 2 objects left under /);
        expect(verdict.cleanup.failures.join('\n')).toContain('AccessDenied');
        expect(verdict.summary).toContain(
          `cleanup FAILED: 2 objects left under ${verdict.cleanup.prefix}/`,
        );
      } finally {
        for (const key of left) await direct.delete(key);
      }
    },
    300_000,
  );
});
