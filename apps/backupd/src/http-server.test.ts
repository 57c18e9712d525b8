import { MemoryStore } from '@x/store';
import { afterEach, describe, expect, it } from 'vitest';
import { type StatusServer, startStatusServer } from './http-server.ts';
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

async function serve(statuses: ReplicaStatus[]): Promise<string> {
  const source: StatusSource = {
    statuses: () => statuses,
    version: '0.1.0',
    startedAt: Date.now(),
  };
  server = await startStatusServer('127.0.0.1:0', source, new Redactor([CANARY]));
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
