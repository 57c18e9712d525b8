/**
 * What backupd costs an application, as the application sees it: the
 * application is a process of its own committing back to back (one row of
 * 100 characters per transaction, `journal_mode=WAL`, `synchronous=FULL`,
 * then `NORMAL`) for a fixed time; `backupd replicate` (the installed
 * command, at its defaults, to a `file://` prefix) is either not running or
 * running beside it. Each run measures, per synchronous setting, one phase
 * without and one with backupd, in that order, each on a fresh database
 * (so the phases of a run see the same machine within seconds of each
 * other, and several runs interleave them).
 *
 * Per setting and run:
 * - `rate with ÷ alone`: commits/s with backupd ÷ commits/s alone;
 * - `commits/s alone`, `p99 commit ms alone` and `p99 commit ms with`;
 * - `uploaded MB`: what the prefix holds after the phase and a graceful
 *   stop (the snapshot, the commit log, restore points; nothing is deleted
 *   inside the default window), and the same ÷ the commits made beside
 *   backupd (`uploaded B per commit`, which does not move with the rate);
 * - `restore s`: `backupd restore` of the latest state afterwards, a
 *   process of its own; the restored database must hold every commit the
 *   application made;
 * - `backupd CPU µs per commit`: the CPU time (user + system, from
 *   `/proc`) `backupd replicate` used from the application's start until 3 s
 *   after its end, ÷ the commits (Linux only).
 *
 * `SQLITE_APP_SECONDS` sets the phase length (default 20).
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { setTimeout as sleep } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
import { FsStore } from '@x/store';
import {
  checkBackupdRuns,
  cpuSecondsOf,
  freshDirectory,
  listRestorePoints,
  lowerIsBetter,
  prefixBytes,
  restoreSeconds,
  startReplicate,
  stopProcess,
  waitForNewRestorePoint,
} from './backupd-processes.ts';
import { defineBenchmark, type Measurement } from './harness.ts';

const PHASE_S = Number(process.env.SQLITE_APP_SECONDS ?? 20);
const SETTINGS = ['FULL', 'NORMAL'] as const;
type Synchronous = (typeof SETTINGS)[number];

interface State {
  readonly tempDir: string;
}

interface WriterResult {
  readonly commits: number;
  readonly seconds: number;
  readonly p99Ms: number;
  readonly maxMs: number;
}

/** The application: inserts of one 100-character row, back to back, each its own transaction. */
const WRITER_SOURCE = `
import { DatabaseSync } from 'node:sqlite';
const [path, synchronous, seconds] = [process.argv[1], process.argv[2], Number(process.argv[3])];
const db = new DatabaseSync(path);
db.exec('PRAGMA journal_mode=WAL; PRAGMA busy_timeout=10000; PRAGMA synchronous=' + synchronous);
const insert = db.prepare('INSERT INTO events (body) VALUES (?)');
const body = 'x'.repeat(100);
const latencies = [];
const started = performance.now();
const until = started + seconds * 1000;
for (let now = started; now < until; ) {
  insert.run(body);
  const after = performance.now();
  latencies.push(after - now);
  now = after;
}
const elapsed = (performance.now() - started) / 1000;
db.close();
latencies.sort((a, b) => a - b);
process.stdout.write(JSON.stringify({
  commits: latencies.length,
  seconds: elapsed,
  p99Ms: latencies[Math.floor(latencies.length * 0.99)] ?? 0,
  maxMs: latencies.at(-1) ?? 0,
}));
`;

function createDatabase(path: string): void {
  const db = new DatabaseSync(path);
  db.exec('PRAGMA journal_mode=WAL; CREATE TABLE events (id INTEGER PRIMARY KEY, body TEXT)');
  db.close();
}

async function runApplication(path: string, synchronous: Synchronous): Promise<WriterResult> {
  const child = spawn(
    process.execPath,
    ['--input-type=module', '-e', WRITER_SOURCE, path, synchronous, String(PHASE_S)],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  let out = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    out += chunk.toString();
  });
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  if (code !== 0) throw new Error(`the application exited ${code}`);
  return JSON.parse(out) as WriterResult;
}

