/**
 * Crashes and restarts end to end, through the `backupd` command and real
 * processes: a writer process commits seeded random transactions (1–20 row
 * inserts, updates and deletes, now and then an explicit
 * `PRAGMA wal_checkpoint(...)`) and journals every commit, fsynced
 * (helpers/crash-writer.ts); `backupd replicate` is SIGKILLed at random
 * moments and restarted, several times, first to a `file://` directory,
 * then to the local S3 server. What must hold:
 *
 * - after every kill, a restore of the latest state is a state the writer
 *   committed, holding at least every commit the killed process had shipped
 *   (every shipped commit is restorable, restore point or not);
 * - after the final graceful stop, the latest restore is the writer's final
 *   state exactly;
 * - restores by `--time` at every sample point (at least 10, some right after
 *   a restart) are the writer's state at that time, and say the time of what
 *   they restored, at or before the time asked for.
 *
 * Sample points have one right answer: the writer pauses, the harness waits
 * until backupd reports everything captured as shipped (at an evaluation
 * well after the pause began: the capture polls every 50 ms), takes the
 * time, then lets the writer go on. backupd records a commit's time when it
 * first sees it, so the paused state was seen before the sample time and
 * every later commit after it. Kills never fall inside a pause.
 *
 * Bounded by counts (kill cycles, samples), not by time; waits have generous
 * timeouts only so a hang fails with the processes' output. The seed is in
 * CRASH_RESTART_SEED (to replay a run) and printed when a case fails.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { randomPrefix } from '@x/test-servers';
import { describe, expect, onTestFailed, test } from 'vitest';
import {
  baseEnv,
  type Env,
  listeningUrl,
  metricValue,
  RunningProcess,
  runCli,
  s3Env,
  s3Url,
  startBackupd,
  suiteWorkspace,
  waitFor,
} from './helpers/cli.ts';
import {
  crashStateHash,
  crashStateSeq,
  type JournalEntry,
  journalStateAt,
  readJournal,
  seededRandom,
} from './helpers/crash-journal.ts';
import { missingReason, s3Server } from './helpers/servers.ts';

const CRASH_WRITER = fileURLToPath(new URL('./helpers/crash-writer.ts', import.meta.url));

/** Kill-and-restart cycles before the final run that ends with a graceful stop. */
const KILL_CYCLES = 6;
/** Sample points restored by `--time`, at least. */
const MIN_SAMPLES = 12;
/** backupd's WAL interval here (shorter than the 1 s default to keep the case short). */
const INTERVAL_MS = 300;

const SEED = Number(process.env.CRASH_RESTART_SEED ?? Math.floor(Math.random() * 2 ** 31));

/** The writer process and its stdin/stdout protocol (see crash-writer.ts). */
class Writer {
  readonly process: RunningProcess;
  readonly journalPath: string;

  constructor(databasePath: string, journalPath: string, seed: number) {
    this.journalPath = journalPath;
    this.process = new RunningProcess(
      'crash writer',
      process.execPath,
      [CRASH_WRITER, databasePath, journalPath, String(seed), '20'],
      { env: baseEnv(), stdin: true },
    );
  }

  journal(): JournalEntry[] {
    try {
      return readJournal(this.journalPath);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw error;
    }
  }

  async #command(command: string, answer: string): Promise<number> {
    const before = this.process.stdout.length;
    this.process.child.stdin!.write(`${command}\n`);
    const line = await waitFor(
      `the writer to answer ${command}`,
      () => new RegExp(`^${answer} (\\d+)$`, 'm').exec(this.process.stdout.slice(before))?.[1],
      { intervalMs: 10, describe: () => this.process.describe() },
    );
    return Number(line);
  }

  /** Stops committing after the transaction under way: the last commit's number. */
  pause(): Promise<number> {
    return this.#command('pause', 'paused');
  }

  resume(): Promise<number> {
    return this.#command('resume', 'resumed');
  }

  async stop(): Promise<number> {
    const seq = await this.#command('stop', 'stopped');
    const exit = await this.process.exited;
    expect(exit, this.process.describe()).toEqual({ code: 0, signal: null });
    return seq;
  }

  /** Waits until the writer has committed past `seq`. */
  async committedPast(seq: number): Promise<void> {
    await waitFor(
      `the writer to commit past ${seq}`,
      () => (this.journal().at(-1)?.seq ?? -1) > seq,
      {
        intervalMs: 20,
        describe: () => this.process.describe(),
      },
    );
  }
}

