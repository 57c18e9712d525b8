/**
 * Application overhead of backupd on a live SQLite database: transactions
 * per second of a write-heavy application with and without backupd attached.
 *
 * The application runs in its own process with its own node:sqlite
 * connection, open for the whole benchmark: transactions of 4 rows of 200
 * bytes into a table with an index, back to back, `synchronous=FULL` (every
 * commit fsyncs the WAL, so a commit that returned survives a power loss: the
 * setting of an application that cares about its data enough to back it up
 * continuously), SQLite's default auto-checkpoint, busy_timeout 10 s.
 * `SQLITE_BENCH_SYNCHRONOUS=NORMAL` measures the no-fsync extreme instead.
 *
 * backupd (SqliteSource under the real BackupWorker stepping every 1 s,
 * default tap settings, shipping to an in-memory store that drops WAL bodies)
 * runs in this process, at the daemon's default CPU priority (`idle`, applied
 * as `backupd replicate` applies it, after the application has started;
 * `SQLITE_BENCH_CPU_PRIORITY=normal` measures without it). Each run is five
 * cycles of four phases of 1 s in the order without, with, with, without
 * (so a drift of the machine's load within a cycle cancels out, and short
 * phases average over bursts of other processes); backupd attaches before
 * each "with" phase and detaches after it, and is measured after its first
 * snapshot reached the bucket.
 * Ratio = with / without over the run. Target: median ratio ≥ 97 %.
 */
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { defineBenchmark } from './harness.ts';
import {
  attachBackupd,
  BENCH_CPU_PRIORITY,
  createLoadDatabase,
  type DurableApplication,
  lowerToBackupdPriority,
  startDurableApplication,
} from './sqlite-tap-common.bench.ts';

const PHASE_MS = Number(process.env.SQLITE_BENCH_PHASE_MS ?? 1000);
const CYCLES = 5;
/** Tap options to compare settings, e.g. `SQLITE_BENCH_TAP='{"captureIntervalMs":1000}'`. */
const TAP_OPTIONS = JSON.parse(process.env.SQLITE_BENCH_TAP ?? '{}') as Parameters<
  typeof attachBackupd
>[2];
const ROWS_PER_TRANSACTION = 4;
const SYNCHRONOUS = process.env.SQLITE_BENCH_SYNCHRONOUS === 'NORMAL' ? 'NORMAL' : 'FULL';

interface State {
  path: string;
  application: DurableApplication;
}

export const benchmark = defineBenchmark<State>({
  name: 'sqlite-overhead',
  description: `SQLite write transactions/s (4 rows, synchronous=${SYNCHRONOUS}) without and with backupd attached (CPU priority ${BENCH_CPU_PRIORITY}), ${CYCLES} × phases without/with/with/without of ${PHASE_MS} ms; ratio with/without`,
  runs: 5,
  async setup(context) {
    const path = join(context.tempDir, 'load.db');
    createLoadDatabase(path);
    const db = new DatabaseSync(path);
    db.exec('CREATE INDEX IF NOT EXISTS load_at ON load (at)');
    db.close();
    const application = startDurableApplication(path, SYNCHRONOUS, ROWS_PER_TRANSACTION);
    lowerToBackupdPriority();
    // Warm up: the connection, the page cache, the WAL file's first growth,
    // and backupd's code (a daemon runs for days; its first second, spent
    // compiling, is not its steady state).
    await application.run(500);
    const backupd = attachBackupd(path, 1000, TAP_OPTIONS);
    await backupd.ready;
    await application.run(2 * PHASE_MS);
    await backupd.stop();
    return { path, application };
  },
  async run(state) {
    const withoutPhase = async () => {
      const result = await state.application.run(PHASE_MS);
      withoutSlowMs += result.slowMs;
      return result.transactions;
    };
    const withPhase = async () => {
      const backupd = attachBackupd(state.path, 1000, TAP_OPTIONS);
      try {
        // Steady state: attaching (the first snapshot) is not what is measured.
        await backupd.ready;
        backupd.source.tap.takeCheckpointReports();
        const cpuBefore = process.cpuUsage();
        const result = await state.application.run(PHASE_MS);
        withSlowMs += result.slowMs;
        const cpu = process.cpuUsage(cpuBefore);
        backupdCpuMicroseconds += cpu.user + cpu.system;
        for (const report of backupd.source.tap.takeCheckpointReports()) {
          if (report.mode === 'truncate') restarts += 1;
          lockHeldMs += report.writeLockHeldMs ?? 0;
        }
        return result.transactions;
      } finally {
        await backupd.stop();
      }
    };
    let withoutSlowMs = 0;
    let withSlowMs = 0;
    let restarts = 0;
    let backupdCpuMicroseconds = 0;
    let lockHeldMs = 0;
    let withoutCount = 0;
    let withCount = 0;
    for (let cycle = 0; cycle < CYCLES; cycle += 1) {
      withoutCount += await withoutPhase();
      withCount += await withPhase();
      withCount += await withPhase();
      withoutCount += await withoutPhase();
    }
    const seconds = (2 * CYCLES * PHASE_MS) / 1000;
    const without = withoutCount / seconds;
    const attached = withCount / seconds;
    return {
      withoutBackupd: { value: without, unit: 'tx/s' },
      withBackupd: { value: attached, unit: 'tx/s' },
      ratio: { value: (attached / without) * 100, unit: '%' },
      // Where the attached cost can come from: backupd's restarts, and the
      // time it held the write lock (the application cannot commit then).
      // Time the application spent in transactions of ≥ 1 ms (fsync outliers,
      // the busy handler's sleeps on a held write lock), without and with.
      slowWithout: {
        value: (withoutSlowMs / (seconds * 1000)) * 100,
        unit: '% of time',
        higherIsBetter: false,
      },
      slowWith: {
        value: (withSlowMs / (seconds * 1000)) * 100,
        unit: '% of time',
        higherIsBetter: false,
      },
      backupdCpu: {
        value: (backupdCpuMicroseconds / 1e6 / seconds) * 100,
        unit: '% of a core',
        higherIsBetter: false,
      },
      restartsPerSecond: { value: restarts / seconds, unit: '/s', higherIsBetter: false },
      writeLockHeld: {
        value: (lockHeldMs / (seconds * 1000)) * 100,
        unit: '% of time',
        higherIsBetter: false,
      },
    };
  },
  async teardown(state) {
    await state.application.close();
  },
});
