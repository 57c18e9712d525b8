/**
 * `backupd lease` prints the exclusion it measured, not the adapter's
 * declared capabilities: on s3rver, which ignores preconditions, a lease can
 * only be best-effort (and is, taken with `conditional: false`); on
 * versitygw, which honours them, the record cannot say how its holder took
 * it, so "unknown". Both print something else than "conditional", which is
 * what every s3:// URL used to get.
 */
import { BucketLease, FakeClock, newInstanceId } from '@x/lease';
import { randomPrefix, type S3TestServer } from '@x/test-servers';
import { describe, expect, test } from 'vitest';
import { runCli, s3Env, s3Url } from './helpers/cli.ts';
import { directStore, missingReason, s3Server } from './helpers/servers.ts';

const s3rver = s3Server('s3rver');
const versitygw = s3Server('versitygw');
if (!s3rver) console.warn(`backupd lease exclusion on s3rver: skipped, ${missingReason('s3rver')}`);
if (!versitygw)
  console.warn(`backupd lease exclusion on versitygw: skipped, ${missingReason('versitygw')}`);

async function leaseOn(server: S3TestServer, prefix: string, conditional: boolean) {
  return BucketLease.acquireAs(directStore(server), {
    prefix,
    instanceId: newInstanceId(),
    clock: new FakeClock({ wallMs: Date.now() }),
    conditional,
    logger: { info() {}, warn() {} },
  });
}

interface LeaseJson {
  state: string;
  exclusion: string;
  exclusionDetail: string;
}

describe.concurrent('backupd lease: the exclusion', () => {
  test.skipIf(!s3rver)(
    's3rver, right after a best-effort acquire: best-effort, measured',
    async () => {
      const server = s3rver!;
      const prefix = randomPrefix('lease-excl');
      const lease = await leaseOn(server, prefix, false);
      expect(lease.exclusion).toBe('best-effort');
      try {
        const text = await runCli(['lease', s3Url(server, prefix)], { env: s3Env(server) });
        expect(text.code, text.stderr).toBe(0);
        expect(text.stdout).toContain('state: held');
        expect(text.stdout).toMatch(
          /^exclusion: best-effort \(measured now: the service does not honour create-if-absent \(ignored\) or replace-if-version \(ignored\)/m,
        );
        expect(text.stdout).not.toMatch(/exclusion: conditional/);
        const json = await runCli(['lease', s3Url(server, prefix), '--json'], {
          env: s3Env(server),
        });
        expect((JSON.parse(json.stdout) as LeaseJson).exclusion).toBe('best-effort');
      } finally {
        await lease.release();
      }
      // The measurement left nothing but the lease record.
      const keys = (await directStore(server).list(`${prefix}/`)).objects.map((info) => info.key);
      expect(keys).toEqual([`${prefix}/LEASE`]);
    },
  );

  test.skipIf(!versitygw)(
    'versitygw, after a conditional acquire: unknown (the service honours conditions, the record does not say how it was taken)',
    async () => {
      const server = versitygw!;
      const prefix = randomPrefix('lease-excl');
      const lease = await leaseOn(server, prefix, true);
      expect(lease.exclusion).toBe('conditional');
      try {
        const result = await runCli(['lease', s3Url(server, prefix), '--json'], {
          env: s3Env(server),
        });
        expect(result.code, result.stderr).toBe(0);
        const view = JSON.parse(result.stdout) as LeaseJson;
        expect(view.state).toBe('held');
        expect(view.exclusion).toBe('unknown');
        expect(view.exclusionDetail).toContain(
          'the service honours create-if-absent and replace-if-version',
        );
        expect(view.exclusionDetail).toContain('the lease record does not say');
      } finally {
        await lease.release();
      }
      const keys = (await directStore(server).list(`${prefix}/`)).objects.map((info) => info.key);
      expect(keys).toEqual([`${prefix}/LEASE`]);
    },
  );

  test.skipIf(!versitygw)('versitygw, no lease yet: unknown, measured', async () => {
    const server = versitygw!;
    const prefix = randomPrefix('lease-excl');
    const result = await runCli(['lease', s3Url(server, prefix)], { env: s3Env(server) });
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toContain('no lease');
    expect(result.stdout).toMatch(/^exclusion: unknown \(measured now: the service honours/m);
    expect((await directStore(server).list(`${prefix}/`)).objects).toEqual([]);
  });
});
