/**
 * How a SQLite backup's cost grows with uptime, as an operator sees it: a
 * `backupd replicate` process (the installed command, defaults unless the
 * environment says otherwise) backs up a database of about 2 MiB (512 rows
 * of 4 KiB random blobs, 4 KiB pages, WAL mode) to a `file://` prefix while a
 * writer in a process of its own updates one random row per transaction
 * (a fresh 4 KiB random blob, `synchronous=NORMAL`) at a steady rate.
 *
 * At each uptime mark (seconds since the replicate started) it reports:
 * - `bucket ÷ db`: bytes under the prefix ÷ the database file's bytes;
 * - `prefix growth MB/h`: the prefix's growth since the previous mark, per
 *   hour: what was uploaded less what retention deleted (compaction deletes
 *   the fine objects it replaced, so it can be negative; `recovery-point`
 *   measures bytes sent from backupd's metrics);
 * - `restore read ÷ db`: bytes of the objects the newest restore point names
 *   (what `backupd restore` of the latest state downloads) ÷ the database;
 * - `restore s`: wall time of `backupd restore` of the latest state, a process
 *   of its own, while the writer keeps writing;
 * - `largest manifest KiB`: the largest restore-point object under the prefix.
 *
 * After the last mark the writer stops and the replicate is killed with
 * SIGKILL (a lost host: no final restore point, no resume record). It is
 * started again, left until it has settled (continued the newest restore
 * point's generation, or written a restore point on a new snapshot), and
 * stopped with SIGTERM: `crash restart adds % of db` is what that restart
 * added to the prefix, the commits the killed run had not shipped included,
 * and a scheduled snapshot the generation was due for, if one followed
 * (`crash restart then scheduled snapshot`, 1 when it did);
 * `crash restart continued` is 1 when it continued the generation. A
 * restart continues only when at most half of the database's pages differ
 * from the newest restore point's state (its tail of segments included);
 * at 500 updates/s over 512 rows, the commits of the last second before the
 * kill can change more than that, and the restart then takes a new snapshot
 * (about as many bytes as those pages): 0 there is the rule, not a failure.
 * Then once more with no write in between: `idle restart adds % of db`.
 *
 * Environment: `SQLITE_GROWTH_RATES` (transactions/s, default `100,500`),
 * `SQLITE_GROWTH_MARKS` (seconds, default `30,60,90`), and any `BACKUPD_*`
 * setting, passed to the replicate as is (for example
 * `BACKUPD_SNAPSHOT_INTERVAL=1m` to see scheduled snapshots within minutes).
 */
import { spawn } from 'node:child_process';
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { setTimeout as sleep } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
import { FsStore } from '@x/store';
import {
  checkBackupdRuns,
  freshDirectory,
  hasLogged,
  latestRestoreBytes,
  listRestorePoints,
  lowerIsBetter,
  prefixBytes,
  restoreSeconds,
  startReplicate,
  stopProcess,
  waitForEvent,
  waitForNewRestorePoint,
} from './backupd-processes.ts';
import { defineBenchmark, type Measurement } from './harness.ts';

const ROWS = 512;
const BLOB_BYTES = 4096;
const RATES = (process.env.SQLITE_GROWTH_RATES ?? '100,500').split(',').map(Number);
const MARKS_S = (process.env.SQLITE_GROWTH_MARKS ?? '30,60,90').split(',').map(Number);

interface State {
  readonly tempDir: string;
}

/** The writer: one UPDATE of a random row per transaction, paced to `rate` per second. */
const WRITER_SOURCE = `
import { DatabaseSync } from 'node:sqlite';
const [path, rate] = [process.argv[1], Number(process.argv[2])];
const db = new DatabaseSync(path);
db.exec('PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA busy_timeout=10000');
const update = db.prepare('UPDATE blobs SET data = randomblob(${BLOB_BYTES}) WHERE id = ?');
const started = performance.now();
let done = 0;
let stopping = false;
process.on('SIGTERM', () => { stopping = true; });
while (!stopping) {
  const due = Math.floor(((performance.now() - started) / 1000) * rate);
  while (done < due) { update.run(1 + Math.floor(Math.random() * ${ROWS})); done++; }
  await new Promise((resolve) => setTimeout(resolve, 5));
}
db.close();
process.stdout.write(String(done));
`;

function createDatabase(path: string): void {
  const db = new DatabaseSync(path);
  db.exec('PRAGMA page_size=4096; PRAGMA journal_mode=WAL;');
  db.exec('CREATE TABLE blobs (id INTEGER PRIMARY KEY, data BLOB NOT NULL)');
  const insert = db.prepare('INSERT INTO blobs (id, data) VALUES (?, randomblob(?))');
  db.exec('BEGIN');
  for (let id = 1; id <= ROWS; id++) insert.run(id, BLOB_BYTES);
  db.exec('COMMIT');
  db.exec('PRAGMA wal_checkpoint(TRUNCATE)');
  db.close();
}

function checkRestoredRows(path: string): void {
  const db = new DatabaseSync(path, { readOnly: true });
  const rows = (db.prepare('SELECT count(*) AS n FROM blobs').get() as { n: number }).n;
  db.close();
  if (rows !== ROWS) throw new Error(`restored database holds ${rows} rows, expected ${ROWS}`);
}

