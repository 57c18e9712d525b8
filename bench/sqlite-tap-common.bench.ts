/**
 * Shared pieces of the SQLite benchmarks (not a benchmark itself: it exports
 * no `benchmark`, so the harness skips it): the application under load, run
 * in its own process with its own node:sqlite connection, and backupd
 * (SqliteSource under the real BackupWorker, shipping to a MemoryStore, so
 * network time is left out) in this process.
 */
import { spawn } from 'node:child_process';
import { DatabaseSync } from 'node:sqlite';
import { BackupWorker } from '@x/backup-worker';
import {
  applyCpuPriority,
  type CpuPriority,
  DEFAULT_CPU_PRIORITY,
  isCpuPriority,
} from '@x/cpu-priority';
import { FakeClock } from '@x/lease';
import { SqliteSource, type SqliteTapOptions } from '@x/source-sqlite';
import { MemoryStore } from '@x/store';

/**
 * The paced application of the lag benchmark, in its own process, started
 * once and kept (so it keeps the CPU priority it was started with when this
 * process lowers its own, as `backupd replicate` does). Each command, a JSON
 * line `{ path, durationMs, rate }` on stdin, opens `path` with its own
 * node:sqlite connection (synchronous=NORMAL, the usual WAL setting; SQLite's
 * default auto-checkpoint; busy_timeout 10 s), commits `rate` one-row
 * transactions of 200 bytes per second in batches every 10 ms for
 * `durationMs`, closes the connection and answers with the wall-clock time of
 * every commit (a JSON array on one line).
 */
const PACED_APPLICATION = `
const { DatabaseSync } = require('node:sqlite');
const { createInterface } = require('node:readline');
const body = Buffer.alloc(200, 7);
const lines = createInterface({ input: process.stdin });
lines.on('line', (line) => {
  if (line === 'quit') { lines.close(); return; }
  const { path, durationMs, rate } = JSON.parse(line);
  const db = new DatabaseSync(path, { timeout: 10000 });
  db.exec('PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL');
  const insert = db.prepare('INSERT INTO load (at, body) VALUES (?, ?)');
  const times = [];
  const started = Date.now();
  const tick = () => {
    const due = Math.floor(((Date.now() - started) / 1000) * rate);
    while (times.length < due) { insert.run(Date.now(), body); times.push(Date.now()); }
    if (Date.now() - started < durationMs) setTimeout(tick, 10);
    else { db.close(); process.stdout.write(JSON.stringify(times) + '\\n'); }
  };
  tick();
});
`;

export interface PacedApplication {
  /** Commits `rate` transactions/s to `path` for `durationMs`: the wall-clock time of each commit. */
  run(path: string, durationMs: number, rate: number): Promise<number[]>;
  close(): Promise<void>;
}

export function startPacedApplication(): PacedApplication {
  const child = startLineChild(PACED_APPLICATION, [], (line) => JSON.parse(line) as number[]);
  return {
    run: (path, durationMs, rate) => child.ask(JSON.stringify({ path, durationMs, rate })),
    close: () => child.close(),
  };
}

/**
 * A Node program in a child process that answers each command line on its
 * stdin with one line on its stdout (in order), and exits on `quit`.
 */
function startLineChild<Answer>(
  program: string,
  args: readonly string[],
  parse: (line: string) => Answer,
): { ask(command: string): Promise<Answer>; close(): Promise<void> } {
  const child = spawn(process.execPath, ['-e', program, ...args], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
  let buffered = '';
  const waiting: ((answer: Answer) => void)[] = [];
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (text: string) => {
    buffered += text;
    for (let newline = buffered.indexOf('\n'); newline >= 0; newline = buffered.indexOf('\n')) {
      const line = buffered.slice(0, newline);
      buffered = buffered.slice(newline + 1);
      waiting.shift()?.(parse(line));
    }
  });
  return {
    ask(command) {
      return new Promise((resolve, reject) => {
        waiting.push(resolve);
        child.stdin.write(`${command}\n`);
        void exited.then((code) => reject(new Error(`application exited with ${code}`)));
      });
    },
    async close() {
      child.stdin.write('quit\n');
      child.stdin.end();
      const code = await exited;
      if (code !== 0) throw new Error(`application exited with ${code}`);
    },
  };
}

/**
 * The write-heavy application of the overhead benchmark, in its own process
 * with its own node:sqlite connection, kept open across phases (as a real
 * service's would be while backupd attaches and detaches). Each transaction
 * inserts `rowsPerTransaction` rows of 200 bytes (the table has an index, so
 * each commit writes at least two b-tree leaves). `synchronous` as the
 * application configures it: FULL fsyncs the WAL at every commit (a commit
 * that returned survives power loss), NORMAL only at checkpoints.
 * Commands on stdin: `run <ms>` answers the number of transactions committed
 * in that many ms and the time spent in transactions that took 1 ms or more
 * (SQLite's busy handler sleeps at least 1 ms when it meets another
 * connection's write lock, so this is where waiting for backupd shows);
 * `quit` closes the connection.
 */
