/**
 * followSqlite under the real BackupWorker: the follower publishes every
 * state the bucket holds, in commit order, through growth, a VACUUM that
 * shrinks the file and regrowth, new generations and compaction, while
 * reader processes open the target read-only in a loop and check an
 * invariant every state keeps; it never writes to the bucket; it refuses a
 * target it did not create and one someone else wrote to; a stop leaves the
 * target byte for byte a restore of the state it showed, and a SqliteSource
 * opened on it continues the same generation.
 */
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { BackupWorker } from '@x/backup-worker';
import { restore } from '@x/restore';
import {
  sqliteContentHash as contentHash,
  integrityCheck,
  SqliteSource,
  sqliteMaterializer,
} from '@x/source-sqlite';
import { MemoryStore, type ObjectStore } from '@x/store';
import { ForwardingStore, type StoreOperation } from '@x/store/adapter';
import { describe, expect, it } from 'vitest';
import { type FollowedState, followSqlite, type SqliteFollower } from '../src/follow.ts';
import { FollowError } from '../src/follow-errors.ts';
import { testWorkspace } from './test-workspace.ts';

/** The content hash of the database file at `path`, opened read-only. */
function hashOf(path: string): string {
  const database = new DatabaseSync(path, { readOnly: true });
  try {
    return contentHash(database);
  } finally {
    database.close();
  }
}

const owned = testWorkspace();
const children = owned.children;

const ACCOUNTS = 200;
const TOTAL = ACCOUNTS * 100;

function workspace(label: string): string {
  return owned.directory(label);
}

/** A WAL database whose `acct` balances always sum to TOTAL, and a `junk` table to grow and shrink it. */
function applicationDatabase(path: string): DatabaseSync {
  const db = new DatabaseSync(path, { timeout: 5000 });
  db.exec(`PRAGMA journal_mode=WAL;
    CREATE TABLE acct (id INTEGER PRIMARY KEY, bal INTEGER NOT NULL);
    CREATE TABLE junk (id INTEGER PRIMARY KEY, body BLOB);
    CREATE TABLE seq (n INTEGER NOT NULL)`);
  db.exec('BEGIN');
  const insert = db.prepare('INSERT INTO acct (bal) VALUES (100)');
  for (let i = 0; i < ACCOUNTS; i += 1) insert.run();
  db.exec('INSERT INTO seq (n) VALUES (0)');
  db.exec('COMMIT');
  return db;
}

/** One transaction that keeps the sum and counts itself in `seq`. */
function transfer(db: DatabaseSync, round: number): void {
  const from = 1 + (round % ACCOUNTS);
  const to = 1 + ((round * 7 + 3) % ACCOUNTS);
  db.exec('BEGIN IMMEDIATE');
  db.prepare('UPDATE acct SET bal = bal - 5 WHERE id = ?').run(from);
  db.prepare('UPDATE acct SET bal = bal + 5 WHERE id = ?').run(to);
  db.exec('UPDATE seq SET n = n + 1');
  db.exec('COMMIT');
}

/** A process that reads the target read-only until `stopFile` exists; prints what it saw. */
const READER = `
import { existsSync } from 'node:fs';
import { DatabaseSync } from 'node:sqlite';
const [path, stopFile, total] = process.argv.slice(2);
let reads = 0, torn = 0, errors = 0, regressions = 0, last = -1, firstError = null;
while (!existsSync(stopFile)) {
  if (!existsSync(path)) { await new Promise((r) => setTimeout(r, 5)); continue; }
  try {
    const db = new DatabaseSync(path, { readOnly: true, timeout: 10000 });
    for (let i = 0; i < 40 && !existsSync(stopFile); i += 1) {
      db.exec('BEGIN');
      const sum = db.prepare('SELECT sum(bal) AS s FROM acct').get().s;
      const n = db.prepare('SELECT n FROM seq').get().n;
      const ok = i % 20 !== 0 || db.prepare('PRAGMA integrity_check').get().integrity_check === 'ok';
      db.exec('COMMIT');
      reads += 1;
      if (sum !== Number(total) || !ok) torn += 1;
      if (n < last) regressions += 1;
      last = n;
      if (i % 10 === 9) await new Promise((r) => setTimeout(r, 1));
    }
    db.close();
  } catch (error) {
    errors += 1;
    firstError ??= String(error);
    await new Promise((r) => setTimeout(r, 5));
  }
}
console.log(JSON.stringify({ reads, torn, errors, regressions, last, firstError }));
`;

