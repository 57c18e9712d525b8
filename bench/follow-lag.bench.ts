/**
 * `backupd follow` (a read replica) as its readers see it, on the local S3
 * server (versitygw, started through @x/test-servers' `startTestServers`).
 *
 * Per run, a fresh database and prefix:
 * - the database: `commits` (one row per transaction: number `seq`, wall
 *   time `at` = `Date.now()` at the commit), `accounts` (32 rows over two
 *   pages whose balances sum to 0) and `meta` (the number of commits);
 * - `backupd replicate` at the defaults (1 s interval), straight to the
 *   server;
 * - `backupd follow <url> <target.db> --json` at the defaults (1 s poll)
 *   through a counting proxy, so the requests counted are the follower's
 *   alone; each applied state's line is kept with its arrival time;
 * - a reader process that holds `target.db` open read-only (`node:sqlite`,
 *   busy timeout 5 s) and runs one read transaction every 5 ms or so: the
 *   newest commit visible, the invariants (the balances sum to 0; as many
 *   rows as the newest `seq`; `meta` agrees), `PRAGMA integrity_check` every
 *   50th; it reports lag = now − `at` of the newest commit visible (a caught
 *   up reader still sees up to one commit gap), and lag in commits = the
 *   writer's count − the newest `seq` visible; the writer writes its count
 *   (8 bytes) to a small file after each commit, which the reader reads
 *   inside its transaction, after the state was read;
 * - a writer process committing single transactions (one row inserted, two
 *   balances moved, `meta` bumped) at each of `FOLLOW_LAG_RATES` (`10,100`)
 *   per second, each for a 5 s warm-up then a `FOLLOW_LAG_PHASE_SECONDS`
 *   (30) window; then stopped: seconds until the reader sees its last
 *   commit, then 20 s for the writer's last restore point, then
 *   `FOLLOW_LAG_IDLE_SECONDS` (30) idle. `FOLLOW_LAG_FILL_MB`
 *   (0) adds that many MiB of random rows the writer never touches, to see
 *   what a larger database costs the follower.
 *
 * Per window: lag median, p99 and max (seconds, commits); the follower's
 * requests per hour by operation (from the proxy); bytes downloaded per
 * commit applied (the `bytes` of the `--json` lines ÷ their
 * `commitsApplied`); the follower's CPU seconds per minute (utime + stime
 * from /proc). Over the run: torn reads (a broken invariant or a failed
 * integrity check: target 0) and read errors. Prints the details as JSON,
 * with, per window, how old each state's newest commit was when applied and
 * how many of the late ones waited through a HEAD poll (one that looks at
 * LATEST instead of for the next segment).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
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
  s3RequestKind,
  s3Url,
  startVersitygw,
} from './s3-processes.ts';

const RATES = (process.env.FOLLOW_LAG_RATES ?? '10,100').split(',').map(Number);
const PHASE_SECONDS = Number(process.env.FOLLOW_LAG_PHASE_SECONDS ?? '30');
const IDLE_SECONDS = Number(process.env.FOLLOW_LAG_IDLE_SECONDS ?? '30');
/** Seconds between the writer's stop and the idle window (see the idle phase). */
const IDLE_SETTLE_SECONDS = 20;
/** MiB of random rows in the database before it is replicated (a table the writer never touches). */
const FILL_MIB = Number(process.env.FOLLOW_LAG_FILL_MB ?? '0');
const WARM_UP_MS = 5000;
/** follow's default poll (`--poll`), for requests per poll. */
const POLL_MS = 1000;
const READ_PAUSE_MS = 5;
const INTEGRITY_EVERY = 50;
const ACCOUNTS = 32;

