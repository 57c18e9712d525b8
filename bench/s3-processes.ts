/**
 * `backupd replicate` against the local S3 server, as a process of its own
 * with its JSON log events and `/metrics`, and a writer process committing
 * single-row transactions at a steady rate, the local S3 server itself, and
 * what kind of S3 request a proxied one is. Not a benchmark (no `benchmark`
 * export): imported by `recovery-point`, `requests-per-hour`, `restore-sizes` and
 * `follow-lag`.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { type StartedTestServers, startTestServers } from '@x/test-servers/harness';

/** The command in this checkout, run in the spawned process itself (no wrapper: a SIGKILL reaches it). */
export const BACKUPD = fileURLToPath(new URL('../apps/backupd/bin/backupd.js', import.meta.url));

/** The writer: one row per transaction, `seq` and wall time `at`, at `rate` per second, until killed. */
export const WRITER_PROGRAM = `
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

export interface Server {
  readonly endpoint: string;
  readonly bucket: string;
  readonly region: string;
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
}

/** Requests and bytes sent, from `/metrics`. */
export interface Traffic {
  readonly requests: number;
  readonly bytesOut: number;
}

export function env(server: Server): NodeJS.ProcessEnv {
  return {
    ...process.env,
    AWS_ACCESS_KEY_ID: server.accessKeyId,
    AWS_SECRET_ACCESS_KEY: server.secretAccessKey,
    AWS_CONFIG_FILE: '/dev/null',
    AWS_SHARED_CREDENTIALS_FILE: '/dev/null',
    AWS_EC2_METADATA_DISABLED: 'true',
  };
}

export function s3Url(server: Server, prefix: string): string {
  return `s3://${server.bucket}/${prefix}?endpoint=${encodeURIComponent(server.endpoint)}&forcePathStyle=true&region=${server.region || 'us-east-1'}`;
}

export function startWriter(database: string, rate: number): ChildProcess {
  return spawn(process.execPath, ['-e', WRITER_PROGRAM, database, String(rate)], {
    stdio: 'ignore',
  });
}

/** `backupd replicate`, with the arrival time of each of its JSON log events. */
export class Replicate {
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

export async function killProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGKILL');
  await exited;
}

/** The local S3 server (versitygw) alone, for a benchmark's setup. @throws when it is not installed */
export async function startVersitygw(
  log: (line: string) => void,
): Promise<{ started: StartedTestServers; server: Server }> {
  const started = await startTestServers({ only: ['versitygw'] });
  const server = started.servers.s3.find((candidate) => candidate.name === 'versitygw');
  if (!server) {
    await started.stop();
    throw new Error('versitygw is not running (pnpm servers:install)');
  }
  log(`versitygw at ${server.endpoint}`);
  return { started, server };
}

export const S3_REQUEST_KINDS = [
  'PUT',
  'GET',
  'HEAD',
  'LIST',
  'DELETE',
  'batch DELETE',
  'multipart',
] as const;
export type S3RequestKind = (typeof S3_REQUEST_KINDS)[number];

/** The kind of an S3 request, by method and query. */
export function s3RequestKind(method: string, query: string): S3RequestKind | 'other' {
  const params = new URLSearchParams(query);
  if (method === 'POST' && params.has('delete')) return 'batch DELETE';
  if (params.has('uploads') || params.has('uploadId')) return 'multipart';
  if (method === 'GET' && params.has('list-type')) return 'LIST';
  if (method === 'PUT' || method === 'GET' || method === 'HEAD' || method === 'DELETE')
    return method;
  return 'other';
}
