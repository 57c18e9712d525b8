/**
 * The recovery point after losing the host, and the way back after a crash,
 * through the `backupd` command and real processes on the local S3 server
 * (versitygw, started through @x/test-servers' `startTestServers`).
 *
 * One run:
 * 1. `RECOVERY_POINT_TRIALS` (default 10) host-loss trials: a fresh database
 *    and prefix; a writer process committing single-row transactions at
 *    `RECOVERY_POINT_RATE` (default 50) per second, each row holding its
 *    commit number and wall time; `backupd replicate` at the defaults; once
 *    the first restore point is written, a random 2–8 s more; then the
 *    writer and backupd SIGKILLed together and `backupd restore` of the
 *    latest state. Commits lost = the newest commit in the database on disk
 *    − the newest restored; seconds lost = the difference of their times.
 * 2. In the same trial, backupd restarted on the same database and prefix
 *    after the kill (the writer too): seconds from the spawn to its lease
 *    (`backup.lease_taken`) and to its first restore point
 *    (`backup.restore_point_written`), as its log lines arrive.
 * 3. Requests and bytes sent per hour, from backupd's `/metrics`
 *    (`backupd_requests_total`, every operation; `backupd_bytes_total`,
 *    direction `out`: request bodies as sent, compaction's included): over `RECOVERY_POINT_PHASE_SECONDS` (default 60) at a
 *    steady 10 commits/s, then as long idle (the writer stopped); each phase
 *    after a 10 s warm-up that is not counted.
 *
 * The medians and maxima are over the trials of the run. `BACKUPD_*`
 * settings in the environment reach backupd (to measure another setting).
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { type StartedTestServers, startTestServers } from '@x/test-servers/harness';
import { defineBenchmark, type Measurement } from './harness.ts';

/** The command in this checkout, run in the spawned process itself (no wrapper: a SIGKILL reaches it). */
const BACKUPD = fileURLToPath(new URL('../apps/backupd/bin/backupd.js', import.meta.url));

const TRIALS = Number(process.env.RECOVERY_POINT_TRIALS ?? '10');
const RATE = Number(process.env.RECOVERY_POINT_RATE ?? '50');
const PHASE_SECONDS = Number(process.env.RECOVERY_POINT_PHASE_SECONDS ?? '60');

/** The writer: one row per transaction, `seq` and wall time `at`, at `rate` per second, until killed. */
const WRITER_PROGRAM = `
const { DatabaseSync } = require('node:sqlite');
const [path, rate] = process.argv.slice(1);
const db = new DatabaseSync(path);
db.exec('PRAGMA journal_mode = WAL; PRAGMA busy_timeout = 10000;');
db.exec('CREATE TABLE IF NOT EXISTS commits (seq INTEGER PRIMARY KEY, at REAL NOT NULL, pad TEXT NOT NULL)');
const insert = db.prepare('INSERT INTO commits (seq, at, pad) VALUES (?, ?, ?)');
let seq = db.prepare('SELECT coalesce(max(seq), 0) AS s FROM commits').get().s;
const every = 1000 / Number(rate);
const started = performance.now();
let n = 0;
const tick = () => {
  seq += 1; n += 1;
  insert.run(seq, Date.now(), 'x'.repeat(100));
  setTimeout(tick, Math.max(0, started + n * every - performance.now()));
};
tick();
`;

interface Server {
  readonly endpoint: string;
  readonly bucket: string;
  readonly region: string;
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
}

interface State {
  readonly started: StartedTestServers;
  readonly server: Server;
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

function env(server: Server): NodeJS.ProcessEnv {
  return {
    ...process.env,
    AWS_ACCESS_KEY_ID: server.accessKeyId,
    AWS_SECRET_ACCESS_KEY: server.secretAccessKey,
    AWS_CONFIG_FILE: '/dev/null',
    AWS_SHARED_CREDENTIALS_FILE: '/dev/null',
    AWS_EC2_METADATA_DISABLED: 'true',
  };
}

function url(server: Server, prefix: string): string {
  return `s3://${server.bucket}/${prefix}?endpoint=${encodeURIComponent(server.endpoint)}&forcePathStyle=true&region=${server.region || 'us-east-1'}`;
}

function startWriter(database: string, rate: number): ChildProcess {
  return spawn(process.execPath, ['-e', WRITER_PROGRAM, database, String(rate)], {
    stdio: 'ignore',
  });
}

/** `backupd replicate`, with the arrival time of each of its JSON log events. */
class Replicate {
  readonly child: ChildProcess;
  readonly spawnedAt = performance.now();
  readonly events: { event: string; at: number; line: Record<string, unknown> }[] = [];
  #buffer = '';
  #tail = '';