/** Single transactions at `rate` per second until killed; its count of commits in `countPath` after each. */
const WRITER_PROGRAM = `
const { DatabaseSync } = require('node:sqlite');
const { openSync, writeSync } = require('node:fs');
const [path, countPath, rate] = process.argv.slice(1);
const db = new DatabaseSync(path);
db.exec('PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA busy_timeout = 10000;');
const insert = db.prepare('INSERT INTO commits (seq, at, pad) VALUES (?, ?, ?)');
const move = db.prepare('UPDATE accounts SET balance = balance + ? WHERE id = ?');
const bump = db.prepare('UPDATE meta SET commits = commits + 1 WHERE id = 1');
let seq = db.prepare('SELECT coalesce(max(seq), 0) AS s FROM commits').get().s;
const count = openSync(countPath, 'r+');
const record = Buffer.alloc(8);
const every = 1000 / Number(rate);
const started = performance.now();
let n = 0;
const tick = () => {
  seq += 1; n += 1;
  const amount = 1 + (seq % 97);
  db.exec('BEGIN IMMEDIATE');
  insert.run(seq, Date.now(), 'x'.repeat(100));
  move.run(-amount, 1 + (seq % ${ACCOUNTS}));
  move.run(amount, 1 + ((seq + ${ACCOUNTS / 2}) % ${ACCOUNTS}));
  bump.run();
  db.exec('COMMIT');
  record.writeDoubleLE(seq, 0);
  writeSync(count, record, 0, 8, 0);
  setTimeout(tick, Math.max(0, started + n * every - performance.now()));
};
tick();
`;

/** Read transactions on the follow's target until killed: one JSON line each on stdout. */
const READER_PROGRAM = `
const { DatabaseSync } = require('node:sqlite');
const { openSync, readSync } = require('node:fs');
const [path, countPath] = process.argv.slice(1);
const count = openSync(countPath, 'r');
const record = Buffer.alloc(8);
let db = null;
let statements;
let n = 0;
const out = [];
setInterval(() => {
  if (out.length > 0) process.stdout.write(out.splice(0).join(''));
}, 200);
const open = () => {
  db = new DatabaseSync(path, { readOnly: true, timeout: 5000 });
  statements = {
    newest: db.prepare('SELECT seq, at FROM commits ORDER BY seq DESC LIMIT 1'),
    rows: db.prepare('SELECT count(*) AS n FROM commits'),
    ledger: db.prepare('SELECT (SELECT sum(balance) FROM accounts) AS sum, (SELECT count(*) FROM accounts) AS accounts, (SELECT commits FROM meta WHERE id = 1) AS meta'),
    integrity: db.prepare('PRAGMA integrity_check'),
  };
};
const step = () => {
  n += 1;
  try {
    if (db === null) open();
    db.exec('BEGIN');
    try {
      const newest = statements.newest.get() ?? { seq: 0, at: 0 };
      const now = Date.now();
      const rows = statements.rows.get().n;
      const ledger = statements.ledger.get();
      const integrity = n % ${INTEGRITY_EVERY} === 0
        ? statements.integrity.all().map((row) => row.integrity_check).join('; ')
        : null;
      readSync(count, record, 0, 8, 0);
      const written = record.readDoubleLE(0);
      const problems = [];
      if (ledger.sum !== 0 || ledger.accounts !== ${ACCOUNTS}) problems.push('balances sum to ' + ledger.sum + ' over ' + ledger.accounts + ' accounts');
      if (rows !== newest.seq) problems.push(rows + ' rows, newest seq ' + newest.seq);
      if (ledger.meta !== newest.seq) problems.push('meta says ' + ledger.meta + ' commits, newest seq ' + newest.seq);
      if (integrity !== null && integrity !== 'ok') problems.push('integrity_check: ' + integrity);
      out.push(JSON.stringify({ t: now, seq: newest.seq, lagMs: now - newest.at, written, integrity: integrity !== null, torn: problems.length > 0 ? problems.join('; ') : undefined }) + '\\n');
    } finally {
      if (db.isTransaction) db.exec('COMMIT');
    }
  } catch (error) {
    out.push(JSON.stringify({ t: Date.now(), error: String(error && error.message ? error.message : error) }) + '\\n');
    try { db?.close(); } catch {}
    db = null;
  }
  setTimeout(step, ${READ_PAUSE_MS});
};
step();
`;

interface State {
  readonly started: StartedTestServers;
  readonly server: Server;
  run: number;
}