interface ReaderReport {
  reads: number;
  torn: number;
  errors: number;
  regressions: number;
  last: number;
  firstError: string | null;
}

function startReaders(directory: string, target: string, count: number) {
  const script = join(directory, 'reader.mjs');
  writeFileSync(script, READER);
  const stopFile = join(directory, 'readers.stop');
  const reports = Array.from({ length: count }, () => {
    const child = spawn(process.execPath, [script, target, stopFile, String(TOTAL)], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    children.push(child);
    let out = '';
    child.stdout!.on('data', (chunk) => {
      out += String(chunk);
    });
    return new Promise<ReaderReport>((resolve, reject) => {
      child.on('exit', () => {
        try {
          resolve(JSON.parse(out) as ReaderReport);
        } catch (error) {
          reject(new Error(`reader printed ${JSON.stringify(out)}`, { cause: error }));
        }
      });
    });
  });
  return {
    async stop(): Promise<ReaderReport[]> {
      writeFileSync(stopFile, '');
      return Promise.all(reports);
    },
  };
}

/** A store that refuses every write and counts the attempts. */
class ReadOnlyStore extends ForwardingStore {
  writes = 0;
  protected override async intercept<T>(
    operation: StoreOperation,
    key: string,
    signal: AbortSignal | undefined,
    proceed: () => Promise<T>,
  ): Promise<T> {
    if (!['get', 'getStream', 'head', 'list', 'listPages'].includes(operation)) {
      this.writes += 1;
      throw new Error(`read-only credentials: ${operation} ${key} refused`);
    }
    return super.intercept(operation, key, signal, proceed);
  }
}

/** Counts the calls of each operation. */
class CountingStore extends ForwardingStore {
  readonly calls: Record<string, number> = {};
  protected override async intercept<T>(
    operation: StoreOperation,
    key: string,
    signal: AbortSignal | undefined,
    proceed: () => Promise<T>,
  ): Promise<T> {
    this.calls[operation] = (this.calls[operation] ?? 0) + 1;
    return super.intercept(operation, key, signal, proceed);
  }
}

/**
 * The writer's store: what it stores, except the objects `mangle` changes
 * (after the writer computed their CRC-32), whose keys it keeps.
 */
class ManglingStore extends ForwardingStore {
  mangle: ((key: string, body: Uint8Array) => Uint8Array | undefined) | null = null;
  readonly mangled: string[] = [];
  override put(
    key: string,
    body: Uint8Array,
    options?: Parameters<ObjectStore['put']>[2],
  ): ReturnType<ObjectStore['put']> {
    const changed = this.mangle?.(key, body);
    if (changed === undefined) return super.put(key, body, options);
    this.mangled.push(key);
    return super.put(key, changed, options);
  }
}

/** Runs a follower in the background, collecting what it publishes. */
function runFollower(follower: SqliteFollower) {
  const states: FollowedState[] = [];
  const done = (async () => {
    for await (const state of follower) states.push(state);
  })();
  return { states, done };
}

async function until(what: string, condition: () => boolean, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/**
 * An application database backed up by a worker driven with `runOnce`, in
 * a workspace of its own; `writes(store)` is the store the worker writes
 * through (the follower reads `store` itself).
 */
function backedUp(label: string, options: { worker?: object; source?: object } = {}) {
  const directory = workspace(label);
  const path = join(directory, 'app.db');
  const application = applicationDatabase(path);
  const source = SqliteSource.open({ path, captureIntervalMs: 0, ...options.source });
  const store = new MemoryStore();
  const writes = new ManglingStore(store);
  const worker = newWorker(writes, source, options.worker);
  return {
    directory,
    application,
    source,
    store,
    writes,
    worker,
    async close(): Promise<void> {
      await source.close();
      application.close();
    },
  };
}

function newWorker(store: ObjectStore, source: SqliteSource, overrides: object = {}) {
  return new BackupWorker({
    store,
    prefix: 'p',
    source,
    // Restore points now and then: the follower must follow the chained
    // segments between them, and LATEST when a generation starts.
    manifestIntervalMs: 400,
    snapshotLogFactor: 0,
    compactionLevels: [1000],
    exactWindowMs: 0,
    ...overrides,
  });
}

describe('followSqlite', () => {
  it('publishes every state in commit order through growth, VACUUM shrink-regrow, new generations and compaction; readers never see a torn state; never writes', async () => {
    const backup = backedUp('backupd-follow-');
    const { directory, application, source, store, worker } = backup;
    const readOnly = new ReadOnlyStore(store);
    const target = join(directory, 'replica', 'app.db');
    const stop = new AbortController();
    const follower = followSqlite(readOnly, 'p', target, {
      pollIntervalMs: 20,
      latestEveryPolls: 3,
      signal: stop.signal,
    });
    let readers: ReturnType<typeof startReaders> | undefined;
    let run: ReturnType<typeof runFollower> | undefined;
    try {
      await worker.runOnce();
      run = runFollower(follower);
      readers = startReaders(directory, target, 2);
      let round = 0;
      const commit = () => {
        round += 1;
        transfer(application, round);
      };
      const caughtUp = async (what: string) => {
        await worker.runOnce();
        const expected = application.prepare('SELECT n FROM seq').get()!.n as number;
        await until(`${what}: the follower at seq ${expected}`, () => {
          if (!existsSync(target)) return false;
          const reader = new DatabaseSync(target, { readOnly: true, timeout: 5000 });
          try {
            return reader.prepare('SELECT n FROM seq').get()!.n === expected;
          } finally {
            reader.close();
          }
        });
        expect(hashOf(target), what).toBe(contentHash(application));
      };
      for (let step = 0; step < 6; step += 1) {
        for (let i = 0; i < 5; i += 1) commit();
        await caughtUp(`round ${step}`);
      }
      // Grow by about 2 MiB, shrink with VACUUM, grow again.
      application.exec(
        'INSERT INTO junk (body) SELECT randomblob(4000) FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 500) SELECT x FROM c)',
      );
      commit();
      await caughtUp('grown');
      application.exec('DELETE FROM junk');
      application.exec('VACUUM');
      commit();
      await caughtUp('shrunk');
      application.exec(
        'INSERT INTO junk (body) SELECT randomblob(3000) FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 300) SELECT x FROM c)',
      );
      commit();
      await caughtUp('regrown');
      // A new generation (a snapshot), then compaction of the commit log.
      await source.startGeneration?.();
      for (let i = 0; i < 5; i += 1) commit();
      await caughtUp('new generation');
      await new Promise((resolve) => setTimeout(resolve, 1100));
      for (let i = 0; i < 5; i += 1) commit();
      await caughtUp('after compaction');

      const reports = await readers.stop();
      readers = undefined;
      for (const report of reports) {
        expect(report.reads, JSON.stringify(report)).toBeGreaterThan(100);
        expect(report, JSON.stringify(report)).toMatchObject({ torn: 0, regressions: 0 });
      }
      stop.abort();
      await run.done;
      expect(readOnly.writes).toBe(0);
      const seqs = run.states.map((state) => state.commitSeq);
      expect(seqs.length).toBeGreaterThan(10);
      const generations = new Set(run.states.map((state) => state.walGeneration));
      expect(generations.size).toBeGreaterThan(1);
      // Most states came one segment at a time, not by a restore of everything.
      const incremental = run.states.filter((state) => state.objects === 1);
      expect(incremental.length, JSON.stringify(run.states)).toBeGreaterThan(run.states.length / 2);

      // Stopped: byte for byte what a restore of the same state gives.
      const last = run.states.at(-1)!;
      const check = join(directory, 'check');
      await restore(store, 'p', check, {
        target: { kind: 'commit', commitSeq: last.commitSeq },
        materializer: sqliteMaterializer({ databaseName: 'app.db' }),
      });
      expect(readFileSync(target).equals(readFileSync(join(check, 'app.db')))).toBe(true);
      expect(integrityCheck(target)).toBe('ok');
      expect(existsSync(join(directory, 'replica', '.app.db-follow'))).toBe(false);
      expect(existsSync(`${target}-journal`)).toBe(false);
    } finally {
      await readers?.stop();
      stop.abort();
      await run?.done.catch(() => {});
      await backup.close();
    }
  }, 120_000);

  it('refuses a target it did not create unless forced, and one written by someone else while it follows', async () => {
    const backup = backedUp('backupd-follow-refuse-');
    const { directory, application, store, worker } = backup;
    try {
      await worker.runOnce();
      const target = join(directory, 'other.db');
      const other = new DatabaseSync(target);
      other.exec('CREATE TABLE mine (x)');
      other.close();
      const refused = followSqlite(store, 'p', target);
      await expect(runFollower(refused).done).rejects.toSatisfy(
        (error) => FollowError.isInstance(error) && error.code === 'FOLLOW_TARGET_FOREIGN',
      );
      expect(hashOf(target)).not.toBe(contentHash(application));

      const stop = new AbortController();
      const forced = runFollower(
        followSqlite(store, 'p', target, { force: true, pollIntervalMs: 20, signal: stop.signal }),
      );
      await until('the forced follower', () => forced.states.length > 0);
      // Someone writes to the followed database: the next publish refuses.
      const intruder = new DatabaseSync(target, { timeout: 5000 });
      intruder.exec('INSERT INTO acct (bal) VALUES (1)');
      intruder.close();
      transfer(application, 1);
      await worker.runOnce();
      await expect(forced.done).rejects.toSatisfy(
        (error) => FollowError.isInstance(error) && error.code === 'FOLLOW_TARGET_CHANGED',
      );
    } finally {
      await backup.close();
    }
  }, 60_000);

  it('never applies a segment that fails its checks; keeps the last good state', async () => {
    const backup = backedUp('backupd-follow-hostile-', { worker: { manifestIntervalMs: 60_000 } });
    const { directory, application, store, writes, worker } = backup;
    const target = join(directory, 'replica.db');
    const stop = new AbortController();
    const run = runFollower(
      followSqlite(store, 'p', target, { pollIntervalMs: 20, signal: stop.signal }),
    );
    try {
      await worker.runOnce();
      transfer(application, 1);
      await worker.runOnce();
      await until('the first segment applied', () => run.states.at(-1)?.commitSeq === 1);
      const good = contentHash(application);
      // One byte of the next segment flipped.
      writes.mangle = (key, body) => {
        if (!key.endsWith('.seg')) return undefined;
        const copy = Uint8Array.from(body);
        copy[copy.byteLength - 3]! ^= 0x40;
        return copy;
      };
      transfer(application, 2);
      await worker.runOnce();
      expect(writes.mangled).toHaveLength(1);
      // Many polls later the target still shows the last good state.
      const polls = run.states.length;
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(run.states).toHaveLength(polls);
      expect(hashOf(target)).toBe(good);
      expect(integrityCheck(target)).toBe('ok');
    } finally {
      stop.abort();
      await run.done.catch(() => {});
      await backup.close();
    }
  }, 60_000);

  it('with until, stops at the newest state recorded at or before it, segment by segment and by a restore', async () => {
    let now = 1_000;
    const backup = backedUp('backupd-follow-until-', {
      source: { wallNow: () => now },
      worker: { manifestIntervalMs: 60_000 },
    });
    const { directory, application, worker, store } = backup;
    try {
      await worker.runOnce();
      const hashes: string[] = [];
      // Round r commits at (r + 1) s; the follower is asked for 4.5 s.
      const round = async (r: number) => {
        now = (r + 1) * 1000;
        transfer(application, r);
        transfer(application, r + 100);
        hashes[r] = contentHash(application);
        await worker.runOnce();
      };
      await round(1);
      // Followed from the start: segment by segment, then one past the time.
      const live = runFollower(
        followSqlite(store, 'p', join(directory, 'live.db'), { pollIntervalMs: 20, until: 4_500 }),
      );
      await until('the follower at round 1', () => live.states.at(-1)?.commitTime === 2_000);
      for (let r = 2; r <= 5; r += 1) await round(r);
      await live.done;
      expect(live.states.at(-1)?.commitTime).toBe(4_000);
      expect(hashOf(join(directory, 'live.db'))).toBe(hashes[3]);
      // Started after the time: one restore to it, and the end at once.
      const late = runFollower(
        followSqlite(store, 'p', join(directory, 'late.db'), { pollIntervalMs: 20, until: 3_500 }),
      );
      await late.done;
      expect(late.states.map((state) => state.commitTime)).toEqual([3_000]);
      expect(hashOf(join(directory, 'late.db'))).toBe(hashes[2]);
      // Before the backup's first commit: refused.
      await expect(
        runFollower(
          followSqlite(store, 'p', join(directory, 'early.db'), { pollIntervalMs: 20, until: 500 }),
        ).done,
      ).rejects.toSatisfy(
        (error) => FollowError.isInstance(error) && error.code === 'FOLLOW_UNTIL_BEFORE_BACKUP',
      );
    } finally {
      await backup.close();
    }
  }, 60_000);

  it('with segments off, polls LATEST alone (a HEAD per poll, no listing) and applies each restore point from the segments it names', async () => {
    const backup = backedUp('backupd-follow-latest-', { worker: { manifestIntervalMs: 0 } });
    const { directory, application, worker, store } = backup;
    const counted = new CountingStore(store);
    const stop = new AbortController();
    const run = runFollower(
      followSqlite(counted, 'p', join(directory, 'replica.db'), {
        pollIntervalMs: 20,
        segments: false,
        signal: stop.signal,
      }),
    );
    try {
      await worker.runOnce();
      await until('the first state', () => run.states.length === 1);
      for (let r = 1; r <= 4; r += 1) {
        transfer(application, r);
        await worker.runOnce();
        await until(`state ${r}`, () => run.states.at(-1)?.commitSeq === r);
      }
      // After the first restore, one segment per state, found by key.
      expect(run.states.slice(1).map((state) => state.objects)).toEqual([1, 1, 1, 1]);
      expect(hashOf(join(directory, 'replica.db'))).toBe(contentHash(application));
      const before = { ...counted.calls };
      await new Promise((resolve) => setTimeout(resolve, 300));
      const idle = Object.fromEntries(
        Object.entries(counted.calls).map(([operation, n]) => [
          operation,
          n - (before[operation] ?? 0),
        ]),
      );
      expect(idle.list ?? 0).toBe(0);
      expect(idle.listPages ?? 0).toBe(0);
      expect(idle.head).toBeGreaterThan(3);
      expect((idle.get ?? 0) + (idle.getStream ?? 0)).toBe(0);
    } finally {
      stop.abort();
      await run.done.catch(() => {});
      await backup.close();
    }
  }, 60_000);

  it('waits for a first backup, then follows it; a corrupt LATEST falls back as restore does', async () => {
    const backup = backedUp('backupd-follow-wait-', { worker: { manifestIntervalMs: 0 } });
    const { directory, application, store, writes, worker } = backup;
    const target = join(directory, 'replica.db');
    const stop = new AbortController();
    const events: string[] = [];
    const run = runFollower(
      followSqlite(store, 'p', target, {
        pollIntervalMs: 20,
        latestEveryPolls: 1,
        signal: stop.signal,
        onEvent: (event) => events.push(event.kind),
      }),
    );
    try {
      await until('a wait', () => events.includes('waiting'));
      expect(existsSync(target)).toBe(false);
      await worker.runOnce();
      await until('the first state', () => run.states.length === 1);
      transfer(application, 1);
      await worker.runOnce();
      writes.mangle = (key) =>
        key.endsWith('/LATEST') ? new TextEncoder().encode('garbage') : undefined;
      transfer(application, 2);
      await worker.runOnce();
      expect(new TextDecoder().decode((await store.get('p/LATEST'))!.body)).toBe('garbage');
      await until('the state after a corrupt LATEST', () => run.states.at(-1)?.commitSeq === 2);
      expect(run.states.at(-1)?.manifestKey).toBe('p/manifest/00000000000000000002.json');
      expect(hashOf(target)).toBe(contentHash(application));
    } finally {
      stop.abort();
      await run.done.catch(() => {});
      await backup.close();
    }
  }, 60_000);
});