  constructor(database: string, target: string, server: Server) {
    this.child = spawn(
      process.execPath,
      [BACKUPD, 'replicate', database, target, '--listen', '127.0.0.1:0'],
      { env: env(server), stdio: ['ignore', 'ignore', 'pipe'] },
    );
    this.child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
      const at = performance.now();
      this.#tail = (this.#tail + chunk).slice(-4000);
      this.#buffer += chunk;
      const lines = this.#buffer.split('\n');
      this.#buffer = lines.pop()!;
      for (const text of lines) {
        if (!text.startsWith('{')) continue;
        try {
          const line = JSON.parse(text) as Record<string, unknown>;
          if (typeof line.event === 'string') this.events.push({ event: line.event, at, line });
        } catch {
          // Not a log line.
        }
      }
    });
  }

  /** Seconds from the spawn to the first `event`, waiting up to `timeoutMs`. */
  async secondsTo(event: string, timeoutMs = 120_000): Promise<number> {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      const found = this.events.find((entry) => entry.event === event);
      if (found) return (found.at - this.spawnedAt) / 1000;
      if (this.child.exitCode !== null || performance.now() > deadline)
        throw new Error(`backupd replicate logged no ${event}:\n${this.#tail}`);
      await sleep(20);
    }
  }

  metricsUrl(): string | undefined {
    const listening = this.events.find((entry) => entry.event === 'backupd.listening');
    return typeof listening?.line.url === 'string' ? `${listening.line.url}/metrics` : undefined;
  }

  /**
   * Every object-store request so far (`backupd_requests_total`, all
   * operations) and every byte sent to the store (`backupd_bytes_total`,
   * direction `out`).
   */
  async traffic(): Promise<Traffic> {
    const at = this.metricsUrl();
    if (at === undefined) throw new Error('backupd replicate has not said where it listens');
    const text = await (await fetch(at, { signal: AbortSignal.timeout(5000) })).text();
    let requests = 0;
    let bytesOut = 0;
    for (const line of text.split('\n')) {
      const value = Number(line.slice(line.lastIndexOf(' ') + 1));
      if (line.startsWith('backupd_requests_total{')) requests += value;
      else if (line.startsWith('backupd_bytes_total{') && line.includes('direction="out"'))
        bytesOut += value;
    }
    return { requests, bytesOut };
  }

  async kill(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => this.child.once('exit', () => resolve()));
    this.child.kill('SIGKILL');
    await exited;
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => this.child.once('exit', () => resolve()));
    this.child.kill('SIGTERM');
    await exited;
  }
}

async function killProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGKILL');
  await exited;
}

/** The newest commit (number and wall time) in a database the writer wrote. */
function newestCommit(path: string): { seq: number; at: number } {
  const database = new DatabaseSync(path, { readOnly: true });
  try {
    const row = database.prepare('SELECT seq, at FROM commits ORDER BY seq DESC LIMIT 1').get() as
      | { seq: number; at: number }
      | undefined;
    return row ?? { seq: 0, at: 0 };
  } finally {
    database.close();
  }
}

interface Trial {
  /** Absent when the restore was refused. */
  readonly commitsLost?: number;
  readonly secondsLost?: number;
  /** Why `backupd restore` of the latest state failed, when it did. */
  readonly restoreRefused?: string;
  readonly restartToLease: number;
  readonly restartToRestorePoint: number;
}

async function trial(state: State, directory: string, index: number): Promise<Trial> {
  const database = join(directory, `trial-${index}.db`);
  const target = url(state.server, `recovery-point-${randomBytes(6).toString('hex')}`);
  const writer = startWriter(database, RATE);
  await sleep(300);
  const first = new Replicate(database, target, state.server);
  try {
    await first.secondsTo('backup.restore_point_written');
    await sleep(2000 + Math.random() * 6000);
    // The host goes: both at once.
    await Promise.all([killProcess(writer), first.kill()]);
  } finally {
    await Promise.all([killProcess(writer), first.kill()]);
  }
  const onDisk = newestCommit(database);
  const restoredPath = join(directory, `trial-${index}-restored.db`);
  const restored = spawnSync(process.execPath, [BACKUPD, 'restore', target, restoredPath], {
    env: env(state.server),
    encoding: 'utf8',
  });
  // A refused restore is a result too (the host's data is lost): counted
  // and logged, its trial left out of the loss figures.
  const refusal =
    restored.status === 0
      ? undefined
      : `exit ${restored.status}: ${restored.stderr.trim().split('\n').at(-1)}`;
  const back = refusal === undefined ? newestCommit(restoredPath) : undefined;

  // The same host comes back: the application and backupd restart.
  const again = startWriter(database, RATE);
  const second = new Replicate(database, target, state.server);
  try {
    const restartToLease = await second.secondsTo('backup.lease_taken');
    const restartToRestorePoint = await second.secondsTo('backup.restore_point_written');
    return {
      ...(back === undefined
        ? { restoreRefused: refusal }
        : { commitsLost: onDisk.seq - back.seq, secondsLost: (onDisk.at - back.at) / 1000 }),
      restartToLease,
      restartToRestorePoint,
    };
  } finally {
    await Promise.all([killProcess(again), second.stop()]);
  }
}