/** One read transaction of the reader. */
interface Sample {
  readonly t: number;
  readonly seq?: number;
  readonly lagMs?: number;
  readonly written?: number;
  readonly integrity?: boolean;
  readonly torn?: string;
  readonly error?: string;
}

/** One applied state's `--json` line (`backupd.follow_applied`; `follow.applied` before 3b8750d), with its arrival time. */
interface Applied {
  readonly at: number;
  readonly commitSeq: number;
  readonly commitsApplied: number;
  readonly bytes: number;
  readonly objects: number;
  readonly applySeconds: number;
  /** The state's newest commit time (ms; NaN when the line has none). */
  readonly commitTime: number;
}

const OPERATIONS = ['LIST', 'HEAD', 'GET', 'other'] as const;
type Operation = (typeof OPERATIONS)[number];

/** The follower's S3 operation (it only reads: anything else is `other`). */
function operationOf(method: string, query: string): Operation {
  const kind = s3RequestKind(method, query);
  return kind === 'LIST' || kind === 'HEAD' || kind === 'GET' ? kind : 'other';
}

/** Nearest-rank percentile (`p` in 0..1) of a non-empty list. */
function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))]!;
}

/** Lines of a child's stream, one callback each. */
function eachLine(stream: NodeJS.ReadableStream, onLine: (line: string) => void): void {
  let partial = '';
  stream.setEncoding('utf8');
  stream.on('data', (chunk: string) => {
    const lines = (partial + chunk).split('\n');
    partial = lines.pop()!;
    for (const line of lines) onLine(line);
  });
}

/** The newest commit number in the writer's database. */
function newestSeq(path: string): number {
  const database = new DatabaseSync(path, { readOnly: true, timeout: 5000 });
  try {
    return (
      database.prepare('SELECT coalesce(max(seq), 0) AS s FROM commits').get() as { s: number }
    ).s;
  } finally {
    database.close();
  }
}

/** The schema, in WAL mode, before replicate starts. */
function createDatabase(path: string): void {
  const database = new DatabaseSync(path);
  database.exec('PRAGMA journal_mode = WAL');
  database.exec(`
    CREATE TABLE commits (seq INTEGER PRIMARY KEY, at REAL NOT NULL, pad TEXT NOT NULL);
    CREATE TABLE accounts (id INTEGER PRIMARY KEY, balance INTEGER NOT NULL, pad TEXT NOT NULL);
    CREATE TABLE meta (id INTEGER PRIMARY KEY, commits INTEGER NOT NULL);
    INSERT INTO meta (id, commits) VALUES (1, 0);
  `);
  // About 18 accounts a page: a transfer from `seq % 32` to `seq + 16` mostly spans both pages.
  const insert = database.prepare('INSERT INTO accounts (id, balance, pad) VALUES (?, 0, ?)');
  for (let id = 1; id <= ACCOUNTS; id += 1) insert.run(id, 'a'.repeat(200));
  if (FILL_MIB > 0) {
    database.exec('CREATE TABLE fill (id INTEGER PRIMARY KEY, body BLOB NOT NULL)');
    const fill = database.prepare('INSERT INTO fill (body) VALUES (?)');
    database.exec('BEGIN');
    for (let chunk = 0; chunk < FILL_MIB * 16; chunk += 1) fill.run(randomBytes(65536));
    database.exec('COMMIT');
  }
  database.close();
}

/** `backupd follow <url> <target> --json`, its applied lines and its warnings kept. */
class Follow {
  readonly child: ChildProcess;
  readonly applied: Applied[] = [];
  /** Log events at level warn or above, by name. */
  readonly warnings = new Map<string, number>();
  #tail = '';

