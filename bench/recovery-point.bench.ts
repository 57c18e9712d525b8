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
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { setTimeout as sleep } from 'node:timers/promises';
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
  startWriter,
  type Traffic,
} from './s3-processes.ts';

const TRIALS = Number(process.env.RECOVERY_POINT_TRIALS ?? '10');
const RATE = Number(process.env.RECOVERY_POINT_RATE ?? '50');
const PHASE_SECONDS = Number(process.env.RECOVERY_POINT_PHASE_SECONDS ?? '60');

interface State {
  readonly started: StartedTestServers;
  readonly server: Server;
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
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
  const target = s3Url(state.server, `recovery-point-${randomBytes(6).toString('hex')}`);
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
    const { started, server } = await startVersitygw((line) => context.log(line));
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
    const target = s3Url(state.server, `recovery-point-requests-${randomBytes(6).toString('hex')}`);
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
