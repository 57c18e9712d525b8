/**
 * `backupd restore` of the latest state from the local S3 server (versitygw),
 * end to end through the command, at several database sizes built by a
 * realistic load: the database is filled (1,000-byte random rows), shipped by
 * `backupd replicate` at the defaults, then updated by a separate process
 * (`RESTORE_SIZES_UPDATES_PER_SECOND`, 100, random rows) for
 * `RESTORE_SIZES_LOAD_SECONDS` (30) while it replicates; replicate then
 * stops gracefully. Each run restores into a fresh path: wall seconds of the
 * command, MB/s of the database restored, bytes downloaded and requests sent
 * (counted by a proxy in front of the server). `RESTORE_SIZES_MB` picks the
 * sizes (default `2,15,200,1024`, in MiB). Every restore is checked: the row
 * count and `PRAGMA integrity_check`.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { setTimeout as sleep } from 'node:timers/promises';
import { type InterceptingProxy, startInterceptingProxy } from '@x/test-faults';
import type { StartedTestServers } from '@x/test-servers/harness';
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

const SIZES_MIB = (process.env.RESTORE_SIZES_MB ?? '2,15,200,1024').split(',').map(Number);
const LOAD_SECONDS = Number(process.env.RESTORE_SIZES_LOAD_SECONDS ?? '30');
const UPDATES_PER_SECOND = Number(process.env.RESTORE_SIZES_UPDATES_PER_SECOND ?? '100');
const ROW_BYTES = 1000;

/** Updates a random row at `rate` per second until killed. */
const UPDATER_PROGRAM = `
const { DatabaseSync } = require('node:sqlite');
const { randomBytes } = require('node:crypto');
const [path, rate, rows] = process.argv.slice(1);
const db = new DatabaseSync(path);
db.exec('PRAGMA busy_timeout = 10000;');
const update = db.prepare('UPDATE t SET body = ? WHERE id = ?');
const every = 1000 / Number(rate);
const started = performance.now();
let n = 0;
const tick = () => {
  n += 1;
  update.run(randomBytes(${ROW_BYTES}), 1 + Math.floor(Math.random() * Number(rows)));
  setTimeout(tick, Math.max(0, started + n * every - performance.now()));
};
tick();
`;

interface Built {
  readonly mib: number;
  readonly url: string;
  readonly rows: number;
  readonly databaseBytes: number;
}

interface State {
  readonly started: StartedTestServers;
  readonly proxy: InterceptingProxy;
  readonly requests: { count: number };
  readonly server: Server;
  readonly built: readonly Built[];
  run: number;
}

/** Runs `node args` to its exit, with its output. */
function runCommand(
  args: readonly string[],
  server: Server,
): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { env: env(server) });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk;
    });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
    });
    child.once('error', reject);
    child.once('close', (status) => resolve({ status, stdout, stderr }));
  });
}

/** A database of about `mib` MiB of random rows, in WAL mode, with `rows` rows. */
function fillDatabase(path: string, mib: number): number {
  const rows = Math.max(1, Math.floor((mib * 2 ** 20) / (ROW_BYTES + 60)));
  const db = new DatabaseSync(path);
  db.exec('PRAGMA journal_mode = WAL; PRAGMA synchronous = OFF;');
  db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, body BLOB NOT NULL)');
  const insert = db.prepare('INSERT INTO t (body) VALUES (?)');
  for (let done = 0; done < rows; done += 10_000) {
    db.exec('BEGIN');
    for (let i = done; i < Math.min(rows, done + 10_000); i += 1)
      insert.run(randomBytes(ROW_BYTES));
    db.exec('COMMIT');
  }
  db.exec('PRAGMA wal_checkpoint(TRUNCATE)');
  db.close();
  return rows;
}

/** Fills, ships and loads one database; returns where its backup is. */
async function build(directory: string, server: Server, mib: number, log: (m: string) => void) {
  const database = join(directory, `db-${mib}.db`);
  const rows = fillDatabase(database, mib);
  const url = s3Url(server, `restore-sizes-${mib}-${randomBytes(4).toString('hex')}`);
  const replicate = new Replicate(database, url, server);
  try {
    await replicate.secondsTo('backup.restore_point_written', 600_000);
    log(`${mib} MiB shipped; ${LOAD_SECONDS} s of ${UPDATES_PER_SECOND} updates/s`);
    const updater = spawn(
      process.execPath,
      ['-e', UPDATER_PROGRAM, database, String(UPDATES_PER_SECOND), String(rows)],
      { stdio: 'ignore' },
    );
    await sleep(LOAD_SECONDS * 1000);
    await killProcess(updater);
    await sleep(3000);
  } finally {
    await replicate.stop();
  }
  return { mib, url, rows, databaseBytes: statSync(database).size };
}

export const benchmark = defineBenchmark<State>({
  name: 'restore-sizes',
  description: `backupd restore of the latest state from the local S3 server (through a counting proxy) of ${SIZES_MIB.join(', ')} MiB SQLite databases, each shipped then updated ${UPDATES_PER_SECOND}/s for ${LOAD_SECONDS} s while replicating`,
  runs: 5,
  async setup(context) {
    const { started, server: found } = await startVersitygw((line) => context.log(line));
    const requests = { count: 0 };
    const proxy = await startInterceptingProxy({
      target: found.endpoint,
      intercept() {
        requests.count += 1;
        return undefined;
      },
    });
    const server = { ...found, endpoint: proxy.url };
    const built: Built[] = [];
    for (const mib of SIZES_MIB) built.push(await build(context.tempDir, server, mib, context.log));
    return { started, proxy, requests, server, built, run: 0 };
  },
  async run(state, context) {
    state.run += 1;
    const result: Record<string, Measurement> = {};
    for (const { mib, url, rows, databaseBytes } of state.built) {
      const target = join(context.tempDir, `restored-${state.run}`, `db-${mib}.db`);
      mkdirSync(join(target, '..'), { recursive: true });
      const requestsBefore = state.requests.count;
      const startedAt = performance.now();
      // Not spawnSync: the counting proxy runs on this process's event loop.
      const restored = await runCommand([BACKUPD, 'restore', url, target, '--json'], state.server);
      const seconds = (performance.now() - startedAt) / 1000;
      if (restored.status !== 0)
        throw new Error(`restore of ${mib} MiB failed: ${restored.stderr}`);
      const requests = state.requests.count - requestsBefore;
      const report = JSON.parse(restored.stdout) as { bytes: number };
      const check = new DatabaseSync(target, { readOnly: true });
      const integrity = check.prepare('PRAGMA integrity_check').get() as {
        integrity_check: string;
      };
      const count = (check.prepare('SELECT count(*) AS n FROM t').get() as { n: number }).n;
      check.close();
      if (integrity.integrity_check !== 'ok' || count !== rows)
        throw new Error(
          `restored ${mib} MiB: integrity ${integrity.integrity_check}, ${count} rows`,
        );
      rmSync(join(target, '..'), { recursive: true, force: true });
      result[`${mib} MiB: seconds`] = { value: seconds, unit: 's', higherIsBetter: false };
      result[`${mib} MiB: MB/s`] = { value: databaseBytes / 1e6 / seconds, unit: 'MB/s' };
      result[`${mib} MiB: downloaded`] = {
        value: report.bytes / 1e6,
        unit: 'MB',
        higherIsBetter: false,
      };
      result[`${mib} MiB: requests`] = { value: requests, unit: 'requests', higherIsBetter: false };
    }
    return result;
  },
  async teardown(state) {
    await state.proxy.close();
    await state.started.stop();
  },
});
