/**
 * The read-only HTTP listener (off unless `--listen` or `listen:` is given):
 * - `GET /healthz` — 200 when every replica is healthy, 503 otherwise; JSON
 *   with each replica's health and reason;
 * - `GET /metrics` — Prometheus text;
 * - `GET /` — a small server-rendered status page (no scripts, no framework).
 * Everything it serves passes through the redactor. Anything else is 404;
 * methods other than GET and HEAD are 405. It binds where it is told; the
 * default in docs is 127.0.0.1.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { renderMetrics } from './metrics.ts';
import type { Redactor } from './redact.ts';
import type { StatusSource } from './status.ts';
import { renderStatusPage } from './status-page.ts';

export interface StatusServer {
  readonly url: string;
  close(): Promise<void>;
}

export async function startStatusServer(
  listen: string,
  source: StatusSource,
  redactor: Redactor,
): Promise<StatusServer> {
  const at = listen.lastIndexOf(':');
  const host = listen.slice(0, at) || '127.0.0.1';
  const port = Number(listen.slice(at + 1));
  const server: Server = createServer((request, response) => {
    const send = (status: number, type: string, body: string) => {
      const safe = redactor.text(body);
      response.writeHead(status, {
        'content-type': type,
        'cache-control': 'no-store',
        'x-content-type-options': 'nosniff',
        'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'",
      });
      response.end(request.method === 'HEAD' ? undefined : safe);
    };
    if (request.method !== 'GET' && request.method !== 'HEAD') {
      send(405, 'text/plain; charset=utf-8', 'method not allowed\n');
      return;
    }
    const path = new URL(request.url ?? '/', 'http://localhost').pathname;
    const statuses = source.statuses();
    if (path === '/healthz') {
      const healthy = statuses.length > 0 && statuses.every((status) => status.healthy);
      const body = {
        healthy,
        version: source.version,
        replicas: statuses.map((status) => ({
          database: status.database,
          replica: status.replica,
          healthy: status.healthy,
          ...(status.reason ? { reason: status.reason } : {}),
          lagSeconds: status.lagSeconds,
          lastSuccessSeconds: status.lastSuccessSeconds,
          leaseHeld: status.leaseHeld,
          ...(status.leaseHolder ? { leaseHolder: status.leaseHolder } : {}),
          ...(status.latestRestorePoint ? { latestRestorePoint: status.latestRestorePoint } : {}),
        })),
      };
      send(
        healthy ? 200 : 503,
        'application/json; charset=utf-8',
        `${JSON.stringify(body, null, 2)}\n`,
      );
    } else if (path === '/metrics') {
      send(200, 'text/plain; version=0.0.4; charset=utf-8', renderMetrics(statuses));
    } else if (path === '/') {
      send(200, 'text/html; charset=utf-8', renderStatusPage(statuses, source));
    } else {
      send(404, 'text/plain; charset=utf-8', 'not found\n');
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const address = server.address() as AddressInfo;
  const shownHost = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return {
    url: `http://${shownHost}:${address.port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
