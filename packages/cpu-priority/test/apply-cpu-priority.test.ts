/**
 * `applyCpuPriority`, read back from the kernel (`/proc`), never from what
 * the code says it did. Each case runs in a child process (lowering is
 * one-way, so never in the test's own): `idle` puts every thread, and a
 * thread started after, under SCHED_IDLE; `low` gives them nice 19; `normal`
 * leaves them alone; without `chrt` it falls back to nice 19 and says why.
 * (backupd's own test, apps/backupd/test/cpu-priority.test.ts, checks that
 * `backupd replicate` applies it and that its `--exec` application keeps
 * its own priority.)
 */
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { CPU_PRIORITIES, DEFAULT_CPU_PRIORITY, isCpuPriority } from '../src/index.ts';

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

describe('isCpuPriority', () => {
  it('accepts exactly the three priorities', () => {
    expect(CPU_PRIORITIES).toEqual(['idle', 'low', 'normal']);
    for (const priority of CPU_PRIORITIES) expect(isCpuPriority(priority)).toBe(true);
    for (const other of ['', 'IDLE', 'high', ' low', 19, null, undefined, ['idle']])
      expect(isCpuPriority(other), String(other)).toBe(false);
    expect(DEFAULT_CPU_PRIORITY).toBe('idle');
  });
});
