/**
 * Restore time of a 1 GiB SQLite database with 100 000 commits of WAL, from
 * FsStore.
 *
 * Setup (once, not measured): a 1 GiB database (4 KiB pages, 1 000-byte
 * random rows) loaded with `synchronous=OFF`, then backupd attached
 * (SqliteSource under the real BackupWorker, FsStore in the temp directory,
 * a manifest at every step): its first step ships the 1 GiB snapshot; then
 * 100 000 one-row transactions (three in four update a random row, one in
 * four inserts a row), in batches of 1 000 with a worker step after each, so
 * the bucket holds exactly what the worker ships in production (commit
 * records in framed segments). The last manifest counts every commit.
 *
 * Each run restores the latest restore point with `restore()` and
 * `sqliteMaterializer` into a fresh directory: snapshot and segments streamed
 * and CRC-checked, the 100 000 commits applied onto the snapshot, fsync,
 * `PRAGMA integrity_check`, rename into place. Measured: wall seconds, MB/s
 * of bytes downloaded (10^6 bytes per s), and MB/s of the database restored.
 * The bucket was just written, so it is likely in the page cache: this
 * measures restore, not the disk under the bucket. Each run's restored
 * database is checked (commit count, row count) and removed.
 *
 * `pnpm bench sqlite-restore` (3 runs; about 1.5 GiB of bucket, 1 GiB of
 * database and 1 GiB of restore on disk while it runs, all in the temp
 * directory).
 */
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { BackupWorker } from '@x/backup-worker';
import { FakeClock } from '@x/lease';
import { restore } from '@x/restore';
import { SqliteSource, sqliteMaterializer } from '@x/source-sqlite';
import { FsStore } from '@x/store';
import { defineBenchmark } from './harness.ts';

const GiB = 1024 * 1024 * 1024;
const DATABASE_BYTES = Number(process.env.SQLITE_RESTORE_BENCH_BYTES ?? GiB);
const COMMITS = Number(process.env.SQLITE_RESTORE_BENCH_COMMITS ?? 100_000);
const ROW_BYTES = 1000;
const BATCH = 1000;
const PREFIX = 'bench/sqlite';

interface State {
  directory: string;
  store: FsStore;
  expectedCommitSeq: number;
  expectedRows: number;
  databaseBytes: number;
  run: number;
}

export const benchmark = defineBenchmark<State>({
  name: 'sqlite-restore',
  description: `restore() with sqliteMaterializer from FsStore of a ${Math.round(DATABASE_BYTES / 2 ** 20)} MiB SQLite database with ${COMMITS} commits of WAL`,
  runs: 3,
  async setup(context) {
    const path = join(context.tempDir, 'app.db');
    const database = new DatabaseSync(path);
    database.exec('PRAGMA page_size=4096; PRAGMA journal_mode=WAL; PRAGMA synchronous=OFF');
    database.exec('CREATE TABLE data (id INTEGER PRIMARY KEY, body BLOB NOT NULL)');
    const pageCount = () =>
      Number((database.prepare('PRAGMA page_count').get() as { page_count: number }).page_count);
    let rows = 0;
    const load = database.prepare(
      'WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) INSERT INTO data (body) SELECT randomblob(?) FROM n',
    );
    const loadRows = (count: number) => {
      load.run(count, ROW_BYTES);
      rows += count;
    };
    context.log(`loading ${DATABASE_BYTES / 2 ** 20} MiB`);
    while (pageCount() * 4096 < DATABASE_BYTES) {
      loadRows(20_000);
      database.exec('PRAGMA wal_checkpoint(TRUNCATE)');
    }

    const store = new FsStore({ root: join(context.tempDir, 'bucket') });
    const source = SqliteSource.open({ path, captureIntervalMs: 0 });
    const worker = new BackupWorker({
      store,
      prefix: PREFIX,
      source,
      clock: new FakeClock(),
      manifestIntervalMs: 0,
    });
    try {
      context.log('shipping the snapshot');
      await worker.runOnce();
      if (source.tap.snapshotAvailable) throw new Error('the first step did not ship the snapshot');
      const snapshotCommits = (await source.durablePosition()).commitCount ?? 0;
      context.log(`${COMMITS} commits`);
      const update = database.prepare('UPDATE data SET body = randomblob(?) WHERE id = ?');
      const insert = database.prepare('INSERT INTO data (body) VALUES (randomblob(?))');
      let random = 12345;
      for (let done = 0; done < COMMITS; ) {
        const end = Math.min(COMMITS, done + BATCH);
        for (; done < end; done += 1) {
          if (done % 4 === 3) {
            insert.run(ROW_BYTES);
            rows += 1;
          } else {
            random = (random * 1103515245 + 12345) >>> 0;
            update.run(ROW_BYTES, 1 + (random % rows));
          }
        }
        await worker.runOnce();
        if (done % 20_000 === 0) context.log(`  ${done} commits shipped`);
      }
      await worker.runOnce();
      const position = await source.durablePosition();
      const commitCount = position.commitCount ?? 0;
      if (commitCount !== snapshotCommits + COMMITS)
        throw new Error(
          `the source counted ${commitCount - snapshotCommits} commits, not ${COMMITS}`,
        );
      if (source.tap.logStart !== source.tap.logLength)
        throw new Error('not every commit reached the bucket');
      const databaseBytes = pageCount() * 4096;
      return {
        directory: context.tempDir,
        store,
        expectedCommitSeq: commitCount,
        expectedRows: rows,
        databaseBytes,
        run: 0,
      };
    } finally {
      await source.close();
      database.close();
      // The source database is not needed any more: only the bucket is.
      for (const suffix of ['', '-wal', '-shm']) await rm(`${path}${suffix}`, { force: true });
    }
  },
  async run(state) {
    state.run += 1;
    const target = join(state.directory, `restore-${state.run}`);
    const started = process.hrtime.bigint();
    const result = await restore(state.store, PREFIX, target, {
      materializer: sqliteMaterializer({ databaseName: 'app.db' }),
    });
    const elapsed = process.hrtime.bigint() - started;
    try {
      if (result.commitSeq !== state.expectedCommitSeq)
        throw new Error(`restored commit ${result.commitSeq}, not ${state.expectedCommitSeq}`);
      const restored = new DatabaseSync(join(target, 'app.db'), { readOnly: true });
      try {
        const count = Number(
          (restored.prepare('SELECT count(*) AS n FROM data').get() as { n: number }).n,
        );
        if (count !== state.expectedRows)
          throw new Error(`restored ${count} rows, not ${state.expectedRows}`);
      } finally {
        restored.close();
      }
    } finally {
      await rm(target, { recursive: true, force: true });
    }
    const seconds = Number(elapsed) / 1e9;
    return {
      seconds: { value: seconds, unit: 's', higherIsBetter: false },
      downloaded: { value: result.bytes / 1e6 / seconds, unit: 'MB/s' },
      database: { value: state.databaseBytes / 1e6 / seconds, unit: 'MB/s' },
      downloadedMiB: { value: result.bytes / 2 ** 20, unit: 'MiB' },
      databaseMiB: { value: state.databaseBytes / 2 ** 20, unit: 'MiB' },
    };
  },
});
