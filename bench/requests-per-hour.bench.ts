/**
 * What a backup costs in requests, as the bucket sees them: `backupd
 * replicate` at the defaults on a SQLite database, talking to the local S3
 * server (versitygw) through a counting proxy that records every request.
 *
 * One run: a writer process at 10 single-row commits a second; after the
 * first restore point and a 10 s warm-up, requests are counted for
 * `REQUESTS_PER_HOUR_SECONDS` (default 600) and scaled to an hour, by kind:
 * PUT (single uploads), GET, HEAD, LIST, DELETE (single deletes), batch
 * DELETE (`DeleteObjects`, each up to 1,000 keys) and multipart (the requests
 * of a multipart upload). Bytes sent come from backupd's `/metrics`
 * (`backupd_bytes_total`, direction `out`). Then the writer stops and the
 * same is counted idle, for `REQUESTS_PER_HOUR_IDLE_SECONDS` (default 120)
 * after a 10 s warm-up.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { type InterceptingProxy, startInterceptingProxy } from '@x/test-faults';
import type { StartedTestServers } from '@x/test-servers/harness';
import { defineBenchmark, type Measurement } from './harness.ts';
import {
  killProcess,
  Replicate,
  S3_REQUEST_KINDS,
  type S3RequestKind,
  type Server,
  s3RequestKind,
  s3Url,
  startVersitygw,
  startWriter,
} from './s3-processes.ts';

const LOAD_SECONDS = Number(process.env.REQUESTS_PER_HOUR_SECONDS ?? '600');
const IDLE_SECONDS = Number(process.env.REQUESTS_PER_HOUR_IDLE_SECONDS ?? '120');
const WARM_UP_MS = 10_000;

type Kind = S3RequestKind;
const kindOf = s3RequestKind;

interface State {
  readonly started: StartedTestServers;
  readonly server: Server;
}

/** Requests by kind, as counted by the proxy since it started. */
class RequestCounter {
  readonly counts = new Map<Kind | 'other', number>();

  record(method: string, query: string): void {
    const kind = kindOf(method, query);
    this.counts.set(kind, (this.counts.get(kind) ?? 0) + 1);
  }

  snapshot(): Map<Kind | 'other', number> {
    return new Map(this.counts);
  }
}

interface Phase {
  readonly byKind: Map<Kind | 'other', number>;
  readonly total: number;
  readonly bytesOut: number;
}

/** Requests by kind and bytes sent per hour over `seconds`, after the warm-up. */
async function phase(counter: RequestCounter, replicate: Replicate, seconds: number) {
  await sleep(WARM_UP_MS);
  const before = counter.snapshot();
  const trafficBefore = await replicate.traffic();
  const started = performance.now();
  await sleep(seconds * 1000);
  const after = counter.snapshot();
  const trafficAfter = await replicate.traffic();
  const hours = (performance.now() - started) / 1000 / 3600;
  const byKind = new Map<Kind | 'other', number>();
  for (const [kind, count] of after) byKind.set(kind, (count - (before.get(kind) ?? 0)) / hours);
  const total = [...byKind.values()].reduce((sum, value) => sum + value, 0);
  return { byKind, total, bytesOut: (trafficAfter.bytesOut - trafficBefore.bytesOut) / hours };
}

function perHour(value: number): Measurement {
  return { value: Math.round(value), unit: 'requests/h', higherIsBetter: false };
}

function measurements(label: string, measured: Phase): Record<string, Measurement> {
  const result: Record<string, Measurement> = {
    [`${label}: requests`]: perHour(measured.total),
    [`${label}: MB sent`]: {
      value: measured.bytesOut / 1e6,
      unit: 'MB/h',
      higherIsBetter: false,
    },
  };
  for (const kind of [...S3_REQUEST_KINDS, 'other' as const])
    result[`${label}: ${kind}`] = perHour(measured.byKind.get(kind) ?? 0);
  return result;
}

export const benchmark = defineBenchmark<State>({
  name: 'requests-per-hour',
  description: `requests per hour by kind, through a counting proxy in front of the local S3 server, of backupd replicate at the defaults: ${LOAD_SECONDS} s at 10 single-row commits/s, then ${IDLE_SECONDS} s idle; MB sent per hour from /metrics`,
  runs: 1,
  async setup(context) {
    const { started, server } = await startVersitygw((line) => context.log(line));
    return { started, server };
  },
  async run(state, context) {
    const counter = new RequestCounter();
    const proxy: InterceptingProxy = await startInterceptingProxy({
      target: state.server.endpoint,
      intercept(request) {
        counter.record(request.method, request.query);
        return undefined;
      },
    });
    const directory = join(context.tempDir, `run-${Date.now()}`);
    mkdirSync(directory, { recursive: true });
    const database = join(directory, 'app.db');
    const viaProxy = { ...state.server, endpoint: proxy.url };
    const target = s3Url(viaProxy, `requests-per-hour-${randomBytes(6).toString('hex')}`);
    const writer = startWriter(database, 10);
    const replicate = new Replicate(database, target, viaProxy);
    let loaded: Phase;
    let idle: Phase;
    try {
      await replicate.secondsTo('backup.restore_point_written');
      context.log(`counting ${LOAD_SECONDS} s at 10 commits/s`);
      loaded = await phase(counter, replicate, LOAD_SECONDS);
      await killProcess(writer);
      context.log(`counting ${IDLE_SECONDS} s idle`);
      idle = await phase(counter, replicate, IDLE_SECONDS);
    } finally {
      await Promise.all([killProcess(writer), replicate.stop()]);
      await proxy.close();
    }
    context.log(
      `per hour: ${loaded.total.toFixed(0)} requests at 10 commits/s, ${idle.total.toFixed(0)} idle`,
    );
    return { ...measurements('10 commits/s', loaded), ...measurements('idle', idle) };
  },
  async teardown(state) {
    await state.started.stop();
  },
});