/** The pids whose parent is `pid` (Linux /proc; empty elsewhere). */
function childPids(pid: number): number[] {
  let entries: string[];
  try {
    entries = readdirSync('/proc').filter((name) => /^\d+$/.test(name));
  } catch {
    return [];
  }
  return entries.flatMap((name) => {
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      // Field 4 (ppid) follows the command in parentheses, which may hold spaces.
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      return ppid === pid ? [Number(name)] : [];
    } catch {
      return [];
    }
  });
}

interface Sample {
  /** The sample time, Unix ms. */
  readonly time: number;
  /** The writer's last commit before it (it was paused around the time). */
  readonly seq: number;
  /** Whether it was taken in the first moments after a restart (no commit since). */
  readonly afterRestart: boolean;
}

interface RestoredState {
  readonly seq: number | undefined;
  readonly hash: string;
  readonly integrity: string;
  /** What `restore --json` said. */
  readonly json: Record<string, unknown>;
  readonly stderr: string;
}

/** `commitTime` of `restore --json` as Unix ms (a number of ms or an RFC 3339 string), if given. */
function reportedCommitTime(json: Record<string, unknown>): number | undefined {
  const value = json.commitTime;
  if (typeof value === 'number') return value;
  if (typeof value === 'string') return Date.parse(value);
  return undefined;
}

