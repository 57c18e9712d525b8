/**
 * backupd's CPU priority, read back from the kernel (`/proc`), never from
 * what the code says it did:
 * - `applyCpuPriority` in a child process (lowering is one-way, so never in
 *   the test's own): `idle` puts every thread, and a thread started after,
 *   under SCHED_IDLE; `low` gives them nice 19; `normal` leaves them alone;
 *   without `chrt` it falls back to nice 19 and says why;
 * - `backupd replicate` at its default runs under SCHED_IDLE and logs it,
 *   while the application it started with `--exec` keeps the priority it was
 *   started with.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { baseEnv, startBackupd, waitFor } from './helpers/cli.ts';

const SCHED_OTHER = 0;
const SCHED_IDLE = 5;

interface ThreadPriority {
  policy: number;
  nice: number;
}

/** Policy (field 41) and nice (field 19) of a `/proc/.../stat` line. */
function parseStat(stat: string): ThreadPriority {
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return { policy: Number(fields[41 - 3]), nice: Number(fields[19 - 3]) };
}

function threadsOf(pid: number | 'self'): ThreadPriority[] {
  return readdirSync(`/proc/${pid}/task`).map((id) =>
    parseStat(readFileSync(`/proc/${pid}/task/${id}/stat`, 'utf8')),
  );
}

const MODULE = pathToFileURL(join(import.meta.dirname, '../src/cpu-priority.ts')).href;

/**
 * Runs `applyCpuPriority(priority)` in a fresh Node process and reports what
 * the kernel then says of its threads, and of a worker thread started after.
 */
function applyInChild(priority: string, chrt?: string) {
  const program = `
const { readdirSync, readFileSync } = require('node:fs');
const { Worker } = require('node:worker_threads');
const parse = ${parseStat.toString()};
import(${JSON.stringify(MODULE)}).then(async (m) => {
  const outcome = m.applyCpuPriority(${JSON.stringify(priority)}, ${chrt ? JSON.stringify({ chrt }) : '{}'});
  const threads = readdirSync('/proc/self/task').map((id) => parse(readFileSync('/proc/self/task/' + id + '/stat', 'utf8')));
  const later = await new Promise((resolve, reject) => {
    const worker = new Worker("require('node:worker_threads').parentPort.postMessage(require('node:fs').readFileSync('/proc/thread-self/stat', 'utf8'))", { eval: true });
    worker.once('message', (stat) => { resolve(parse(stat)); worker.terminate(); });
    worker.once('error', reject);
  });
  process.stdout.write(JSON.stringify({ outcome, threads, later }));
});`;
  const result = spawnSync(process.execPath, ['-e', program], {
    encoding: 'utf8',
    timeout: 30_000,
  });
  expect(result.status, result.stderr).toBe(0);
  return JSON.parse(result.stdout) as {
    outcome: { applied: string; note?: string };
    threads: ThreadPriority[];
    later: ThreadPriority;
  };
}

describe.runIf(process.platform === 'linux')('applyCpuPriority', () => {
  it('idle: every thread, and one started after, runs under SCHED_IDLE', () => {
    const { outcome, threads, later } = applyInChild('idle');
    expect(outcome).toEqual({ applied: 'idle' });
    expect(threads.length).toBeGreaterThan(1);
    for (const thread of threads) expect(thread.policy).toBe(SCHED_IDLE);
    expect(later.policy).toBe(SCHED_IDLE);
  });

  it('low: every thread, and one started after, at nice 19 under the normal policy', () => {
    const { outcome, threads, later } = applyInChild('low');
    expect(outcome).toEqual({ applied: 'low' });
    expect(threads.length).toBeGreaterThan(1);
    for (const thread of threads) expect(thread).toEqual({ policy: SCHED_OTHER, nice: 19 });
    expect(later).toEqual({ policy: SCHED_OTHER, nice: 19 });
  });

  it('normal: leaves the threads as they were started', () => {
    const own = threadsOf('self')[0]!;
    const { outcome, threads, later } = applyInChild('normal');
    expect(outcome).toEqual({ applied: 'normal' });
    for (const thread of threads) expect(thread).toEqual(own);
    expect(later).toEqual(own);
  });

  it('idle without chrt: falls back to nice 19 and says why', () => {
    const { outcome, threads } = applyInChild('idle', '/nonexistent/chrt');
    expect(outcome.applied).toBe('low');
    expect(outcome.note).toMatch(
      /\/nonexistent\/chrt could not set SCHED_IDLE \(ENOENT\); running at nice 19/,
    );
    for (const thread of threads) expect(thread).toEqual({ policy: SCHED_OTHER, nice: 19 });
  });
});

describe.runIf(process.platform === 'linux')('backupd replicate at its default priority', () => {
  const directory = mkdtempSync(join(tmpdir(), 'backupd-priority-'));
  afterAll(() => rmSync(directory, { recursive: true, force: true }));

  it('runs under SCHED_IDLE and logs it; the --exec application keeps its own priority', async () => {
    const database = join(directory, 'app.db');
    const db = new DatabaseSync(database);
    db.exec('PRAGMA journal_mode=WAL; CREATE TABLE t (x INTEGER);');
    db.close();
    const report = join(directory, 'application-priority');
    const program = `require('node:fs').writeFileSync(${JSON.stringify(report)}, require('node:fs').readFileSync('/proc/self/stat', 'utf8')); setInterval(() => {}, 1000);`;
    const app = `${JSON.stringify(process.execPath)} -e "eval(Buffer.from('${Buffer.from(program).toString('base64')}', 'base64').toString())"`;
    const own = threadsOf('self')[0]!;
    const backupd = startBackupd(
      ['replicate', database, pathToFileURL(join(directory, 'backups')).href, '--exec', app],
      // The helpers' environment runs backupd at normal priority; this test wants the default.
      { env: baseEnv({ BACKUPD_CPU_PRIORITY: undefined, BACKUPD_INTERVAL: '200ms' }) },
    );
    try {
      await waitFor('the priority to be logged', () => backupd.stderr.includes('"cpu-priority"'), {
        describe: () => backupd.describe(),
      });
      const line = backupd.stderr.split('\n').find((text) => text.includes('"cpu-priority"'))!;
      expect(JSON.parse(line)).toMatchObject({ event: 'cpu-priority', applied: 'idle' });
      const threads = threadsOf(backupd.child.pid!);
      expect(threads.length).toBeGreaterThan(1);
      for (const thread of threads) expect(thread.policy, backupd.describe()).toBe(SCHED_IDLE);
      await waitFor('the application to report', () => existsSync(report));
      await waitFor('the report to be written', () => readFileSync(report, 'utf8').includes(')'));
      expect(parseStat(readFileSync(report, 'utf8'))).toEqual(own);
    } finally {
      await backupd.stop('SIGTERM');
    }
  });
});
