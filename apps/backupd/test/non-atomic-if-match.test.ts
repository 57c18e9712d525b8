/**
 * A service that checks `If-Match` and then writes (it refuses a stale
 * version one request at a time but lets a burst against one version
 * through) gives no exclusion. `check`, `replicate` and the lease agree on
 * it: `check` says UNSAFE, `replicate` refuses with exit code 5 and writes
 * no backup. The fault proxy's `nonAtomicIfMatch` mode makes versitygw
 * behave so; without the mode the same commands succeed, so neither result
 * can pass vacuously.
 */
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { latestKey } from '@x/manifest';
import { startFaultProxy } from '@x/test-faults';
import { randomPrefix } from '@x/test-servers';
import { describe, expect, it } from 'vitest';
import { runCli, s3Env, s3Url, startBackupd, suiteWorkspace } from './helpers/cli.ts';
import { directStore, missingReason, s3Server } from './helpers/servers.ts';

const versitygw = s3Server('versitygw');
if (!versitygw) console.warn(`non-atomic If-Match: skipped, ${missingReason('versitygw')}`);

describe('a service whose If-Match is not atomic', () => {
  const { directory, running } = suiteWorkspace('non-atomic');

  it.skipIf(!versitygw)(
    'check says UNSAFE, naming the race; replicate refuses with exit 5 and writes no LATEST',
    async () => {
      const server = versitygw!;
      const proxy = await startFaultProxy({
        target: server.endpoint,
        seed: 40,
        schedule: { rules: [] },
        nonAtomicIfMatch: { windowMs: 1_000 },
      });
      try {
        const through = (prefix: string) => s3Url({ ...server, endpoint: proxy.url }, prefix);
        const checked = await runCli(['check', through(randomPrefix('non-atomic-check'))], {
          env: s3Env(server),
          timeoutMs: 120_000,
        });
        expect(checked.code, checked.stdout).toBe(1);
        const summary = checked.stdout.trim().split('\n').at(-1)!;
        expect(summary).toContain('UNSAFE');
        expect(summary).toContain('BACKUPD_CONDITIONAL=off');
        expect(checked.stdout).toMatch(/not atomically: in round \d of 4, [2-8] of 8 concurrent/);

        const database = join(directory, 'app.db');
        const db = new DatabaseSync(database);
        db.exec('PRAGMA journal_mode=WAL; CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1);');
        db.close();
        const prefix = randomPrefix('non-atomic-replicate');
        const backupd = startBackupd(
          ['replicate', database, through(prefix), '--log-format', 'json'],
          { env: s3Env(server) },
        );
        running.push(backupd);
        const exited = await backupd.exited;
        expect(exited.code, backupd.describe()).toBe(5);
        const refused = backupd
          .logEvents()
          .find((entry) => entry.event === 'backupd.replica_refused');
        expect(refused, backupd.describe()).toMatchObject({ kind: 'preconditions-ignored' });
        expect(String(refused?.reason)).toMatch(
          /replace-if-version \(If-Match\) is not atomic: [2-4] of 4 concurrent writes/,
        );
        expect(String(refused?.fix)).toContain('BACKUPD_CONDITIONAL=off');
        expect(await directStore(server).head(latestKey(prefix))).toBeNull();
      } finally {
        await proxy.close();
      }
    },
    180_000,
  );

  it.skipIf(!versitygw)(
    'through the same proxy without the mode, check says SAFE',
    async () => {
      const server = versitygw!;
      const proxy = await startFaultProxy({
        target: server.endpoint,
        seed: 40,
        schedule: { rules: [] },
      });
      try {
        const url = s3Url({ ...server, endpoint: proxy.url }, randomPrefix('atomic-check'));
        const checked = await runCli(['check', url], { env: s3Env(server), timeoutMs: 120_000 });
        expect(checked.code, checked.stdout).toBe(0);
        expect(checked.stdout.trim().split('\n').at(-1)).toContain(': SAFE');
      } finally {
        await proxy.close();
      }
    },
    180_000,
  );
});
