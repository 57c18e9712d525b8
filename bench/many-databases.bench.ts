/**
 * Many databases in one process, as the operator runs it: `backupd
 * replicate --dir` at its defaults on a directory of small SQLite databases,
 * talking to the local S3 server (versitygw) through a counting proxy.
 *
 * Per count in `MANY_DATABASES_COUNTS` (default `1000,10000`), in a fresh
 * directory and prefix: that many databases of about `MANY_DATABASES_KIB`
 * (100) KiB each, WAL mode, their files dated an hour back (so each may
 * sleep as soon as it is backed up). Then:
 * - **start-up**: seconds from the spawn until every database was backed up
 *   once and sleeps (`backupd_directory_databases{state="asleep"}` equal to
 *   the count, and as many wakes);
 * - **idle**: for `MANY_DATABASES_IDLE_SECONDS` (60): requests per hour (the
 *   proxy's count, scaled), CPU seconds per minute (utime + stime from
 *   /proc), RSS and open descriptors at the end;
 * - **busy**: a writer process commits one row a second to
 *   `MANY_DATABASES_BUSY_PERCENT` (1) % of them; after a 40 s warm-up,
 *   for `MANY_DATABASES_BUSY_SECONDS` (60): the same figures, and the
 *   directory's lag (the largest over its databases, `backupd_lag_seconds`)
 *   sampled every second: p99 and max;
 * - **alone**: for the requests the busy databases alone would cost, one
 *   `backupd replicate` of one database at one commit a second, over the
 *   same window, times the number of busy databases (measured once per
 *   run, before the directory).
 * Then SIGTERM: the exit code and seconds to stop.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { copyFileSync, mkdirSync, readdirSync, readFileSync, utimesSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { setTimeout as sleep } from 'node:timers/promises';
import { type InterceptingProxy, startInterceptingProxy } from '@x/test-faults';
import type { StartedTestServers } from '@x/test-servers/harness';
import { cpuSecondsOf, lowerIsBetter } from './backupd-processes.ts';
import { defineBenchmark, type Measurement } from './harness.ts';
import {
  BACKUPD,
  env,
  killProcess,
  Replicate,
  type Server,
  s3Url,
  startVersitygw,
} from './s3-processes.ts';

const COUNTS = (process.env.MANY_DATABASES_COUNTS ?? '1000,10000').split(',').map(Number);
const DATABASE_KIB = Number(process.env.MANY_DATABASES_KIB ?? '100');
const BUSY_PERCENT = Number(process.env.MANY_DATABASES_BUSY_PERCENT ?? '1');
const IDLE_SECONDS = Number(process.env.MANY_DATABASES_IDLE_SECONDS ?? '60');
const BUSY_SECONDS = Number(process.env.MANY_DATABASES_BUSY_SECONDS ?? '60');
const BUSY_WARM_UP_MS = 40_000;
const START_TIMEOUT_MS = 30 * 60_000;

/** One row a second into each database named on the command line, until killed. */
const WRITER_PROGRAM = `
const { DatabaseSync } = require('node:sqlite');
const databases = process.argv.slice(1).map((path) => {
  const database = new DatabaseSync(path, { timeout: 5000 });
  return database.prepare('INSERT INTO t (body) VALUES (?)');
});
setInterval(() => {
  for (const insert of databases) insert.run(new Date().toISOString());
}, 1000);
`;

interface State {
  readonly started: StartedTestServers;
  readonly server: Server;
  run: number;
}

function createTemplate(path: string): void {
  const database = new DatabaseSync(path);
  database.exec('PRAGMA journal_mode = WAL');
  database.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT NOT NULL)');
  const insert = database.prepare('INSERT INTO t (body) VALUES (?)');
  const rows = Math.ceil((DATABASE_KIB * 1024) / 600);
  database.exec('BEGIN');
  for (let i = 0; i < rows; i += 1) insert.run(randomBytes(250).toString('hex'));
  database.exec('COMMIT');
  database.exec('PRAGMA wal_checkpoint(TRUNCATE)');
  database.close();
}

function fillDirectory(directory: string, template: string, count: number): string[] {
  mkdirSync(directory, { recursive: true });
  const hourAgo = new Date(Date.now() - 3_600_000);
  const paths: string[] = [];
  for (let i = 0; i < count; i += 1) {
    const path = join(directory, `tenant-${String(i).padStart(5, '0')}.db`);
    copyFileSync(template, path);
    utimesSync(path, hourAgo, hourAgo);
    paths.push(path);
  }
  return paths;
}

function rssMiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? Number.NaN);
  return kib / 1024;
}

function descriptors(pid: number): number {
  return readdirSync(`/proc/${pid}/fd`).length;
}