async function oneRate(
  tempDir: string,
  rate: number,
  measured: Record<string, Measurement>,
): Promise<void> {
  const directory = await freshDirectory(join(tempDir, `rate-${rate}`));
  const database = join(directory, 'app.db');
  const prefix = join(directory, 'backups');
  const url = pathToFileURL(prefix).href;
  const store = new FsStore({ root: prefix });
  createDatabase(database);
  const replicate = startReplicate(database, url);
  // Uptime counts from the first restore point (the process's own start-up
  // and first snapshot are not what grows).
  await waitForNewRestorePoint(url, []);
  const startedAt = performance.now();
  const writer = spawn(
    process.execPath,
    ['--input-type=module', '-e', WRITER_SOURCE, database, String(rate)],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  let written = '';
  writer.stdout?.on('data', (chunk: Buffer) => {
    written += chunk.toString();
  });
  try {
    let previous = { atS: 0, bytes: (await prefixBytes(store)).total };
    for (const mark of MARKS_S) {
      await sleep(Math.max(0, mark * 1000 - (performance.now() - startedAt)));
      const atS = (performance.now() - startedAt) / 1000;
      const databaseBytes = (await stat(database)).size;
      const { total, largestManifest } = await prefixBytes(store);
      const restoreRead = await latestRestoreBytes(store);
      const restored = join(directory, 'restored.db');
      const seconds = restoreSeconds(url, restored);
      checkRestoredRows(restored);
      const label = `${rate}/s ${mark}s`;
      measured[`${label} bucket ÷ db`] = lowerIsBetter(total / databaseBytes, '×');
      measured[`${label} prefix growth MB/h`] = lowerIsBetter(
        ((total - previous.bytes) / 1e6 / (atS - previous.atS)) * 3600,
        'MB/h',
      );
      measured[`${label} restore read ÷ db`] = lowerIsBetter(restoreRead / databaseBytes, '×');
      measured[`${label} restore s`] = lowerIsBetter(seconds, 's');
      measured[`${label} largest manifest KiB`] = lowerIsBetter(largestManifest / 1024, 'KiB');
      previous = { atS, bytes: total };
    }
  } finally {
    await stopProcess(writer);
    // The host is lost under load: no final restore point, no record.
    await stopProcess(replicate, 'SIGKILL');
  }
  if (!(Number(written) > 0)) throw new Error('the writer committed nothing');
  const databaseBytes = (await stat(database)).size;
  const crash = await restartAdds(database, url, store);
  measured[`${rate}/s crash restart adds % of db`] = lowerIsBetter(
    (crash.bytes / databaseBytes) * 100,
    '%',
  );
  measured[`${rate}/s crash restart continued`] = {
    value: crash.continued ? 1 : 0,
    unit: '1 = yes',
    higherIsBetter: true,
  };
  measured[`${rate}/s crash restart then scheduled snapshot`] = lowerIsBetter(
    crash.snapshotScheduled ? 1 : 0,
    '1 = yes',
  );
  // That restart stopped gracefully: the next one is idle.
  measured[`${rate}/s idle restart adds % of db`] = lowerIsBetter(
    ((await restartAdds(database, url, store)).bytes / databaseBytes) * 100,
    '%',
  );
}

/**
 * Starts a replicate, lets it settle (it continued the newest restore
 * point's generation and wrote a restore point of what differed, or took a
 * new snapshot and wrote a restore point on it, or had nothing to write),
 * stops it with SIGTERM: the bytes that added to the prefix.
 */
async function restartAdds(
  database: string,
  url: string,
  store: FsStore,
): Promise<{ bytes: number; continued: boolean; snapshotScheduled: boolean }> {
  const before = await prefixBytes(store);
  const points = listRestorePoints(url);
  const restarted = startReplicate(database, url);
  let continued = false;
  let snapshotScheduled = false;
  try {
    const settled = await waitForEvent(restarted, [
      'backup.generation_continued',
      'backup.restore_point_written',
    ]);
    if (settled === 'backup.restore_point_written') await waitForNewRestorePoint(url, points);
    // A continuation may ship the pages that differ: give it a moment.
    else await sleep(3000);
    continued = settled === 'backup.generation_continued';
    // A snapshot the generation was due for anyway (its log past
    // `snapshotLogFactor`): uploaded right after the restart, counted in
    // what it added.
    snapshotScheduled = hasLogged(restarted, 'backup.snapshot_scheduled');
  } finally {
    await stopProcess(restarted);
  }
  return { bytes: (await prefixBytes(store)).total - before.total, continued, snapshotScheduled };
}

export const benchmark = defineBenchmark<State>({
  name: 'sqlite-growth',
  description: `backupd replicate on a 2 MiB SQLite database under ${RATES.join(' and ')} single-row updates/s to file://: bucket, upload, restore read and time, largest restore point at ${MARKS_S.join(', ')} s of uptime, and what a restart after SIGKILL and an idle restart add`,
  runs: 3,
  async setup(context) {
    checkBackupdRuns();
    return { tempDir: context.tempDir };
  },
  async run(state, context) {
    const measured: Record<string, Measurement> = {};
    for (const rate of RATES) {
      context.log(`sqlite-growth: ${rate} transactions/s for ${MARKS_S.at(-1)} s`);
      await oneRate(state.tempDir, rate, measured);
    }
    return measured;
  },
});