function rows(path: string): number {
  const db = new DatabaseSync(path, { readOnly: true });
  const n = (db.prepare('SELECT count(*) AS n FROM events').get() as { n: number }).n;
  db.close();
  return n;
}

async function onePair(
  tempDir: string,
  synchronous: Synchronous,
  measured: Record<string, Measurement>,
): Promise<void> {
  const directory = await freshDirectory(join(tempDir, synchronous));

  const aloneDatabase = join(directory, 'alone.db');
  createDatabase(aloneDatabase);
  const alone = await runApplication(aloneDatabase, synchronous);

  const database = join(directory, 'app.db');
  const prefix = join(directory, 'backups');
  const url = pathToFileURL(prefix).href;
  createDatabase(database);
  const replicate = startReplicate(database, url);
  let withBackupd: WriterResult;
  let cpuSeconds: number | null = null;
  try {
    await waitForNewRestorePoint(url, []);
    const cpuBefore = cpuSecondsOf(replicate.pid);
    withBackupd = await runApplication(database, synchronous);
    // What was committed ships within an interval or two; the graceful stop
    // then writes the final restore point.
    await sleep(3000);
    const cpuAfter = cpuSecondsOf(replicate.pid);
    if (cpuBefore !== null && cpuAfter !== null) cpuSeconds = cpuAfter - cpuBefore;
  } finally {
    await stopProcess(replicate);
  }
  if (listRestorePoints(url).length === 0) throw new Error('backupd wrote no restore point');
  const uploaded = (await prefixBytes(new FsStore({ root: prefix }))).total;
  const restored = join(directory, 'restored.db');
  const seconds = restoreSeconds(url, restored);
  const restoredRows = rows(restored);
  if (restoredRows !== withBackupd.commits)
    throw new Error(
      `the restore holds ${restoredRows} rows; the application committed ${withBackupd.commits}`,
    );

  const aloneRate = alone.commits / alone.seconds;
  const withRate = withBackupd.commits / withBackupd.seconds;
  measured[`${synchronous} rate with ÷ alone`] = { value: withRate / aloneRate, unit: '×' };
  measured[`${synchronous} commits/s alone`] = { value: aloneRate, unit: 'commits/s' };
  measured[`${synchronous} p99 commit ms alone`] = lowerIsBetter(alone.p99Ms, 'ms');
  measured[`${synchronous} p99 commit ms with`] = lowerIsBetter(withBackupd.p99Ms, 'ms');
  measured[`${synchronous} worst commit ms with`] = lowerIsBetter(withBackupd.maxMs, 'ms');
  measured[`${synchronous} uploaded MB`] = lowerIsBetter(uploaded / 1e6, 'MB');
  measured[`${synchronous} uploaded B per commit`] = lowerIsBetter(
    uploaded / withBackupd.commits,
    'B',
  );
  measured[`${synchronous} restore s`] = lowerIsBetter(seconds, 's');
  if (cpuSeconds !== null)
    measured[`${synchronous} backupd CPU µs per commit`] = lowerIsBetter(
      (cpuSeconds * 1e6) / withBackupd.commits,
      'µs',
    );
}

export const benchmark = defineBenchmark<State>({
  name: 'sqlite-app-overhead',
  description: `An application process committing back to back (one 100-character row per transaction) for ${PHASE_S} s alone and beside backupd replicate to file://, at synchronous=FULL and NORMAL: rate ratio, p99 commit, bytes uploaded, restore time`,
  runs: 3,
  async setup(context) {
    checkBackupdRuns();
    return { tempDir: context.tempDir };
  },
  async run(state, context) {
    const measured: Record<string, Measurement> = {};
    for (const synchronous of SETTINGS) {
      context.log(`sqlite-app-overhead: synchronous=${synchronous}, ${PHASE_S} s alone then with`);
      await onePair(state.tempDir, synchronous, measured);
    }
    return measured;
  },
});
