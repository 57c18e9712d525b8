import { MemoryStore } from '@x/store';
import { afterEach, describe, expect, it } from 'vitest';
import { type StatusServer, type StatusServerOptions, startStatusServer } from './http-server.ts';
import { InstrumentedStore } from './instrumented-store.ts';
import { Redactor } from './redact.ts';
import type { ReplicaStatus, StatusSource } from './status.ts';

const CANARY = 'canary-Secret-0042';

function status(overrides: Partial<ReplicaStatus>): ReplicaStatus {
  return {
    database: '/data/app.db',
    replica: 's3://bucket/app',
    healthy: true,
    lagSeconds: 0,
    unshippedBytes: 0,
    unrestorableCommits: 0,
    lastSuccessSeconds: Math.floor(Date.now() / 1000),
    errors: 0,
    leaseHeld: true,
    restorePoints: 3,
    latestRestorePoint: { commitSeq: 42, key: 'app/manifest/00000000000000000042.json' },
    requests: new InstrumentedStore(new MemoryStore()).counters,
    ...overrides,
  };
}

let server: StatusServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

async function serve(
  statuses: ReplicaStatus[],
  options: StatusServerOptions = {},
): Promise<string> {
  const source: StatusSource = {
    statuses: () => statuses,
    version: '0.1.0',
    startedAt: Date.now(),
  };
  server = await startStatusServer('127.0.0.1:0', source, new Redactor([CANARY]), options);
  return server.url;
}

describe('status server', () => {
  it('answers 200 on /healthz when every replica is healthy', async () => {
    const url = await serve([status({})]);
    const response = await fetch(`${url}/healthz`);
    expect(response.status).toBe(200);
    const body = (await response.json()) as { healthy: boolean; replicas: { replica: string }[] };
    expect(body.healthy).toBe(true);
    expect(body.replicas[0]!.replica).toBe('s3://bucket/app');
  });

  it('answers 503 naming the reason when a replica is unhealthy', async () => {
    const url = await serve([
      status({}),
      status({
        replica: 's3://b/two',
        healthy: false,
        leaseHeld: false,
        reason: 'lease held by host-b (pid 7)',
      }),
    ]);
    const response = await fetch(`${url}/healthz`);
    expect(response.status).toBe(503);
    const text = await response.text();
    expect(text).toContain('lease held by host-b (pid 7)');
  });

  it('serves Prometheus metrics with one sample per replica and operation', async () => {
    const url = await serve([status({ lagSeconds: 7 })]);
    const text = await (await fetch(`${url}/metrics`)).text();
    expect(text).toContain(
      'backupd_lag_seconds{database="/data/app.db",replica="s3://bucket/app"} 7',
    );
    expect(text).toContain(
      'backupd_requests_total{database="/data/app.db",replica="s3://bucket/app",operation="put"} 0',
    );
    expect(text).toContain('# TYPE backupd_errors_total counter');
  });

  it('renders the status page with the database, its lag and escaped text', async () => {
    const url = await serve([status({ database: '/data/<b>x</b>.db', lagSeconds: 3 })]);
    const html = await (await fetch(`${url}/`)).text();
    expect(html).toContain('&lt;b&gt;x&lt;/b&gt;.db');
    expect(html).toContain('<td class="lag">3s</td>');
  });

  it('redacts credentials from everything it serves', async () => {
    const url = await serve([
      status({ healthy: false, reason: `upload failed: AccessDenied for ${CANARY}` }),
    ]);
    for (const path of ['/healthz', '/metrics', '/']) {
      expect(await (await fetch(`${url}${path}`)).text()).not.toContain(CANARY);
    }
  });

  it('refuses writes and unknown paths', async () => {
    const url = await serve([status({})]);
    expect((await fetch(`${url}/healthz`, { method: 'POST' })).status).toBe(405);
    expect((await fetch(`${url}/nope`)).status).toBe(404);
  });
});

async function probe(
  url: string,
  path: '/livez' | '/readyz' | '/healthz',
): Promise<{
  status: number;
  body: { replicas: { reason?: string }[] } & Record<string, unknown>;
}> {
  const response = await fetch(`${url}${path}`);
  return { status: response.status, body: (await response.json()) as never };
}