function metric(text: string, name: string, labels = ''): number | undefined {
  for (const line of text.split('\n'))
    if (line.startsWith(`${name}{`) && line.includes(labels))
      return Number(line.slice(line.lastIndexOf(' ') + 1));
  return undefined;
}

function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

/** `backupd replicate --dir` as a child, its log lines parsed, its /metrics read. */
class DirectoryReplicate {
  readonly child: ChildProcess;
  #metrics: string | undefined;
  #buffer = '';
  #tail = '';

  constructor(directory: string, url: string, server: Server) {
    this.child = spawn(
      process.execPath,
      [
        BACKUPD,
        'replicate',
        '--dir',
        directory,
        url,
        '--listen',
        '127.0.0.1:0',
        '--log-format',
        'json',
      ],
      { env: env(server), stdio: ['ignore', 'ignore', 'pipe'] },
    );
    this.child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
      this.#tail = (this.#tail + chunk).slice(-4000);
      this.#buffer += chunk;
      const lines = this.#buffer.split('\n');
      this.#buffer = lines.pop()!;
      for (const text of lines) {
        if (!text.includes('"backupd.listening"')) continue;
        const url = (JSON.parse(text) as { url?: string }).url;
        if (url !== undefined) this.#metrics = `${url}/metrics`;
      }
    });
  }

  get tail(): string {
    return this.#tail;
  }

  async metrics(): Promise<string> {
    if (this.#metrics === undefined) throw new Error('not listening yet');
    return (await fetch(this.#metrics, { signal: AbortSignal.timeout(10_000) })).text();
  }

  /** Seconds from now until every one of `count` databases was woken once and sleeps. */
  async untilAllAsleep(count: number, started: number): Promise<number> {
    const deadline = performance.now() + START_TIMEOUT_MS;
    for (;;) {
      if (this.child.exitCode !== null) throw new Error(`backupd exited:\n${this.#tail}`);
      if (performance.now() > deadline) throw new Error(`start-up took too long:\n${this.#tail}`);
      if (this.#metrics !== undefined) {
        const text = await this.metrics().catch(() => '');
        const asleep = metric(text, 'backupd_directory_databases', 'state="asleep"');
        const wakes = metric(text, 'backupd_directory_wakes_total');
        if (asleep === count && wakes !== undefined && wakes >= count)
          return (performance.now() - started) / 1000;
      }
      await sleep(500);
    }
  }

  async stop(): Promise<{ code: number | null; seconds: number }> {
    const started = performance.now();
    const exited = new Promise<number | null>((resolve) =>
      this.child.once('exit', (code) => resolve(code)),
    );
    this.child.kill('SIGTERM');
    const code = await exited;
    return { code, seconds: (performance.now() - started) / 1000 };
  }
}

/** Counts every request the proxy forwards. */
async function countingProxy(
  server: Server,
): Promise<{ proxy: InterceptingProxy; count: () => number }> {
  let requests = 0;
  const proxy = await startInterceptingProxy({
    target: server.endpoint,
    intercept() {
      requests += 1;
      return undefined;
    },
  });
  return { proxy, count: () => requests };
}

/** Requests per hour, CPU seconds per minute over a window of `seconds`. */
async function window(
  pid: number,
  count: () => number,
  seconds: number,
  during?: () => Promise<void>,
) {
  const requestsBefore = count();
  const cpuBefore = cpuSecondsOf(pid) ?? Number.NaN;
  const ends = performance.now() + seconds * 1000;
  while (performance.now() < ends) {
    await during?.();
    await sleep(1000);
  }
  return {
    requestsPerHour: ((count() - requestsBefore) * 3600) / seconds,
    cpuSecondsPerMinute: (((cpuSecondsOf(pid) ?? Number.NaN) - cpuBefore) * 60) / seconds,
    rssMiB: rssMiB(pid),
    descriptors: descriptors(pid),
  };
}

/** One `backupd replicate` of one database at one commit a second: its requests per hour. */
async function aloneRequestsPerHour(
  state: State,
  directory: string,
  template: string,
): Promise<number> {
  const [database] = fillDirectory(join(directory, 'alone'), template, 1);
  const { proxy, count } = await countingProxy(state.server);
  const replicate = new Replicate(
    database!,
    s3Url({ ...state.server, endpoint: proxy.url }, `many-alone-${randomBytes(4).toString('hex')}`),
    { ...state.server, endpoint: proxy.url },
  );
  const writer = spawn(process.execPath, ['-e', WRITER_PROGRAM, database!], { stdio: 'ignore' });
  try {
    await replicate.secondsTo('backup.restore_point_written');
    await sleep(BUSY_WARM_UP_MS / 4);
    const measured = await window(replicate.child.pid!, count, BUSY_SECONDS);
    return measured.requestsPerHour;
  } finally {
    await killProcess(writer);
    await replicate.stop();
    await proxy.close();
  }
}

export const benchmark = defineBenchmark<State>({
  name: 'many-databases',
  description: `backupd replicate --dir at its defaults on ${COUNTS.join(' and ')} databases of ${DATABASE_KIB} KiB, on the local S3 server through a counting proxy: start-up until every database is backed up, then ${IDLE_SECONDS} s idle and ${BUSY_SECONDS} s with ${BUSY_PERCENT} % committing once a second (requests per hour, CPU, RSS, descriptors, lag), against the busy databases replicated alone`,
  runs: 3,
  async setup(context) {
    const { started, server } = await startVersitygw((line) => context.log(line));
    return { started, server, run: 0 };
  },
  async run(state, context) {
    state.run += 1;
    const root = join(context.tempDir, `run-${state.run}`);
    mkdirSync(root, { recursive: true });
    const template = join(root, 'template.db');
    createTemplate(template);
    const measurements: Record<string, Measurement> = {};
    const alonePerHour = await aloneRequestsPerHour(state, root, template);
    measurements['alone requests/h (one database, 1 commit/s)'] = lowerIsBetter(
      alonePerHour,
      'req/h',
    );
    for (const count of COUNTS) {
      context.log(`${count} databases: creating`);
      const directory = join(root, `dir-${count}`);
      const paths = fillDirectory(directory, template, count);
      const { proxy, count: requests } = await countingProxy(state.server);
      const url = s3Url(
        { ...state.server, endpoint: proxy.url },
        `many-${count}-${randomBytes(4).toString('hex')}`,
      );
      const spawnedAt = performance.now();
      const replicate = new DirectoryReplicate(directory, url, {
        ...state.server,
        endpoint: proxy.url,
      });
      let writer: ChildProcess | undefined;
      try {
        const startup = await replicate.untilAllAsleep(count, spawnedAt);
        context.log(`${count} databases: all backed up and asleep after ${startup.toFixed(1)} s`);
        const pid = replicate.child.pid!;
        const idle = await window(pid, requests, IDLE_SECONDS);
        const busyCount = Math.max(1, Math.round((count * BUSY_PERCENT) / 100));
        const busy = paths.slice(0, busyCount);
        writer = spawn(process.execPath, ['-e', WRITER_PROGRAM, ...busy], { stdio: 'ignore' });
        await sleep(BUSY_WARM_UP_MS);
        const lags: number[] = [];
        const loaded = await window(pid, requests, BUSY_SECONDS, async () => {
          const lag = metric(await replicate.metrics(), 'backupd_lag_seconds');
          if (lag !== undefined) lags.push(lag);
        });
        await killProcess(writer);
        writer = undefined;
        const stopped = await replicate.stop();
        const aloneTotal = alonePerHour * busyCount;
        const label = (what: string) => `${count} dbs: ${what}`;
        measurements[label('start-up until all backed up (s)')] = lowerIsBetter(startup, 's');
        measurements[label('idle requests/h')] = lowerIsBetter(idle.requestsPerHour, 'req/h');
        measurements[label('idle CPU s/min')] = lowerIsBetter(idle.cpuSecondsPerMinute, 's/min');
        measurements[label('idle RSS')] = lowerIsBetter(idle.rssMiB, 'MiB');
        measurements[label('idle descriptors')] = lowerIsBetter(idle.descriptors, 'fds');
        measurements[label(`busy (${busyCount}) requests/h`)] = lowerIsBetter(
          loaded.requestsPerHour,
          'req/h',
        );
        measurements[label('busy requests / busy alone')] = lowerIsBetter(
          loaded.requestsPerHour / aloneTotal,
          'x',
        );
        measurements[label('busy CPU s/min')] = lowerIsBetter(loaded.cpuSecondsPerMinute, 's/min');
        measurements[label('busy RSS')] = lowerIsBetter(loaded.rssMiB, 'MiB');
        measurements[label('busy descriptors')] = lowerIsBetter(loaded.descriptors, 'fds');
        measurements[label('busy lag p99')] = lowerIsBetter(percentile(lags, 99), 's');
        measurements[label('busy lag max')] = lowerIsBetter(Math.max(...lags), 's');
        measurements[label('stop exit code')] = lowerIsBetter(stopped.code ?? -1, 'code');
        measurements[label('stop seconds')] = lowerIsBetter(stopped.seconds, 's');
      } catch (error) {
        context.log(replicate.tail);
        throw error;
      } finally {
        if (writer) await killProcess(writer);
        if (replicate.child.exitCode === null) replicate.child.kill('SIGKILL');
        await proxy.close();
      }
    }
    return measurements;
  },
  async teardown(state) {
    await state.started.stop();
  },
});