  constructor(url: string, target: string, server: Server) {
    this.child = spawn(
      process.execPath,
      [BACKUPD, 'follow', url, target, '--json', '--log-format', 'json'],
      { env: env(server), stdio: ['ignore', 'pipe', 'pipe'] },
    );
    eachLine(this.child.stdout!, (text) => {
      try {
        const line = JSON.parse(text) as Record<string, unknown>;
        if (line.event === 'backupd.follow_applied' || line.event === 'follow.applied')
          this.applied.push({
            at: Date.now(),
            commitSeq: Number(line.commitSeq),
            commitsApplied: Number(line.commitsApplied),
            bytes: Number(line.bytes),
            objects: Number(line.objects),
            applySeconds: Number(line.applySeconds),
            commitTime:
              typeof line.commitTime === 'string' ? Date.parse(line.commitTime) : Number.NaN,
          });
      } catch {
        // Not a JSON line.
      }
    });
    eachLine(this.child.stderr!, (text) => {
      this.#tail = `${this.#tail}${text}\n`.slice(-4000);
      try {
        const line = JSON.parse(text) as { level?: number; event?: string };
        if ((line.level ?? 0) >= 40) {
          const event = line.event ?? 'unnamed';
          this.warnings.set(event, (this.warnings.get(event) ?? 0) + 1);
        }
      } catch {
        // Not a log line.
      }
    });
  }

  get tail(): string {
    return this.#tail;
  }

  async firstApplied(timeoutMs = 60_000): Promise<void> {
    const deadline = performance.now() + timeoutMs;
    while (this.applied.length === 0) {
      if (this.child.exitCode !== null || performance.now() > deadline)
        throw new Error(`backupd follow applied no state:\n${this.#tail}`);
      await sleep(50);
    }
  }

  /** SIGTERM (the graceful stop), SIGKILL after 15 s; the exit code, or the signal. */
  async stop(): Promise<string> {
    if (this.child.exitCode !== null || this.child.signalCode !== null)
      return String(this.child.exitCode ?? this.child.signalCode);
    const exited = new Promise<string>((resolve) =>
      this.child.once('exit', (code, signal) => resolve(String(code ?? signal))),
    );
    this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 15_000);
    try {
      return await exited;
    } finally {
      clearTimeout(timer);
    }
  }
}

/** The reader process and every sample it reported. */
class Reader {
  readonly child: ChildProcess;
  readonly samples: Sample[] = [];

