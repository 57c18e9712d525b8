/**
 * Replication lag and checkpoint lock time on a live SQLite database: an
 * application (own process) commits a steady 500 transactions/s for 8 s;
 * backupd (SqliteSource + BackupWorker, 1 s interval, MemoryStore) ships.
 * Lag of a commit = the end of the first worker step after which the bucket
 * holds it, minus its commit time. Also the write-lock hold of backupd's own
 * truncating checkpoints (restart threshold lowered to 400 pages so each
 * run has a dozen or so) and the peak WAL size. Target: lag p99 ≤ 1250 ms.
 * backupd runs at the daemon's default CPU priority (`idle`; the application
 * keeps its own), or `SQLITE_BENCH_CPU_PRIORITY`.
 */
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { defineBenchmark } from './harness.ts';
import {
  attachBackupd,
  BENCH_CPU_PRIORITY,
  createLoadDatabase,
  lowerToBackupdPriority,
  type PacedApplication,
  percentile,
  startPacedApplication,
} from './sqlite-tap-common.bench.ts';

const DURATION_MS = 8000;
const RATE = 500;

interface State {
  directory: string;
  run: number;
  application: PacedApplication;
}

export const benchmark = defineBenchmark<State>({
  name: 'sqlite-lag',
  description: `SQLite commit-to-shipped lag p50/p99 at a 1 s interval under 500 tx/s (backupd's CPU priority ${BENCH_CPU_PRIORITY}); checkpoint write-lock hold; peak WAL`,
  runs: 5,
  async setup(context) {
    const application = startPacedApplication();
    lowerToBackupdPriority();
    return { directory: context.tempDir, run: 0, application };
  },
  async teardown(state) {
    await state.application.close();
  },
  async run(state) {
    state.run += 1;
    const path = join(state.directory, `lag-${state.run}.db`);
    createLoadDatabase(path);
    // Shipped commit counts over time: [wall ms at the end of the step, commits in the bucket].
    const shipped: [number, number][] = [];
    const lockHolds: number[] = [];
    let peakWal = 0;
    const backupd = attachBackupd(path, 1000, { truncateCheckpointPages: 400 }, (source) => {
      shipped.push([Date.now(), source.tap.logStart === 0 ? 0 : -1]);
      // Commits in the bucket: everything released from memory (shipped) counts.
      shipped[shipped.length - 1]![1] = source.tap.commits - pendingCommits(source.tap);
      for (const report of source.tap.takeCheckpointReports()) {
        if (report.writeLockHeldMs !== null) lockHolds.push(report.writeLockHeldMs);
      }
      try {
        peakWal = Math.max(peakWal, statSync(`${path}-wal`).size);
      } catch {
        // No WAL file at this instant.
      }
    });
    let times: number[];
    try {
      times = await state.application.run(path, DURATION_MS, RATE);
      // Let the last commits ship.
      await new Promise((resolve) => setTimeout(resolve, 1500));
    } finally {
      await backupd.stop();
    }
    const lags: number[] = [];
    let step = 0;
    for (let commit = 1; commit <= times.length; commit += 1) {
      while (step < shipped.length && shipped[step]![1] < commit) step += 1;
      if (step === shipped.length) throw new Error(`commit ${commit} was never shipped`);
      lags.push(shipped[step]![0] - times[commit - 1]!);
    }
    return {
      lagP50: { value: percentile(lags, 0.5), unit: 'ms', higherIsBetter: false },
      lagP99: { value: percentile(lags, 0.99), unit: 'ms', higherIsBetter: false },
      checkpointLockP99: {
        value: percentile(lockHolds, 0.99),
        unit: 'ms',
        higherIsBetter: false,
      },
      checkpointLockMax: { value: Math.max(...lockHolds), unit: 'ms', higherIsBetter: false },
      checkpointsLocked: { value: lockHolds.length, unit: 'count' },
      peakWalMiB: { value: peakWal / 1048576, unit: 'MiB', higherIsBetter: false },
      committed: { value: times.length, unit: 'tx' },
    };
  },
});

/** Commits captured but not yet released (not yet in the bucket). */
function pendingCommits(tap: {
  readLog(start: number, end: number): { commits: number } | null;
  logStart: number;
  logLength: number;
}): number {
  return tap.readLog(tap.logStart, tap.logLength)?.commits ?? 0;
}