const DURABLE_APPLICATION = `
const { DatabaseSync } = require('node:sqlite');
const { createInterface } = require('node:readline');
const [path, synchronous, rowsText] = process.argv.slice(1);
const rows = Number(rowsText);
const db = new DatabaseSync(path, { timeout: 10000 });
db.exec('PRAGMA journal_mode=WAL; PRAGMA synchronous=' + synchronous);
const insert = db.prepare('INSERT INTO load (at, body) VALUES (?, ?)');
const body = Buffer.alloc(200, 7);
const lines = createInterface({ input: process.stdin });
lines.on('line', (line) => {
  const [command, argument] = line.split(' ');
  if (command === 'quit') { db.close(); lines.close(); return; }
  const end = Date.now() + Number(argument);
  let n = 0;
  let slowMs = 0;
  while (Date.now() < end) {
    const started = performance.now();
    db.exec('BEGIN');
    for (let i = 0; i < rows; i += 1) insert.run(Date.now(), body);
    db.exec('COMMIT');
    const took = performance.now() - started;
    if (took >= 1) slowMs += took;
    n += 1;
  }
  process.stdout.write(n + ' ' + slowMs + '\\n');
});
`;

export interface DurableApplication {
  /** Commits as fast as it can for `durationMs`: the transactions committed, and the ms spent in those that took ≥ 1 ms. */
  run(durationMs: number): Promise<{ transactions: number; slowMs: number }>;
  close(): Promise<void>;
}

export function startDurableApplication(
  path: string,
  synchronous: 'FULL' | 'NORMAL',
  rowsPerTransaction: number,
): DurableApplication {
  const child = startLineChild(
    DURABLE_APPLICATION,
    [path, synchronous, String(rowsPerTransaction)],
    (line) => {
      const [transactions, slowMs] = line.split(' ').map(Number);
      return { transactions: transactions!, slowMs: slowMs! };
    },
  );
  return { run: (durationMs) => child.ask(`run ${durationMs}`), close: () => child.close() };
}

/**
 * backupd's CPU priority in the benchmarks: the daemon's default, or
 * `SQLITE_BENCH_CPU_PRIORITY` (idle, low or normal) to compare.
 */
export const BENCH_CPU_PRIORITY: CpuPriority = (() => {
  const setting = process.env.SQLITE_BENCH_CPU_PRIORITY ?? DEFAULT_CPU_PRIORITY;
  if (!isCpuPriority(setting))
    throw new Error(`SQLITE_BENCH_CPU_PRIORITY must be idle, low or normal, not ${setting}`);
  return setting;
})();

/**
 * Makes this process backupd as `backupd replicate` runs it: lowers its CPU
 * priority to {@link BENCH_CPU_PRIORITY}. Call it after starting the
 * application, which then keeps its own priority (as the application of
 * `--exec` does). Throws when the priority cannot be set, rather than
 * measuring something else.
 */
export function lowerToBackupdPriority(): void {
  const outcome = applyCpuPriority(BENCH_CPU_PRIORITY);
  if (outcome.applied !== BENCH_CPU_PRIORITY)
    throw new Error(`backupd's CPU priority could not be set: ${outcome.note}`);
}

export function createLoadDatabase(path: string): void {
  const db = new DatabaseSync(path);
  db.exec('PRAGMA journal_mode=WAL');
  db.exec('CREATE TABLE IF NOT EXISTS load (id INTEGER PRIMARY KEY, at INTEGER, body BLOB)');
  db.close();
}

/**
 * A MemoryStore that forgets segment bodies: at tens of thousands of commits
 * per second a store holding every byte in this process would measure the
 * garbage collector, not backupd. Uploading costs what it costs (copies,
 * CRC-32); only the retention is skipped.
 */
class DiscardingStore extends MemoryStore {
  override put(
    key: string,
    body: Uint8Array,
    options?: Parameters<MemoryStore['put']>[2],
  ): ReturnType<MemoryStore['put']> {
    return super.put(key, key.includes('/wal/') ? new Uint8Array(1) : body, options);
  }

  override async upload(
    key: string,
    source: Parameters<MemoryStore['upload']>[1],
    options?: Parameters<MemoryStore['upload']>[2],
  ): ReturnType<MemoryStore['upload']> {
    let size = 0;
    if (source instanceof Uint8Array) size = source.byteLength;
    else for await (const chunk of source) size += chunk.byteLength;
    const result = await super.upload(key, new Uint8Array(1), options);
    return { ...result, size };
  }
}

/**
 * backupd attached to `path`: a worker step every `intervalMs` until `stop()`.
 * `ready` resolves once the generation's snapshot is in the bucket (from
 * then on the tap runs in its steady state).
 */
export function attachBackupd(
  path: string,
  intervalMs: number,
  tapOptions: SqliteTapOptions & { captureIntervalMs?: number } = {},
  onStep?: (source: SqliteSource) => void,
): { source: SqliteSource; ready: Promise<void>; stop(): Promise<void> } {
  // In a process of its own, as `backupd replicate`: the daemon's default hold.
  const source = SqliteSource.open({ path, holdCheckpointLock: true, ...tapOptions });
  const worker = new BackupWorker({
    store: new DiscardingStore(),
    prefix: 'bench',
    source,
    clock: new FakeClock(),
    manifestIntervalMs: 0,
  });
  let stopped = false;
  let markReady: () => void = () => undefined;
  const ready = new Promise<void>((resolve) => {
    markReady = resolve;
  });
  const loop = (async () => {
    while (!stopped) {
      await worker.runOnce();
      // The first restore point (the snapshot) is in the bucket: steady state.
      if (!source.tap.snapshotAvailable) markReady();
      onStep?.(source);
      await new Promise((resolve) => setTimeout(resolve, intervalMs));
    }
    await worker.runOnce();
    onStep?.(source);
  })();
  return {
    source,
    ready,
    async stop() {
      stopped = true;
      await loop;
      await source.close();
    },
  };
}

export function percentile(values: readonly number[], fraction: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(fraction * sorted.length) - 1)]!;
}