async function scenario(options: {
  readonly name: string;
  readonly directory: string;
  readonly running: RunningProcess[];
  readonly url: string;
  readonly env: Env;
  readonly seed: number;
}): Promise<void> {
  const { directory, running, url, seed } = options;
  onTestFailed(() => {
    console.error(
      `crash-restart ${options.name}: seed ${seed} (CRASH_RESTART_SEED=${seed} replays it)`,
    );
  });
  const random = seededRandom(seed);
  const env: Env = {
    ...options.env,
    BACKUPD_INTERVAL: `${INTERVAL_MS}ms`,
    // Short, so that the restarts are bounded also where a restart waits out
    // its own dead lease; the test asserts no time.
    BACKUPD_LEASE_TTL: '4s',
    BACKUPD_SHUTDOWN_GRACE: '20s',
    // Every sample is asserted exact to the commit, which only an uncompacted
    // log gives for samples older than a 30 s window; the soak runs
    // compaction under kills and checks its granularity.
    BACKUPD_COMPACTION: 'off',
  };
  const databasePath = join(directory, `${options.name}.db`);
  const writer = new Writer(
    databasePath,
    join(directory, `${options.name}.journal`),
    seed ^ 0x5eed,
  );
  running.push(writer.process);
  await writer.committedPast(3);

  let restores = 0;
  /** A restore's result; with `soft`, a failed restore is a soft failure and `undefined`. */
  async function restore(extra: readonly string[]): Promise<RestoredState>;
  async function restore(extra: readonly string[], soft: true): Promise<RestoredState | undefined>;
  async function restore(extra: readonly string[], soft = false) {
    restores += 1;
    const target = join(directory, `${options.name}-restore-${restores}`, 'app.db');
    const result = await runCli(['restore', url, target, ...extra, '--json'], {
      env,
      timeoutMs: 60_000,
    });
    const what = `restore ${extra.join(' ')}\n${result.stdout}\n${result.stderr}`;
    if (soft && result.code !== 0) {
      expect.soft(result.code, what).toBe(0);
      return undefined;
    }
    expect(result.code, what).toBe(0);
    const database = new DatabaseSync(target, { readOnly: true });
    try {
      const integrity = (
        database.prepare('PRAGMA integrity_check').all() as { integrity_check: string }[]
      )
        .map((row) => row.integrity_check)
        .join('; ');
      return {
        seq: crashStateSeq(database),
        hash: crashStateHash(database),
        integrity,
        json: JSON.parse(result.stdout) as Record<string, unknown>,
        stderr: result.stderr,
      };
    } finally {
      database.close();
    }
  }

  const metrics = async (base: string) => {
    const response = await fetch(`${base}/metrics`, { signal: AbortSignal.timeout(5000) });
    const text = await response.text();
    return {
      leaseHeld: metricValue(text, 'backupd_lease_held'),
      unshippedBytes: metricValue(text, 'backupd_unshipped_bytes'),
      lastSuccessSeconds: metricValue(text, 'backupd_last_success_timestamp_seconds'),
    };
  };

  /**
   * Waits until `backupd` has shipped everything it captured, as of an
   * evaluation that began at least a second after `since` (the metric is in
   * whole seconds, so its value must be past `since` + 1 s).
   */
  const shippedSince = async (backupd: RunningProcess, base: string, since: number) => {
    await waitFor(
      'backupd to ship everything the writer committed',
      async () => {
        const seen = await metrics(base);
        return (
          seen.leaseHeld === 1 &&
          seen.unshippedBytes === 0 &&
          (seen.lastSuccessSeconds ?? 0) * 1000 >= since + 1000
        );
      },
      { timeoutMs: 60_000, intervalMs: 100, describe: () => backupd.describe() },
    );
  };

  const samples: Sample[] = [];
  /** The newest writer commit a running backupd was seen to have shipped. */
  let shipped = 0;

  /** Pauses the writer, waits until its state is shipped, takes the time, lets it go on. */
  const takeSample = async (backupd: RunningProcess, base: string, afterRestart: boolean) => {
    const seq = await writer.pause();
    const pausedAt = Date.now();
    await shippedSince(backupd, base, pausedAt);
    const time = Date.now();
    samples.push({ time, seq, afterRestart });
    shipped = Math.max(shipped, seq);
    // Out of the sample time's millisecond before anything commits.
    await sleep(5);
    await writer.resume();
    await writer.committedPast(seq);
  };

  const start = (label: string) => {
    const backupd = startBackupd(['replicate', databasePath, url, '--listen', '127.0.0.1:0'], {
      env,
      label,
    });
    running.push(backupd);
    return backupd;
  };

  /** SIGKILL to the backupd process itself (it runs no child processes to leave behind). */
  const kill = async (backupd: RunningProcess) => {
    const pid = backupd.child.pid!;
    expect(childPids(pid), 'backupd replicate runs in one process').toEqual([]);
    backupd.child.kill('SIGKILL');
    const exit = await backupd.exited;
    expect(exit.signal, backupd.describe()).toBe('SIGKILL');
    expect(() => process.kill(pid, 0)).toThrow();
  };

  for (let cycle = 0; cycle < KILL_CYCLES; cycle += 1) {
    const backupd = start(`backupd (cycle ${cycle + 1})`);
    // Some cycles are killed at once, at a random moment of the start (the
    // lease, the snapshot, the first segments); the others after samples.
    const early = cycle % 3 === 1 || random() < 0.2;
    if (early) {
      await sleep(Math.floor(random() * 2500));
    } else {
      const base = await listeningUrl(backupd, 60_000);
      const count = 1 + Math.floor(random() * 3);
      for (let index = 0; index < count; index += 1) {
        // The first sample of a cycle sometimes right after the restart,
        // before the writer commits again: the state is in the new
        // generation's snapshot, not in any commit record of it.
        const now = index === 0 && random() < 0.5;
        if (!now) await sleep(Math.floor(random() * 1000));
        await takeSample(backupd, base, now);
      }
      await sleep(Math.floor(random() * 1500));
    }
    await kill(backupd);

    // With backupd down: the latest state restorable now holds every commit
    // it was seen to ship, and is one the writer committed.
    const latest = await restore([]);
    expect.soft(latest.integrity).toBe('ok');
    const entry = latest.seq === undefined ? undefined : writer.journal()[latest.seq];
    expect
      .soft(latest.hash, `after kill ${cycle + 1}: a state the writer committed`)
      .toBe(entry?.hash);
    expect
      .soft(latest.seq ?? -1, `after kill ${cycle + 1}: every shipped commit restorable`)
      .toBeGreaterThanOrEqual(shipped);
  }

  // The final run: samples, the writer stops, backupd ships the rest and
  // stops gracefully.
  const last = start('backupd (final)');
  const base = await listeningUrl(last, 60_000);
  const finalSamples = Math.max(2, MIN_SAMPLES - samples.length);
  for (let index = 0; index < finalSamples; index += 1) {
    await sleep(Math.floor(random() * 800));
    await takeSample(last, base, false);
  }
  const finalSeq = await writer.stop();
  await shippedSince(last, base, Date.now());
  const stopped = await last.stop('SIGTERM', 30_000);
  expect(stopped, last.describe()).toEqual({ code: 0, signal: null });

  const journal = writer.journal();
  expect(journal.at(-1)?.seq).toBe(finalSeq);
  expect(new Set(journal.map((entry) => entry.hash)).size).toBe(journal.length);

  // The latest state after the graceful stop is the writer's final state.
  const final = await restore([]);
  expect(final.integrity).toBe('ok');
  expect(final.seq).toBe(finalSeq);
  expect(final.hash).toBe(journal.at(-1)!.hash);
  expect
    .soft(reportedCommitTime(final.json), 'restore --json names the commit time')
    .toBeTypeOf('number');

  // Restores by time: the writer's state at each sample time.
  expect(samples.length).toBeGreaterThanOrEqual(MIN_SAMPLES);
  const results: string[] = [];
  for (const sample of samples) {
    const expected = journalStateAt(journal, sample.time);
    expect(expected?.seq).toBe(sample.seq); // the journal agrees with the pause
    const restored = await restore(['--time', new Date(sample.time).toISOString()], true);
    const at = `--time ${new Date(sample.time).toISOString()} (writer commit ${sample.seq}${sample.afterRestart ? ', right after a restart' : ''})`;
    results.push(`${at}: ${restored ? `restored commit ${restored.seq}` : 'restore failed'}`);
    if (restored === undefined) continue;
    expect.soft(restored.integrity, at).toBe('ok');
    expect.soft(restored.seq, at).toBe(sample.seq);
    expect.soft(restored.hash, at).toBe(expected!.hash);
    const commitTime = reportedCommitTime(restored.json);
    expect.soft(commitTime, `${at}: restore --json names the commit time`).toBeTypeOf('number');
    if (commitTime !== undefined)
      expect.soft(commitTime, `${at}: the commit time restored`).toBeLessThanOrEqual(sample.time);
  }
  console.info(`crash-restart ${options.name} (seed ${seed}):\n${results.join('\n')}`);
}

describe('crashes and restarts of backupd replicate under a random writer', () => {
  const { directory, running } = suiteWorkspace('crash-restart');

  test('to a file:// directory: every shipped commit restorable after each SIGKILL, the final state exact, restores by time exact at every sample', async () => {
    await scenario({
      name: 'file',
      directory,
      running,
      url: pathToFileURL(join(directory, 'file-backups')).href,
      env: baseEnv(),
      seed: SEED,
    });
  }, 600_000);

  const versitygw = s3Server('versitygw');
  if (!versitygw) console.warn(`crash-restart on S3: skipped, ${missingReason('versitygw')}`);
  test.skipIf(!versitygw)(
    'to the local S3 server: every shipped commit restorable after each SIGKILL, the final state exact, restores by time exact at every sample',
    async () => {
      const server = versitygw!;
      await scenario({
        name: 's3',
        directory,
        running,
        url: s3Url(server, randomPrefix('backupd-crash-restart')),
        env: s3Env(server),
        seed: (SEED + 1) >>> 0,
      });
    },
    600_000,
  );
});
