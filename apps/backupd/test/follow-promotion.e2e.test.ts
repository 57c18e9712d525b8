/**
 * Failover to a read replica, end to end through the `backupd` command, as
 * the runbook does it. Host A: an application commits to `a.db` (WAL mode)
 * every ~20 ms (a row with the next id, and an amount moved between two
 * accounts, so the accounts' sum never changes) while `backupd replicate`
 * backs it up to a `file://` bucket. Host B: `backupd follow <bucket> b.db
 * --json` keeps a copy up to date, read meanwhile by connections opened
 * read-only that check the invariant in every read transaction.
 *
 * Host A dies (the application and `replicate` are killed with SIGKILL mid-
 * load). Once the follower shows everything the bucket holds it is stopped
 * (SIGTERM, exit 0), and `backupd replicate b.db <bucket>` is started on the
 * same URL: it takes the lease once A's expires (a 3 s TTL), continues the
 * lineage and, the follower having been caught up, the same generation
 * (`backup.generation_continued`, no new snapshot). Commits made on B after
 * the promotion are shipped, and at a graceful stop: every commit the
 * follower had shown is in a restore of the bucket, the restore equals
 * `b.db`, and `integrity_check` is ok.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { setTimeout as sleep } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
import { type Manifest, parseManifest } from '@x/manifest';
import { readLatest } from '@x/restore';
import { FsStore } from '@x/store';
import { describe, expect, it } from 'vitest';
import {
  baseEnv,
  instanceIdOf,
  RunningProcess,
  runCli,
  startBackupd,
  suiteWorkspace,
  waitFor,
} from './helpers/cli.ts';
import { databaseHash } from './helpers/content-hash.ts';
import { bucketFiles, snapshots } from './helpers/restart-bucket.ts';

const ACCOUNTS = 16;
const OPENING_BALANCE = 1000;
const TOTAL = ACCOUNTS * OPENING_BALANCE;

/**
 * One transaction of the application: event `id`, and an amount moved
 * between two accounts. The same statements run in the writer process
 * (below, as text) and in the application on B after the promotion.
 */
const TRANSACTION_SQL = {
  insert: 'INSERT INTO events (id, payload) VALUES (?, randomblob(?))',
  take: 'UPDATE accounts SET balance = balance - ? WHERE id = ?',
  give: 'UPDATE accounts SET balance = balance + ? WHERE id = ?',
};

function commitOne(database: DatabaseSync, id: number): void {
  database.exec('BEGIN IMMEDIATE');
  try {
    database.prepare(TRANSACTION_SQL.insert).run(id, 100 + (id % 5) * 300);
    const amount = (id % 97) + 1;
    database.prepare(TRANSACTION_SQL.take).run(amount, (id % ACCOUNTS) + 1);
    database.prepare(TRANSACTION_SQL.give).run(amount, ((id * 7 + 3) % ACCOUNTS) + 1);
    database.exec('COMMIT');
  } catch (error) {
    database.exec('ROLLBACK');
    throw error;
  }
}

/**
 * Host A's application, a process of its own: commits one transaction
 * every ~20 ms until killed, printing `committed <id>` after each commit.
 * Usage: node -e WRITER_SCRIPT <db>
 */
const WRITER_SCRIPT = `
const { DatabaseSync } = require('node:sqlite');
const database = new DatabaseSync(process.argv[1]);
database.exec('PRAGMA busy_timeout = 10000');
const sql = ${JSON.stringify(TRANSACTION_SQL)};
const insert = database.prepare(sql.insert);
const take = database.prepare(sql.take);
const give = database.prepare(sql.give);
let id = database.prepare('SELECT coalesce(max(id), 0) AS n FROM events').get().n;
function commit() {
  id += 1;
  database.exec('BEGIN IMMEDIATE');
  insert.run(id, 100 + (id % 5) * 300);
  const amount = (id % 97) + 1;
  take.run(amount, (id % ${ACCOUNTS}) + 1);
  give.run(amount, ((id * 7 + 3) % ${ACCOUNTS}) + 1);
  database.exec('COMMIT');
  process.stdout.write('committed ' + id + '\\n');
  setTimeout(commit, 20);
}
commit();
`;