  constructor(target: string, countPath: string) {
    this.child = spawn(process.execPath, ['-e', READER_PROGRAM, target, countPath], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    eachLine(this.child.stdout!, (text) => {
      if (text.startsWith('{')) this.samples.push(JSON.parse(text) as Sample);
    });
  }

  /** Waits until a sample shows commit `seq` (or newer); its time. */
  async sees(seq: number, timeoutMs: number): Promise<number> {
    const deadline = performance.now() + timeoutMs;
    for (let from = 0; ; ) {
      for (; from < this.samples.length; from += 1) {
        const sample = this.samples[from]!;
        if (sample.seq !== undefined && sample.seq >= seq) return sample.t;
      }
      if (this.child.exitCode !== null) throw new Error('the reader exited');
      if (performance.now() > deadline)
        throw new Error(
          `the reader did not see commit ${seq} within ${timeoutMs / 1000} s (newest seen: ${this.samples.findLast((s) => s.seq !== undefined)?.seq})`,
        );
      await sleep(50);
    }
  }
}

/** Requests by operation counted by the proxy so far. */
type Counts = Map<Operation, number>;

/** What one window (a load phase, or idle) measured. */
interface Window {
  readonly label: string;
  readonly seconds: number;
  readonly commitsWritten: number;
  readonly reads: number;
  readonly lagSeconds: readonly number[];
  readonly lagCommits: readonly number[];
  readonly requestsPerHour: Map<Operation, number>;
  readonly applied: readonly Applied[];
  readonly cpuSecondsPerMinute: number;
}

interface Run {
  readonly counts: Counts;
  readonly follow: Follow;
  readonly reader: Reader;
  readonly database: string;
}

/** Measures from now for `seconds`: what the reader saw, the follower's requests, lines and CPU. */
async function measureWindow(run: Run, label: string, seconds: number): Promise<Window> {
  const startedAt = Date.now();
  const countsBefore = new Map(run.counts);
  const cpuBefore = cpuSecondsOf(run.follow.child.pid);
  const seqBefore = newestSeq(run.database);
  await sleep(seconds * 1000);
  const endedAt = Date.now();
  const cpuAfter = cpuSecondsOf(run.follow.child.pid);
  const seqAfter = newestSeq(run.database);
  const elapsed = (endedAt - startedAt) / 1000;
  const requestsPerHour = new Map<Operation, number>();
  for (const operation of OPERATIONS)
    requestsPerHour.set(
      operation,
      (((run.counts.get(operation) ?? 0) - (countsBefore.get(operation) ?? 0)) * 3600) / elapsed,
    );
  const inWindow = run.reader.samples.filter(
    (sample) => sample.t >= startedAt && sample.t < endedAt && sample.seq !== undefined,
  );
  return {
    label,
    seconds: elapsed,
    commitsWritten: seqAfter - seqBefore,
    reads: inWindow.length,
    lagSeconds: inWindow.map((sample) => sample.lagMs! / 1000),
    lagCommits: inWindow.map((sample) => Math.max(0, sample.written! - sample.seq!)),
    requestsPerHour,
    applied: run.follow.applied.filter((line) => line.at >= startedAt && line.at < endedAt),
    cpuSecondsPerMinute:
      cpuBefore === null || cpuAfter === null
        ? Number.NaN
        : ((cpuAfter - cpuBefore) * 60) / elapsed,
  };
}

function requestMeasurements(window: Window): Record<string, Measurement> {
  const result: Record<string, Measurement> = {};
  const total = [...window.requestsPerHour.values()].reduce((sum, value) => sum + value, 0);
  result[`${window.label}: requests`] = lowerIsBetter(Math.round(total), 'requests/h');
  for (const operation of OPERATIONS)
    result[`${window.label}: ${operation}`] = lowerIsBetter(
      Math.round(window.requestsPerHour.get(operation) ?? 0),
      'requests/h',
    );
  result[`${window.label}: follower CPU`] = lowerIsBetter(window.cpuSecondsPerMinute, 's/min');
  return result;
}

function loadMeasurements(window: Window): Record<string, Measurement> {
  if (window.reads === 0) throw new Error(`${window.label}: the reader read nothing`);
  if (window.applied.length === 0) throw new Error(`${window.label}: follow applied nothing`);
  const label = window.label;
  const commitsApplied = window.applied.reduce((sum, line) => sum + line.commitsApplied, 0);
  const bytes = window.applied.reduce((sum, line) => sum + line.bytes, 0);
  return {
    [`${label}: commits written`]: {
      value: window.commitsWritten / window.seconds,
      unit: 'commits/s',
    },
    [`${label}: lag median`]: lowerIsBetter(percentile(window.lagSeconds, 0.5), 's'),
    [`${label}: lag p99`]: lowerIsBetter(percentile(window.lagSeconds, 0.99), 's'),
    [`${label}: lag max`]: lowerIsBetter(Math.max(...window.lagSeconds), 's'),
    [`${label}: lag median (commits)`]: lowerIsBetter(
      percentile(window.lagCommits, 0.5),
      'commits',
    ),
    [`${label}: lag p99 (commits)`]: lowerIsBetter(percentile(window.lagCommits, 0.99), 'commits'),
    [`${label}: lag max (commits)`]: lowerIsBetter(Math.max(...window.lagCommits), 'commits'),
    [`${label}: reads`]: { value: window.reads / window.seconds, unit: 'reads/s' },
    [`${label}: states applied`]: {
      value: (window.applied.length * 60) / window.seconds,
      unit: 'states/min',
    },
    [`${label}: apply median`]: lowerIsBetter(
      percentile(
        window.applied.map((line) => line.applySeconds),
        0.5,
      ),
      's',
    ),
    [`${label}: downloaded per commit`]: lowerIsBetter(bytes / commitsApplied / 1000, 'kB/commit'),
    [`${label}: downloaded per state`]: lowerIsBetter(
      bytes / window.applied.length / 1000,
      'kB/state',
    ),
    ...requestMeasurements(window),
  };
}

/** Seconds from an applied state's newest commit to its line's arrival. */
function ageOf(line: Applied): number {
  return (line.at - line.commitTime) / 1000;
}

/**
 * Details of a window for the JSON output. `heads`: when the follower sent
 * each HEAD (of LATEST: such a poll does not look for the next segment).
 */
function describe(window: Window, heads: readonly number[]): Record<string, unknown> {
  const round = (value: number) => Math.round(value * 1000) / 1000;
  const ages = window.applied.map(ageOf).filter(Number.isFinite);
  return {
    label: window.label,
    seconds: round(window.seconds),
    commitsWritten: window.commitsWritten,
    reads: window.reads,
    ...(window.lagSeconds.length === 0
      ? {}
      : {
          lagSeconds: {
            median: round(percentile(window.lagSeconds, 0.5)),
            p99: round(percentile(window.lagSeconds, 0.99)),
            max: round(Math.max(...window.lagSeconds)),
          },
        }),
    requestsPerHour: Object.fromEntries(
      [...window.requestsPerHour].map(([operation, value]) => [operation, Math.round(value)]),
    ),
    statesApplied: window.applied.length,
    // Seconds from a state's newest commit to its line (shipping, polling, applying).
    ...(ages.length === 0
      ? {}
      : {
          newestCommitAgeAtApply: {
            median: round(percentile(ages, 0.5)),
            max: round(Math.max(...ages)),
          },
          secondsBetweenStates: round(window.seconds / window.applied.length),
          // States whose newest commit was older than a poll (1 s) + 0.25 s when applied, and
          // of these, those that waited through a HEAD poll (which does not look for segments).
          statesOlderThan1250ms: window.applied.filter((line) => ageOf(line) > 1.25).length,
          ofWhichWaitedThroughHead: window.applied.filter(
            (line) =>
              ageOf(line) > 1.25 && heads.some((at) => at > line.commitTime && at < line.at),
          ).length,
        }),
    commitsApplied: window.applied.reduce((sum, line) => sum + line.commitsApplied, 0),
    bytesDownloaded: window.applied.reduce((sum, line) => sum + line.bytes, 0),
    objectsDownloaded: window.applied.reduce((sum, line) => sum + line.objects, 0),
    largestDownload: Math.max(0, ...window.applied.map((line) => line.bytes)),
    cpuSecondsPerMinute: round(window.cpuSecondsPerMinute),
  };
}

export const benchmark = defineBenchmark<State>({
  name: 'follow-lag',
  description: `backupd follow (1 s poll, through a counting proxy) of backupd replicate on the local S3 server, read by a separate process: lag (median, p99, max; s and commits), torn reads, requests per hour by operation, kB downloaded per commit and CPU, at ${RATES.join(' and ')} commits/s (${PHASE_SECONDS} s each) and ${IDLE_SECONDS} s idle`,
  runs: 3,
  async setup(context) {
    const { started, server } = await startVersitygw((line) => context.log(line));
    return { started, server, run: 0 };
  },
  async run(state, context) {
    state.run += 1;
    const directory = join(context.tempDir, `run-${state.run}`);
    mkdirSync(directory, { recursive: true });
    const database = join(directory, 'app.db');
    const target = join(directory, 'replica', 'app.db');
    mkdirSync(join(directory, 'replica'));
    const countPath = join(directory, 'written.count');
    writeFileSync(countPath, Buffer.alloc(8));
    createDatabase(database);

    const counts: Counts = new Map();
    const heads: number[] = [];
    const proxy: InterceptingProxy = await startInterceptingProxy({
      target: state.server.endpoint,
      intercept(request) {
        const operation = operationOf(request.method, request.query);
        counts.set(operation, (counts.get(operation) ?? 0) + 1);
        if (operation === 'HEAD') heads.push(Date.now());
        return undefined;
      },
    });
    const prefix = `follow-lag-${randomBytes(6).toString('hex')}`;
    const replicate = new Replicate(database, s3Url(state.server, prefix), state.server);
    let follow: Follow | undefined;
    let reader: Reader | undefined;
    let writer: ChildProcess | undefined;
    const windows: Window[] = [];
    let catchUpSeconds: number;
    let followExit: string;
    try {
      await replicate.secondsTo('backup.restore_point_written');
      follow = new Follow(
        s3Url({ ...state.server, endpoint: proxy.url }, prefix),
        target,
        state.server,
      );
      await follow.firstApplied();
      reader = new Reader(target, countPath);
      const run: Run = { counts, follow, reader, database };
      for (const rate of RATES) {
        context.log(
          `${rate} commits/s: ${WARM_UP_MS / 1000} s warm-up, ${PHASE_SECONDS} s measured`,
        );
        const started = spawn(
          process.execPath,
          ['-e', WRITER_PROGRAM, database, countPath, String(rate)],
          {
            stdio: ['ignore', 'ignore', 'inherit'],
          },
        );
        writer = started;
        await sleep(WARM_UP_MS);
        windows.push(await measureWindow(run, `${rate}/s`, PHASE_SECONDS));
        if (started.exitCode !== null) throw new Error(`the writer exited ${started.exitCode}`);
        await killProcess(started);
      }
      const stoppedAt = Date.now();
      const last = newestSeq(database);
      catchUpSeconds = ((await reader.sees(last, 60_000)) - stoppedAt) / 1000;
      context.log(
        `writer stopped; reader saw its last commit (${last}) after ${catchUpSeconds.toFixed(2)} s; ${IDLE_SETTLE_SECONDS} s settling, then ${IDLE_SECONDS} s idle`,
      );
      // The writer's last restore point comes up to a restore-point interval
      // (15 s) after its last commit, and the follower reads LATEST and the
      // manifest once for it: idle starts after that.
      await sleep(IDLE_SETTLE_SECONDS * 1000);
      windows.push(await measureWindow(run, 'idle', IDLE_SECONDS));
    } finally {
      if (writer) await killProcess(writer);
      if (reader) await killProcess(reader.child);
      followExit = follow ? await follow.stop() : 'not started';
      await replicate.stop();
      await proxy.close();
    }

    const samples = reader.samples;
    const torn = samples.filter((sample) => sample.torn !== undefined);
    const errors = samples.filter((sample) => sample.error !== undefined);
    const errorMessages = new Map<string, number>();
    for (const sample of errors)
      errorMessages.set(sample.error!, (errorMessages.get(sample.error!) ?? 0) + 1);
    const idle = windows.at(-1)!;
    const idleRequests = [...idle.requestsPerHour.values()].reduce((sum, value) => sum + value, 0);
    const measured: Record<string, Measurement> = {};
    for (const window of windows.slice(0, -1)) Object.assign(measured, loadMeasurements(window));
    Object.assign(measured, requestMeasurements(idle), {
      'idle: requests per poll': lowerIsBetter((idleRequests / 3_600_000) * POLL_MS, 'requests'),
      'catch-up after the writer stops': lowerIsBetter(catchUpSeconds, 's'),
      'read transactions': { value: samples.length, unit: 'reads' },
      'integrity checks': {
        value: samples.filter((sample) => sample.integrity === true).length,
        unit: 'checks',
      },
      'torn reads': lowerIsBetter(torn.length, 'reads'),
      'read errors': lowerIsBetter(errors.length, 'reads'),
      'follow warnings': lowerIsBetter(
        [...follow.warnings.values()].reduce((sum, value) => sum + value, 0),
        'events',
      ),
    } satisfies Record<string, Measurement>);
    console.log(
      JSON.stringify(
        {
          benchmark: 'follow-lag',
          run: state.run,
          windows: windows.map((window) => describe(window, heads)),
          catchUpSeconds,
          reads: samples.length,
          tornReads: torn.slice(0, 20),
          readErrors: Object.fromEntries(errorMessages),
          followWarnings: Object.fromEntries(follow.warnings),
          followExit,
          statesApplied: follow.applied.length,
        },
        null,
        2,
      ),
    );
    if (followExit !== '0') context.log(`follow exited ${followExit}:\n${follow.tail}`);
    return measured;
  },
  async teardown(state) {
    await state.started.stop();
  },
});
