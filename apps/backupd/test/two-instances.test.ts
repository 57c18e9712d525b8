/**
 * Two `backupd replicate` processes on one prefix, as a primary and a standby
 * on two hosts: the primary backs up its database; the standby's database is
 * a restore of the primary's latest restore point (a second replicate of the
 * *same* database on one host is refused by the local lock, see
 * one-replicate-per-database.test.ts). The lease lets exactly one of them
 * upload; the other says on /healthz who holds it; when the holder stops
 * (SIGTERM, so it releases the lease), the other takes over within one lease
 * TTL, adopts the prefix (its database was restored from the restore point
 * LATEST still names) and keeps backing up the commits made on it.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { sqliteContentHash } from '@x/source-sqlite';
import { randomPrefix } from '@x/test-servers';
import { describe, expect, test } from 'vitest';
import {
  getText,
  instanceIdOf,
  listeningUrl,
  metricValue,
  runCli,
  s3Env,
  s3Url,
  startBackupd,
  startWriter,
  suiteWorkspace,
  waitFor,
} from './helpers/cli.ts';
import { missingReason, s3Server } from './helpers/servers.ts';

const versitygw = s3Server('versitygw');
if (!versitygw) console.warn(`backupd two instances: skipped, ${missingReason('versitygw')}`);

const TTL_MS = 3000;

interface LeaseView {
  readonly state: string;
  readonly record?: { readonly instanceId: string; readonly pid: number; readonly host: string };
}

describe.skipIf(!versitygw)('two backupd processes on one prefix', () => {
  const { directory, running } = suiteWorkspace('two');

  test('exactly one uploads, the other reports the holder on /healthz, and takes over within one TTL after SIGTERM', async () => {
    const server = versitygw!;
    const url = s3Url(server, randomPrefix('backupd-two'));
    const env = s3Env(server, {
      BACKUPD_INTERVAL: '200ms',
      BACKUPD_RESTORE_POINT_INTERVAL: '300ms',
      BACKUPD_LEASE_TTL: '3s',
    });
    const databasePath = join(directory, 'app.db');
    const standbyPath = join(directory, 'standby.db');
    const recordsPath = join(directory, 'records.jsonl');
    const writer = startWriter(databasePath, recordsPath, 20);
    running.push(writer);
    // The writer records its first commit once the schema is in (WAL mode set).
    await waitFor('the writer to create the database', () => existsSync(recordsPath));

    const leaseView = async (): Promise<LeaseView> => {
      const result = await runCli(['lease', url, '--json'], { env });
      expect(result.code, result.stderr).toBe(0);
      return JSON.parse(result.stdout) as LeaseView;
    };

    const listPoints = async () => {
      const result = await runCli(['ls', url, '--json'], { env });
      expect(result.code, result.stderr).toBe(0);
      return JSON.parse(result.stdout) as {
        commitSeq: number;
        latest: boolean;
        walGeneration?: number;
        status: string;
      }[];
    };
    const first = startBackupd(['replicate', databasePath, url, '--listen', '127.0.0.1:0'], {
      env,
      label: 'first',
    });
    running.push(first);
    const firstUrl = await listeningUrl(first);
    await waitFor(
      'the first to be healthy',
      async () => (await getText(`${firstUrl}/healthz`)).status === 200,
      {
        describe: () => first.describe(),
      },
    );
    const firstId = instanceIdOf(first)!;

    // The primary's application stops; once its last commit is in a restore
    // point, the standby's database is restored from it.
    expect(await writer.stop('SIGTERM')).toEqual({ code: 0, signal: null });
    const records = readFileSync(recordsPath, 'utf8').trim().split('\n');
    const lastHash = (JSON.parse(records.at(-1)!) as { hash: string }).hash;
    const newestCommit = async () => Math.max(...(await listPoints()).map((p) => p.commitSeq));
    // Restored once the newest restore point holds still over a few restore
    // point intervals; the restore must then hold the writer's last commit.
    await waitFor('the primary to make every commit restorable', async () => {
      const before = await newestCommit();
      await new Promise((resolve) => setTimeout(resolve, 1000));
      return (await newestCommit()) === before;
    });
    const restored = await runCli(['restore', url, standbyPath], { env });
    expect(restored.code, restored.stderr).toBe(0);
    const standbyDatabase = new DatabaseSync(standbyPath, { readOnly: true });
    expect(sqliteContentHash(standbyDatabase)).toBe(lastHash);
    standbyDatabase.close();

    const second = startBackupd(['replicate', standbyPath, url, '--listen', '127.0.0.1:0'], {
      env,
      label: 'second',
    });
    running.push(second);
    const secondUrl = await listeningUrl(second);
    const secondId = instanceIdOf(second)!;
    expect(secondId).not.toBe(firstId);

    // The standby answers 503 and names the holder: instance, host and pid.
    const standby = await waitFor(
      'the second to report the lease held elsewhere',
      async () => {
        const response = await getText(`${secondUrl}/healthz`);
        return response.status === 503 && response.body.includes(firstId) ? response : undefined;
      },
      { describe: () => second.describe() },
    );
    const standbyHealth = JSON.parse(standby.body) as {
      healthy: boolean;
      replicas: { healthy: boolean; reason?: string; leaseHeld: boolean }[];
    };
    expect(standbyHealth.healthy).toBe(false);
    expect(standbyHealth.replicas).toHaveLength(1);
    expect(standbyHealth.replicas[0]!.leaseHeld).toBe(false);
    expect(standbyHealth.replicas[0]!.reason).toContain(`${firstId} on `);
    expect(standbyHealth.replicas[0]!.reason).toContain(`pid ${first.child.pid}`);
    // For an orchestrator: the standby is alive but not ready; the holder is both.
    expect((await getText(`${secondUrl}/livez`)).status).toBe(200);
    expect((await getText(`${secondUrl}/readyz`)).status).toBe(503);
    expect((await getText(`${firstUrl}/livez`)).status).toBe(200);
    expect((await getText(`${firstUrl}/readyz`)).status).toBe(200);

    // Let both run side by side for a few backup intervals.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const lease = await leaseView();
    expect(lease.state).toBe('held');
    expect(lease.record).toMatchObject({ instanceId: firstId, pid: first.child.pid });

    // Exactly one uploads: the holder wrote objects, the standby none (a
    // refused create of the lease record would count as a failed put).
    const firstMetrics = (await getText(`${firstUrl}/metrics`)).body;
    const secondMetrics = (await getText(`${secondUrl}/metrics`)).body;
    const successfulWrites = (metrics: string) =>
      (['put', 'upload', 'delete'] as const).reduce(
        (sum, operation) =>
          sum +
          (metricValue(metrics, 'backupd_requests_total', { operation }) ?? Number.NaN) -
          (metricValue(metrics, 'backupd_request_errors_total', { operation }) ?? Number.NaN),
        0,
      );
    expect(successfulWrites(firstMetrics)).toBeGreaterThan(0);
    expect(successfulWrites(secondMetrics)).toBe(0);
    expect(metricValue(firstMetrics, 'backupd_lease_held')).toBe(1);
    expect(metricValue(secondMetrics, 'backupd_lease_held')).toBe(0);
    expect(
      metricValue(secondMetrics, 'backupd_bytes_total', { operation: 'upload', direction: 'out' }),
    ).toBe(0);
    expect(
      metricValue(secondMetrics, 'backupd_bytes_total', { operation: 'put', direction: 'out' }),
    ).toBe(0);

    const firstGenerations = new Set((await listPoints()).map((point) => point.walGeneration));

    // SIGTERM the holder: it flushes, writes its last restore point and
    // releases the lease; the standby sees the release at its next poll.
    expect(await first.stop('SIGTERM'), first.describe()).toEqual({ code: 0, signal: null });
    expect(first.logEvents().map((line) => line.event)).toContain('backup.lease_released');
    const stoppedAt = Date.now();
    await waitFor(
      'the second to take over',
      async () => (await getText(`${secondUrl}/healthz`)).status === 200,
      { timeoutMs: TTL_MS, intervalMs: 50, describe: () => second.describe() },
    );
    expect(Date.now() - stoppedAt).toBeLessThanOrEqual(TTL_MS);
    const afterTakeover = await leaseView();
    expect(afterTakeover.state).toBe('held');
    expect(afterTakeover.record).toMatchObject({ instanceId: secondId, pid: second.child.pid });

    // And it keeps backing up the standby's own commits: still healthy several
    // intervals later, holding the lease, with a restore point of its own (a
    // new generation) at the end.
    const standbyWriter = startWriter(standbyPath, join(directory, 'standby-records.jsonl'), 20);
    running.push(standbyWriter);
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const later = await getText(`${secondUrl}/healthz`);
    expect(later.status, `${later.body}\n${second.describe()}`).toBe(200);
    const secondAfter = (await getText(`${secondUrl}/metrics`)).body;
    expect(metricValue(secondAfter, 'backupd_lease_held')).toBe(1);
    expect(metricValue(secondAfter, 'backupd_errors_total')).toBe(0);
    expect(await standbyWriter.stop('SIGTERM')).toEqual({ code: 0, signal: null });
    expect(await second.stop('SIGTERM'), second.describe()).toEqual({ code: 0, signal: null });
    const points = await listPoints();
    expect(points.filter((point) => point.status !== 'ok')).toEqual([]);
    const latest = points.find((point) => point.latest)!;
    expect(firstGenerations.has(latest.walGeneration)).toBe(false);
  });
});
