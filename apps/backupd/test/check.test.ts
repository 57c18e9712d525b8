/**
 * `backupd check` measures on the live service whether the lease can give
 * real exclusion: s3rver ignores conditional writes (UNSAFE, exit 1),
 * versitygw honours them (SAFE, exit 0). Both servers answering the same way
 * would make one of these fail, so neither verdict can pass vacuously.
 */
import { randomPrefix } from '@x/test-servers';
import { describe, expect, test } from 'vitest';
import { runCli, s3Env, s3Url } from './helpers/cli.ts';
import { directStore, missingReason, s3Server } from './helpers/servers.ts';

const s3rver = s3Server('s3rver');
const versitygw = s3Server('versitygw');
if (!s3rver) console.warn(`backupd check on s3rver: skipped, ${missingReason('s3rver')}`);
if (!versitygw) console.warn(`backupd check on versitygw: skipped, ${missingReason('versitygw')}`);

describe.concurrent('backupd check', () => {
  test.skipIf(!s3rver)(
    'reports s3rver UNSAFE, naming the preconditions it ignores, with exit 1',
    async () => {
      const server = s3rver!;
      const prefix = randomPrefix('backupd-check');
      const result = await runCli(['check', s3Url(server, prefix)], {
        env: s3Env(server),
        timeoutMs: 60_000,
      });
      expect(result.code, `${result.stdout}\n${result.stderr}`).toBe(1);
      const verdict = result.stdout.trim().split('\n').at(-1)!;
      expect(verdict).toContain('UNSAFE');
      expect(verdict).toMatch(/create-if-absent ignored/);
      expect(verdict).toMatch(/replace-if-version ignored/);
      expect(result.stdout).not.toMatch(/: SAFE/);
      // The scratch prefix it wrote under is gone.
      expect((await directStore(server).list(`${prefix}/`)).objects).toEqual([]);
    },
  );

  test.skipIf(!versitygw)(
    'with wrong credentials or a missing bucket: NOT CHECKED, exit 1, one line and no verdict',
    async () => {
      const server = versitygw!;
      const prefix = randomPrefix('backupd-check');
      const wrongKeys = await runCli(['check', s3Url(server, prefix)], {
        env: s3Env(server, { AWS_SECRET_ACCESS_KEY: 'not-the-secret' }),
        timeoutMs: 60_000,
      });
      const missingBucket = await runCli(
        ['check', s3Url({ ...server, bucket: 'no-such-bucket-here' }, prefix)],
        { env: s3Env(server), timeoutMs: 60_000 },
      );
      for (const result of [wrongKeys, missingBucket]) {
        expect(result.code, `${result.stdout}\n${result.stderr}`).toBe(1);
        const lines = result.stdout.trim().split('\n');
        expect(lines, result.stdout).toHaveLength(1);
        expect(lines[0]).toMatch(
          /: NOT CHECKED — the first write failed \(.+\): check the credentials, that the bucket exists/,
        );
        expect(result.stdout).not.toMatch(/UNSAFE|SAFE —|cleanup FAILED/);
        expect(result.stdout + result.stderr).not.toContain('not-the-secret');
      }
      expect((await directStore(server).list(`${prefix}/`)).objects).toEqual([]);
    },
  );

  test.skipIf(!versitygw)('reports versitygw SAFE with exit 0', async () => {
    const server = versitygw!;
    const prefix = randomPrefix('backupd-check');
    const result = await runCli(['check', s3Url(server, prefix), '--json'], {
      env: s3Env(server),
      timeoutMs: 60_000,
    });
    expect(result.code, `${result.stdout}\n${result.stderr}`).toBe(0);
    const verdict = JSON.parse(result.stdout) as {
      safe: boolean;
      exclusion: string;
      summary: string;
      probe: Record<string, { outcome: string }>;
    };
    expect(verdict.safe).toBe(true);
    expect(verdict.exclusion).toBe('conditional');
    expect(verdict.probe.create!.outcome).toBe('honoured');
    expect(verdict.probe.replace!.outcome).toBe('honoured');
    expect(verdict.summary).toContain(': SAFE');
    expect((await directStore(server).list(`${prefix}/`)).objects).toEqual([]);
  });
});