/** Requests per hour over one phase, after a 10 s warm-up that is not counted. */
interface Traffic {
  readonly requests: number;
  readonly bytesOut: number;
}

/** Requests and bytes sent per hour over `seconds`, after a 10 s warm-up. */
async function trafficPerHour(replicate: Replicate, seconds: number): Promise<Traffic> {
  await sleep(10_000);
  const before = await replicate.traffic();
  const started = performance.now();
  await sleep(seconds * 1000);
  const after = await replicate.traffic();
  const hours = (performance.now() - started) / 1000 / 3600;
  return {
    requests: (after.requests - before.requests) / hours,
    bytesOut: (after.bytesOut - before.bytesOut) / hours,
  };
}

export const benchmark = defineBenchmark<State>({
  name: 'recovery-point',
  description: `host loss on the local S3 server at the defaults: ${TRIALS} trials of a ${RATE} commits/s writer and backupd replicate SIGKILLed together, then restore (commits and seconds lost), the restart's time to its lease and first restore point, and requests and MB sent per hour at 10 commits/s and idle`,
  runs: 1,
  async setup(context) {
    const started = await startTestServers({ only: ['versitygw'] });
    const server = started.servers.s3.find((candidate) => candidate.name === 'versitygw');
    if (!server) {
      await started.stop();
      throw new Error('versitygw is not running (pnpm servers:install)');
    }
    context.log(`versitygw at ${server.endpoint}`);
    return { started, server };
  },
  async run(state, context) {
    const directory = join(context.tempDir, `run-${Date.now()}`);
    mkdirSync(directory, { recursive: true });
    const trials: Trial[] = [];
    for (let index = 0; index < TRIALS; index += 1) {
      const result = await trial(state, directory, index);
      context.log(
        `trial ${index + 1}/${TRIALS}: ${result.restoreRefused === undefined ? `${result.commitsLost} commits, ${result.secondsLost?.toFixed(2)} s lost` : `restore refused (${result.restoreRefused})`}; restart: lease ${result.restartToLease.toFixed(2)} s, restore point ${result.restartToRestorePoint.toFixed(2)} s`,
      );
      trials.push(result);
    }

    const database = join(directory, 'requests.db');
    const target = url(state.server, `recovery-point-requests-${randomBytes(6).toString('hex')}`);
    const writer = startWriter(database, 10);
    const replicate = new Replicate(database, target, state.server);
    let loaded: Traffic;
    let idle: Traffic;
    try {
      await replicate.secondsTo('backup.restore_point_written');
      loaded = await trafficPerHour(replicate, PHASE_SECONDS);
      await killProcess(writer);
      idle = await trafficPerHour(replicate, PHASE_SECONDS);
    } finally {
      await Promise.all([killProcess(writer), replicate.stop()]);
    }
    const mb = (bytes: number) => (bytes / 1e6).toFixed(2);
    context.log(
      `per hour: ${loaded.requests.toFixed(0)} requests and ${mb(loaded.bytesOut)} MB sent at 10 commits/s, ${idle.requests.toFixed(0)} requests and ${mb(idle.bytesOut)} MB idle`,
    );

    const restored = trials.filter((entry) => entry.restoreRefused === undefined);
    if (restored.length === 0) throw new Error('every restore was refused');
    const pick = (key: 'commitsLost' | 'secondsLost') => restored.map((entry) => entry[key]!);
    const pickRestart = (key: 'restartToLease' | 'restartToRestorePoint') =>
      trials.map((entry) => entry[key]);
    const lower = (value: number, unit: string): Measurement => ({
      value,
      unit,
      higherIsBetter: false,
    });
    const measured: Record<string, Measurement> = {
      'commits lost (median)': lower(median(pick('commitsLost')), 'commits'),
      'commits lost (max)': lower(Math.max(...pick('commitsLost')), 'commits'),
      'seconds lost (median)': lower(median(pick('secondsLost')), 's'),
      'seconds lost (max)': lower(Math.max(...pick('secondsLost')), 's'),
      'restart to lease (median)': lower(median(pickRestart('restartToLease')), 's'),
      'restart to first restore point (median)': lower(
        median(pickRestart('restartToRestorePoint')),
        's',
      ),
      'restart to first restore point (max)': lower(
        Math.max(...pickRestart('restartToRestorePoint')),
        's',
      ),
      'restores refused': lower(trials.length - restored.length, 'trials'),
      'requests per hour at 10 commits/s': lower(loaded.requests, 'requests/h'),
      'requests per hour idle': lower(idle.requests, 'requests/h'),
      'MB sent per hour at 10 commits/s': lower(loaded.bytesOut / 1e6, 'MB/h'),
      'MB sent per hour idle': lower(idle.bytesOut / 1e6, 'MB/h'),
    };
    console.log(JSON.stringify({ benchmark: 'recovery-point', trials, measured }, null, 2));
    return measured;
  },
  async teardown(state) {
    await state.started.stop();
  },
});
