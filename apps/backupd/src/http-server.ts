/**
 * The read-only HTTP listener (off unless `--listen` or `listen:`; it binds
 * where it is told): `/healthz`, `/livez`, `/readyz`, `/metrics` and a status
 * page at `/` (server-rendered, no scripts, no framework), as the README's
 * "Observability" describes them. All it serves passes through the redactor;
 * other paths are 404, methods other than GET and HEAD 405. Without the status
 * source's `evaluatedSeconds`, `/livez` cannot see a stuck supervisor
 * ({@link stuckAfterSeconds}) and goes by `stopped` or the stop reason alone.
 */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { renderMetrics } from './metrics.ts';
import type { Redactor } from './redact.ts';
import type { ReplicaStatus, StatusSource } from './status.ts';
import { renderStatusPage } from './status-page.ts';

export interface StatusServer {
  readonly url: string;
  close(): Promise<void>;
}

export interface StatusServerOptions {
  /** Wall clock, Unix milliseconds (default `Date.now`): what `/livez` measures the supervisor's last run against. */
  readonly wallNow?: () => number;
}

/** The least time without a health evaluation after which `/livez` calls the supervisor stuck. */
export const MIN_STUCK_AFTER_SECONDS = 60;

/**
 * How long a replica's supervisor may go without evaluating health before
 * `/livez` calls it stuck: ten of its intervals, at least a minute. It runs
 * every interval whatever the worker does, so missing that many means it is
 * blocked (an evaluation that never returns), not slow; the minute keeps a
 * loaded machine's pauses from restarting a working process.
 */
export function stuckAfterSeconds(status: ReplicaStatus): number {
  return Math.max(MIN_STUCK_AFTER_SECONDS, 10 * (status.evaluationIntervalSeconds ?? 1));
}

/**
 * The reasons a worker gives once it has ended (BackupWorker.start: a
 * graceful stop, a panic, any other end). Used only while the status source
 * does not set `stopped`.
 */
function isStopReason(reason: string | undefined): boolean {
  return (
    reason === 'stopped' ||
    reason?.startsWith('backup worker panicked: ') === true ||
    reason?.startsWith('backup worker ended: ') === true
  );
}

/** Why a replica is not alive, or `null` while it is. */
export function livenessProblem(status: ReplicaStatus, nowSeconds: number): string | null {
  const stopped = status.stopped ?? isStopReason(status.reason);
  if (stopped) return `the backup worker has stopped: ${status.reason ?? 'stopped'}`;
  if (status.evaluatedSeconds !== undefined) {
    const silentSeconds = nowSeconds - status.evaluatedSeconds;
    const limit = stuckAfterSeconds(status);
    if (silentSeconds > limit)
      return `the health supervisor has not run for ${Math.floor(silentSeconds)}s (it runs every ${status.evaluationIntervalSeconds ?? 1}s; stuck after ${limit}s)`;
  }
  return null;
}

/** Why a replica is not ready (not shipping from this instance), or `null` while it is. */
export function readinessProblem(status: ReplicaStatus): string | null {
  if (!status.healthy) return status.reason ?? 'unhealthy';
  if (!status.leaseHeld) return 'this instance does not hold the lease';
  return null;
}

/** How many databases `/databases` lists when `limit` is not given. */
export const DATABASES_LIMIT = 100;

export async function startStatusServer(
  listen: string,
  source: StatusSource,
  redactor: Redactor,
  options: StatusServerOptions = {},
): Promise<StatusServer> {
  const wallNow = options.wallNow ?? Date.now;
  const at = listen.lastIndexOf(':');
  const host = listen.slice(0, at) || '127.0.0.1';
  const port = Number(listen.slice(at + 1));
  // Loaded here, not at the top: importing node:http loads Node's fetch
  // (undici) too, about 20 ms of every command's start that has no listener.
  const { createServer } = await import('node:http');
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
    const url = new URL(request.url ?? '/', 'http://localhost');
    const path = url.pathname;
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
    } else if (path === '/livez') {
      const nowSeconds = wallNow() / 1000;
      const replicas = statuses.map((status) => {
        const problem = livenessProblem(status, nowSeconds);
        return {
          database: status.database,
          replica: status.replica,
          live: problem === null,
          ...(problem !== null ? { reason: problem } : {}),
        };
      });
      // No replicas is not a dead process: that is /readyz's to report.
      const live = replicas.every((replica) => replica.live);
      send(
        live ? 200 : 503,
        'application/json; charset=utf-8',
        `${JSON.stringify({ live, version: source.version, replicas }, null, 2)}\n`,
      );
    } else if (path === '/readyz') {
      const replicas = statuses.map((status) => {
        const problem = readinessProblem(status);
        return {
          database: status.database,
          replica: status.replica,
          ready: problem === null,
          leaseHeld: status.leaseHeld,
          ...(problem !== null ? { reason: problem } : {}),
        };
      });
      const ready = replicas.length > 0 && replicas.every((replica) => replica.ready);
      send(
        ready ? 200 : 503,
        'application/json; charset=utf-8',
        `${JSON.stringify({ ready, version: source.version, replicas }, null, 2)}\n`,
      );
    } else if (path === '/metrics') {
      // A directory's databases are summed in its row; one row each only on request.
      const perDatabase =
        url.searchParams.has('per-database') && source.perDatabase ? source.perDatabase() : [];
      send(
        200,
        'text/plain; version=0.0.4; charset=utf-8',
        renderMetrics([...statuses, ...perDatabase]),
      );
    } else if (path === '/databases' && source.databases) {
      const limit = Number(url.searchParams.get('limit') ?? DATABASES_LIMIT);
      const databases = source.databases({
        search: url.searchParams.get('q') ?? '',
        limit: Number.isSafeInteger(limit) && limit > 0 ? limit : DATABASES_LIMIT,
      });
      send(200, 'application/json; charset=utf-8', `${JSON.stringify({ databases }, null, 2)}\n`);
    } else if (path === '/') {
      send(
        200,
        'text/html; charset=utf-8',
        renderStatusPage(statuses, source, Date.now(), url.searchParams.get('q') ?? ''),
      );
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