function createApplicationDatabase(path: string): void {
  const database = new DatabaseSync(path);
  database.exec('PRAGMA journal_mode = WAL');
  database.exec('CREATE TABLE accounts (id INTEGER PRIMARY KEY, balance INTEGER NOT NULL)');
  database.exec('CREATE TABLE events (id INTEGER PRIMARY KEY, payload BLOB NOT NULL)');
  const open = database.prepare('INSERT INTO accounts (id, balance) VALUES (?, ?)');
  for (let id = 1; id <= ACCOUNTS; id += 1) open.run(id, OPENING_BALANCE);
  database.close();
}

interface Observed {
  readonly total: number;
  readonly events: number;
  readonly maxId: number;
}

/** What one read transaction sees; the invariant holds when total is TOTAL and the ids are 1..events. */
function observe(database: DatabaseSync): Observed {
  database.exec('BEGIN');
  try {
    const { total } = database.prepare('SELECT sum(balance) AS total FROM accounts').get() as {
      total: number;
    };
    const { events, maxId } = database
      .prepare('SELECT count(*) AS events, coalesce(max(id), 0) AS maxId FROM events')
      .get() as { events: number; maxId: number };
    return { total, events, maxId };
  } finally {
    database.exec('COMMIT');
  }
}

const holds = (seen: Observed) => seen.total === TOTAL && seen.events === seen.maxId;

/** Every event id of the database at `path`, opened read-only. */
function eventIds(path: string): number[] {
  const database = new DatabaseSync(path, { readOnly: true });
  try {
    return (database.prepare('SELECT id FROM events ORDER BY id').all() as { id: number }[]).map(
      (row) => row.id,
    );
  } finally {
    database.close();
  }
}

function integrityCheck(path: string): string {
  const database = new DatabaseSync(path, { readOnly: true });
  try {
    const rows = database.prepare('PRAGMA integrity_check').all() as Record<string, string>[];
    return rows.map((row) => Object.values(row).join(' ')).join('\n');
  } finally {
    database.close();
  }
}

/**
 * Readers of the follower's target while it runs: a connection kept open
 * and a fresh one every few reads, both read-only, each read one
 * transaction checking the invariant. Runs until `stop()`.
 */
class TargetReaders {
  readonly states = new Set<number>();
  readonly violations: string[] = [];
  readonly errors: string[] = [];
  readonly path: string;
  reads = 0;
  #stopping = false;
  readonly #done: Promise<void>;

  constructor(path: string) {
    this.path = path;
    this.#done = this.#run();
  }

  async #run(): Promise<void> {
    let kept: DatabaseSync | null = null;
    try {
      while (!this.#stopping) {
        if (existsSync(this.path)) {
          try {
            kept ??= this.#open();
            this.#check(kept);
            if (this.reads % 5 === 0) {
              const fresh = this.#open();
              try {
                this.#check(fresh);
              } finally {
                fresh.close();
              }
            }
          } catch (error) {
            this.errors.push(error instanceof Error ? error.message : String(error));
            kept?.close();
            kept = null;
          }
        }
        await sleep(10);
      }
    } finally {
      kept?.close();
    }
  }

  #open(): DatabaseSync {
    const database = new DatabaseSync(this.path, { readOnly: true });
    database.exec('PRAGMA busy_timeout = 10000');
    return database;
  }

  #check(database: DatabaseSync): void {
    const seen = observe(database);
    this.reads += 1;
    this.states.add(seen.maxId);
    if (!holds(seen)) this.violations.push(JSON.stringify(seen));
  }

  async stop(): Promise<void> {
    this.#stopping = true;
    await this.#done;
  }
}

/** The `--json` lines a `backupd follow` wrote on standard output: one per state applied. */
function appliedStates(follow: RunningProcess): { commitSeq: number; walGeneration: number }[] {
  // Whole lines only: the last one may still be arriving.
  return follow.stdout
    .split('\n')
    .slice(0, -1)
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as { commitSeq: number; walGeneration: number })
    .filter((line) => typeof line.commitSeq === 'number');
}

function events(process: RunningProcess, name: string): Record<string, unknown>[] {
  return process.logEvents().filter((event) => event.event === name);
}

/** The newest restore point's commit count a `replicate` logged (written or continued), -1 before any. */
function newestRestorePoint(process: RunningProcess): number {
  return Math.max(
    -1,
    ...[
      ...events(process, 'backup.restore_point_written'),
      ...events(process, 'backup.generation_continued'),
    ].map((event) => event.commitSeq as number),
  );
}