describe('probes for orchestrators', () => {
  // A standby: running, kept out by another instance's lease.
  const standby = {
    healthy: false,
    leaseHeld: false,
    reason: 'lease held by host-b (pid 7) until 2026-11-29T08:00:30Z',
  };

  it('a standby kept out by the lease is alive but not ready (and /healthz stays 503)', async () => {
    const url = await serve([status(standby)]);
    const live = await probe(url, '/livez');
    expect(live.status).toBe(200);
    expect(live.body.live).toBe(true);
    const ready = await probe(url, '/readyz');
    expect(ready.status).toBe(503);
    expect(ready.body.ready).toBe(false);
    expect(ready.body.replicas[0]!.reason).toBe(standby.reason);
    expect((await probe(url, '/healthz')).status).toBe(503);
  });

  it('the lease holder that ships healthily is alive and ready', async () => {
    const url = await serve([status({}), status({ replica: 's3://b/two' })]);
    expect((await probe(url, '/livez')).status).toBe(200);
    const ready = await probe(url, '/readyz');
    expect(ready.status).toBe(200);
    expect(ready.body.ready).toBe(true);
  });

  it('is not ready while any one replica is a standby, or unhealthy while holding the lease', async () => {
    const url = await serve([
      status({}),
      status({ replica: 's3://b/two', ...standby }),
      status({
        replica: 's3://b/three',
        healthy: false,
        reason: '3 consecutive failed backup steps',
      }),
    ]);
    const ready = await probe(url, '/readyz');
    expect(ready.status).toBe(503);
    expect(ready.body.replicas.map((replica) => replica.reason)).toEqual([
      undefined,
      standby.reason,
      '3 consecutive failed backup steps',
    ]);
    expect((await probe(url, '/livez')).status, 'failing steps are not a dead process').toBe(200);
  });

  it('a healthy replica that does not hold the lease is not ready', async () => {
    const url = await serve([status({ leaseHeld: false })]);
    const ready = await probe(url, '/readyz');
    expect(ready.status).toBe(503);
    expect(ready.body.replicas[0]!.reason).toBe('this instance does not hold the lease');
  });

  it('answers 503 on /livez when a worker has stopped for good, naming why', async () => {
    const url = await serve([
      status(standby),
      status({
        replica: 's3://b/two',
        healthy: false,
        leaseHeld: false,
        stopped: true,
        reason: 'backup worker panicked: boom',
      }),
    ]);
    const live = await probe(url, '/livez');
    expect(live.status).toBe(503);
    expect(live.body.live).toBe(false);
    expect(live.body.replicas[0]!.reason).toBeUndefined();
    expect(live.body.replicas[1]!.reason).toBe(
      'the backup worker has stopped: backup worker panicked: boom',
    );
    expect((await probe(url, '/readyz')).status).toBe(503);
  });

  it('tells a stopped worker by its stop reason when the source does not set "stopped"', async () => {
    for (const reason of ['stopped', 'backup worker panicked: x', 'backup worker ended: y']) {
      const url = await serve([status({ healthy: false, leaseHeld: false, reason })]);
      expect((await probe(url, '/livez')).status, reason).toBe(503);
      await server?.close();
    }
    const url = await serve([status({ healthy: false, reason: 'stopped uploading: quota' })]);
    expect((await probe(url, '/livez')).status).toBe(200);
  });

  it('answers 503 on /livez when the supervisor has not evaluated for ten intervals and a minute', async () => {
    const now = 1_800_000_000_000;
    const at = (secondsAgo: number, interval?: number) =>
      status({
        ...standby,
        evaluatedSeconds: now / 1000 - secondsAgo,
        ...(interval !== undefined ? { evaluationIntervalSeconds: interval } : {}),
      });
    const wallNow = () => now;
    let url = await serve([at(59)], { wallNow });
    expect((await probe(url, '/livez')).status, '59 s, 1 s interval: alive').toBe(200);
    await server?.close();
    url = await serve([at(61)], { wallNow });
    const stuck = await probe(url, '/livez');
    expect(stuck.status, '61 s, 1 s interval: stuck').toBe(503);
    expect(stuck.body.replicas[0]!.reason).toBe(
      'the health supervisor has not run for 61s (it runs every 1s; stuck after 60s)',
    );
    await server?.close();
    url = await serve([at(99, 10)], { wallNow });
    expect((await probe(url, '/livez')).status, '99 s, 10 s interval: alive').toBe(200);
    await server?.close();
    url = await serve([at(101, 10)], { wallNow });
    expect((await probe(url, '/livez')).status, '101 s, 10 s interval: stuck').toBe(503);
  });

  it('is not ready with no replicas, and answers HEAD with the status alone', async () => {
    const url = await serve([]);
    expect((await probe(url, '/readyz')).status).toBe(503);
    const head = await fetch(`${url}/livez`, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(await head.text()).toBe('');
  });
});