describe('failover: backupd follow, then backupd replicate on its target (promotion)', () => {
  const { directory, running } = suiteWorkspace('follow-promotion');
  const env = baseEnv({
    BACKUPD_INTERVAL: '200ms',
    BACKUPD_RESTORE_POINT_INTERVAL: '1s',
    BACKUPD_LEASE_TTL: '3s',
  });

  it('the promoted follower continues the lineage and generation, loses no commit it showed, and restores exactly', async () => {
    const hostA = join(directory, 'host-a');
    const hostB = join(directory, 'host-b');
    await mkdir(hostA);
    await mkdir(hostB);
    const aDb = join(hostA, 'a.db');
    const bDb = join(hostB, 'b.db');
    const bucket = join(directory, 'bucket');
    const url = pathToFileURL(bucket).href;
    createApplicationDatabase(aDb);

    // Host A: replicate, then the application under load.
    const replicateA = startBackupd(['replicate', aDb, url, '--log-format', 'json'], {
      env,
      label: 'replicate on A',
    });
    running.push(replicateA);
    await waitFor('the first restore point on A', () => newestRestorePoint(replicateA) >= 0, {
      describe: () => replicateA.describe(),
      timeoutMs: 30_000,
    });
    const writer = new RunningProcess('writer on A', process.execPath, ['-e', WRITER_SCRIPT, aDb], {
      env: baseEnv(),
    });
    running.push(writer);
    const committed = () => Number(/committed (\d+)\n$/.exec(writer.stdout)?.[1] ?? 0);

    // Host B: the follower, and readers of its target.
    const follow = startBackupd(
      ['follow', url, bDb, '--json', '--poll', '200ms', '--log-format', 'json'],
      { env, label: 'follow on B' },
    );
    running.push(follow);
    const readers = new TargetReaders(bDb);
    const describeAll = () =>
      [replicateA, writer, follow]
        .map((p) => p.describe())
        .concat(
          `readers: ${readers.reads} reads, ${readers.states.size} states, errors ${JSON.stringify(readers.errors.slice(0, 5))}, violations ${JSON.stringify(readers.violations.slice(0, 5))}`,
        )
        .join('\n');

    // Under load: the follower applies several states, and readers see them.
    await waitFor(
      'the follower to apply states while A commits, and readers to see them',
      () =>
        appliedStates(follow).length >= 4 &&
        readers.states.size >= 3 &&
        committed() >= 150 &&
        writer.running,
      { describe: describeAll, timeoutMs: 40_000 },
    );

    // Host A dies mid-load.
    writer.child.kill('SIGKILL');
    replicateA.child.kill('SIGKILL');
    expect((await writer.exited).signal).toBe('SIGKILL');
    expect((await replicateA.exited).signal).toBe('SIGKILL');

    // What the bucket holds now (nothing writes to it any more).
    const check = join(directory, 'check', 'check.db');
    const restoredCheck = await runCli(['restore', url, check, '--json'], { env });
    expect(restoredCheck.code, restoredCheck.stderr).toBe(0);
    const bucketHash = databaseHash(check);
    const bucketIds = eventIds(check);
    expect(bucketIds.length).toBeGreaterThan(0);

    // The follower catches up with it.
    await waitFor(
      'the follower to show what the bucket holds',
      () => {
        const ids = eventIds(bDb);
        return ids.at(-1) === bucketIds.at(-1) && databaseHash(bDb) === bucketHash;
      },
      { describe: describeAll, timeoutMs: 30_000 },
    );
    await waitFor(
      'the readers to see the last state',
      () => readers.states.has(bucketIds.at(-1)!),
      {
        describe: describeAll,
      },
    );
    await readers.stop();
    expect(readers.violations, describeAll()).toEqual([]);
    expect(readers.errors, describeAll()).toEqual([]);
    expect(readers.states.size).toBeGreaterThanOrEqual(3);

    // Stop the follower: exit 0, the target left as restored.
    expect(await follow.stop('SIGTERM', 30_000), follow.describe()).toEqual({
      code: 0,
      signal: null,
    });
    const shownIds = eventIds(bDb);
    expect(shownIds).toEqual(bucketIds);
    expect(databaseHash(bDb)).toBe(bucketHash);
    const followed = appliedStates(follow).at(-1)!;
    // What the follower left for replicate (its lineage, state and parent records).
    const leftByFollow = sidecarText(bDb);
    const before = bucketFiles(bucket);
    const snapshotsBefore = snapshots(before);
    const latestBefore = await latestManifest(bucket);

    // Promotion: replicate on B to the same URL.
    const replicateB = startBackupd(['replicate', bDb, url, '--log-format', 'json'], {
      env,
      label: 'replicate on B',
    });
    running.push(replicateB);
    const describeB = () =>
      `${replicateB.describe()}\n--- sidecars of b.db as follow left them\n${leftByFollow}\n--- now\n${sidecarText(bDb)}\n--- LATEST before promotion\n${JSON.stringify(latestBefore)}`;
    const outcome = await waitFor(
      'the promoted replicate to continue the generation, or not',
      () =>
        events(replicateB, 'backup.generation_continued')[0] ??
        events(replicateB, 'backup.prefix_refused')[0] ??
        events(replicateB, 'backup.continuation_skipped')[0] ??
        events(replicateB, 'backup.continuation_unproven')[0] ??
        (snapshots(bucketFiles(bucket)).length > snapshotsBefore.length
          ? { event: 'a new snapshot' }
          : undefined),
      { describe: describeB, timeoutMs: 40_000 },
    );
    expect(outcome.event, describeB()).toBe('backup.generation_continued');
    expect(outcome.walGeneration).toBe(followed.walGeneration);
    expect(outcome.commitSeq).toBe(followed.commitSeq);
    // It took the lease over from A's instance, once that lease had expired.
    expect(events(replicateB, 'lease.acquired').at(-1)?.previousHolder, describeB()).toBe(
      instanceIdOf(replicateA),
    );
    expect(events(replicateB, 'backup.new_lineage'), describeB()).toEqual([]);

    // The application on B commits; replicate ships it.
    const application = new DatabaseSync(bDb);
    application.exec('PRAGMA busy_timeout = 10000');
    const extra = 30;
    for (let i = 1; i <= extra; i += 1) commitOne(application, bucketIds.at(-1)! + i);
    application.close();
    const goal = (outcome.commitSeq as number) + extra;
    await waitFor(
      `a restore point of ${goal} commits on B`,
      () => newestRestorePoint(replicateB) >= goal,
      { describe: describeB, timeoutMs: 30_000 },
    );
    expect(await replicateB.stop('SIGTERM', 60_000), describeB()).toEqual({
      code: 0,
      signal: null,
    });
    expect(events(replicateB, 'backup.prefix_refused')).toEqual([]);

    // The same lineage, the same generation, no new snapshot.
    expect(snapshots(bucketFiles(bucket))).toEqual(snapshotsBefore);
    const latestAfter = await latestManifest(bucket);
    expect(latestAfter.lineage).toBe(latestBefore.lineage);
    expect(latestAfter.walGeneration).toBe(latestBefore.walGeneration);
    expect(latestAfter.commitSeq).toBeGreaterThanOrEqual(goal);

    // The bucket restores to b.db exactly, with every commit the follower showed.
    const out = join(directory, 'out', 'out.db');
    const restored = await runCli(['restore', url, out, '--json'], { env });
    expect(restored.code, restored.stderr).toBe(0);
    expect(integrityCheck(out)).toBe('ok');
    expect(databaseHash(out)).toBe(databaseHash(bDb));
    const restoredIds = new Set(eventIds(out));
    expect(shownIds.filter((id) => !restoredIds.has(id))).toEqual([]);
    expect(restoredIds.size).toBe(shownIds.length + extra);
    const final = new DatabaseSync(out, { readOnly: true });
    try {
      expect(holds(observe(final))).toBe(true);
    } finally {
      final.close();
    }
  }, 120_000);
});

/** The restore point LATEST names in the `file://` bucket (its `backup/` prefix). */
async function latestManifest(bucket: string): Promise<Manifest & { readonly key: string }> {
  const store = new FsStore({ root: bucket, fsync: false });
  const reading = await readLatest(store, 'backup');
  if (reading.state !== 'ok') throw new Error(`LATEST is ${reading.state}`);
  const object = await store.get(reading.manifestKey);
  if (object === null) throw new Error(`${reading.manifestKey} is missing`);
  return { ...parseManifest(object.body, { prefix: 'backup' }), key: reading.manifestKey };
}

/** The files of a database's sidecar directory (`.<name>-backupd/`), for failure messages. */
function sidecarText(database: string): string {
  const sidecars = join(dirname(database), `.${basename(database)}-backupd`);
  if (!existsSync(sidecars)) return `(no ${sidecars})`;
  return readdirSync(sidecars)
    .map((name) => {
      const path = join(sidecars, name);
      const size = statSync(path).size;
      return `${name} (${size} bytes): ${size > 2000 ? '…' : readFileSync(path, 'utf8').trim()}`;
    })
    .join('\n');
}
