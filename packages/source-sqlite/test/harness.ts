/**
 * Test harness: drives a SqliteTap the way the worker does (capture, ship the
 * snapshot and new log bytes to a store, then let the tap advance and
 * checkpoint), and restores from what the store holds. The production loop is
 * the worker with `SqliteSource`; this one is small enough to reason about in
 * a test and records what it shipped.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import type { ObjectStore } from '@x/store';
import { afterEach } from 'vitest';
import { restoreSqliteDatabase, type SqliteRestoreResult } from '../src/rebuild-database.ts';
import type { CheckpointReport, SqliteTap } from '../src/tap.ts';

const pad = (n: number) => n.toString().padStart(20, '0');

export interface ShippedGeneration {
  readonly id: string;
  readonly snapshotKey: string;
  readonly segments: { key: string; start: number; end: number; commits: number }[];
  /** Writer commits before this generation's snapshot (set by the test). */
  commitsBefore: number;
}

export class TapShipper {
  readonly generations: ShippedGeneration[] = [];
  readonly checkpoints: CheckpointReport[] = [];
  peakWalBytes = 0;
  readonly #store: ObjectStore;
  readonly #prefix: string;
  readonly #tap: SqliteTap;
  #shippedLength = 0;

  constructor(store: ObjectStore, prefix: string, tap: SqliteTap) {
    this.#store = store;
    this.#prefix = prefix;
    this.#tap = tap;
  }

  get current(): ShippedGeneration | undefined {
    return this.generations.at(-1);
  }

  /** Commits shipped in the current generation. */
  get shippedCommits(): number {
    return this.current?.segments.reduce((sum, segment) => sum + segment.commits, 0) ?? 0;
  }

  /** One step: capture, ship, maintain. */
  async step(options: { maintain?: boolean } = {}): Promise<void> {
    const tap = this.#tap;
    tap.capture();
    if (this.current?.id !== tap.generationId) await this.#shipSnapshot();
    const range = tap.readLog(this.#shippedLength, tap.logLength);
    if (range !== null) {
      const generation = this.current!;
      const key = `${this.#prefix}/wal/${generation.id}/${pad(this.#shippedLength)}-${pad(range.end)}.segment`;
      await this.#store.put(key, range.bytes, { mode: 'create' });
      generation.segments.push({
        key,
        start: this.#shippedLength,
        end: range.end,
        commits: range.commits,
      });
      this.#shippedLength = range.end;
      tap.releaseLog(this.#shippedLength);
    }
    if (options.maintain ?? true) {
      tap.maintain();
      this.checkpoints.push(...tap.takeCheckpointReports());
    }
  }

  async #shipSnapshot(): Promise<void> {
    const tap = this.#tap;
    const snapshot = tap.snapshot();
    if (snapshot === null) throw new Error('generation started without a snapshot');
    const key = `${this.#prefix}/snapshots/${tap.generationId}.snapshot`;
    await this.#store.upload(key, snapshot.read(), { mode: 'create' });
    this.generations.push({
      id: tap.generationId,
      snapshotKey: key,
      segments: [],
      commitsBefore: 0,
    });
    this.#shippedLength = 0;
    tap.releaseSnapshot();
  }

  /** Restores commit `commits` of generation `generation` (default: the latest). */
  async restore(
    targetPath: string,
    options: {
      generation?: ShippedGeneration;
      commits?: number;
      time?: number;
      force?: boolean;
    } = {},
  ): Promise<SqliteRestoreResult> {
    const generation = options.generation ?? this.current!;
    const store = this.#store;
    const snapshot = await store.get(generation.snapshotKey);
    if (snapshot === null) throw new Error(`missing ${generation.snapshotKey}`);
    async function* log(): AsyncIterable<Uint8Array> {
      for (const segment of generation.segments) {
        const object = await store.get(segment.key);
        if (object === null) throw new Error(`missing ${segment.key}`);
        yield object.body;
      }
    }
    return restoreSqliteDatabase({
      targetPath,
      snapshot: snapshot.body,
      log: log(),
      ...(options.commits !== undefined ? { commits: options.commits } : {}),
      ...(options.time !== undefined ? { time: options.time } : {}),
      ...(options.force !== undefined ? { force: options.force } : {}),
    });
  }
}

export interface WriterRun {
  readonly hashes: string[];
  /** The longest checkpoint the application ran (set when it exits). */
  readonly checkpoints: { maxMs: number };
  readonly times: number[];
  readonly done: Promise<void>;
  /** True once the writer exited, successfully or not (`done` says which). */
  readonly finished: boolean;
  kill(): void;
}

/** Starts the writer child; its commit hashes arrive in `hashes[n]`. */
export function startWriter(
  databasePath: string,
  options: {
    transactions: number;
    seed: number;
    checkpoints: 'random' | 'truncate-loop' | 'passive-loop' | 'none';
    delayMs?: number;
  },
): WriterRun {
  const child = spawn(
    process.execPath,
    [
      '--conditions=@x/source',
      '--no-warnings',
      join(import.meta.dirname, 'writer-child.ts'),
      databasePath,
      String(options.transactions),
      String(options.seed),
      options.checkpoints,
      String(options.delayMs ?? 0),
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const hashes: string[] = [];
  const times: number[] = [];
  const checkpoints = { maxMs: Number.NaN };
  let buffered = '';
  let errors = '';
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (text: string) => {
    buffered += text;
    let newline = buffered.indexOf('\n');
    while (newline >= 0) {
      const line = JSON.parse(buffered.slice(0, newline)) as {
        commit?: number;
        hash?: string;
        time?: number;
        maxCheckpointMs?: number;
      };
      if (line.maxCheckpointMs !== undefined) checkpoints.maxMs = line.maxCheckpointMs;
      else if (line.commit !== undefined && line.hash !== undefined) {
        hashes[line.commit] = line.hash;
        times[line.commit] = line.time ?? 0;
      }
      buffered = buffered.slice(newline + 1);
      newline = buffered.indexOf('\n');
    }
  });
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (text: string) => {
    errors += text;
  });
  const done = new Promise<void>((resolve, reject) => {
    // 'close', not 'exit': only then has every line of stdout arrived.
    child.on('close', (code, signal) => {
      if (code === 0) resolve();
      else reject(new Error(`writer exited with ${code ?? signal}: ${errors}`));
    });
  });
  let finished = false;
  const settle = () => {
    finished = true;
  };
  done.then(settle, settle);
  return {
    hashes,
    times,
    checkpoints,
    done,
    get finished() {
      return finished;
    },
    kill: () => child.kill('SIGKILL'),
  };
}

/** Creates a WAL-mode database with one table, as the application would. */
export function createDatabase(path: string): void {
  const database = new DatabaseSync(path);
  database.exec('PRAGMA journal_mode=WAL');
  database.exec(
    'CREATE TABLE items_seed (id INTEGER PRIMARY KEY, label TEXT, payload BLOB, counter INTEGER DEFAULT 0)',
  );
  database.exec("INSERT INTO items_seed (label, payload) VALUES ('seed', x'00')");
  database.exec('CREATE TABLE writer_clock (id INTEGER PRIMARY KEY, commits INTEGER)');
  database.exec('INSERT INTO writer_clock VALUES (1, 0)');
  database.close();
}

/**
 * A fresh directory with an application's WAL-mode database in it (its own
 * checkpoints off, one table `t (id, body)`); both are cleaned up through
 * `cleanups`, in reverse order.
 */
export function openApplicationDatabase(
  prefix: string,
  cleanups: (() => void)[],
): { path: string; application: DatabaseSync } {
  const directory = mkdtempSync(join(tmpdir(), prefix));
  cleanups.push(() => rmSync(directory, { recursive: true, force: true }));
  const path = join(directory, 'app.db');
  const application = new DatabaseSync(path);
  cleanups.push(() => application.close());
  application.exec('PRAGMA journal_mode=WAL; PRAGMA wal_autocheckpoint=0');
  application.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, body BLOB)');
  return { path, application };
}

export function hashOf(path: string, contentHash: (database: DatabaseSync) => string): string {
  const database = new DatabaseSync(path, { readOnly: false });
  try {
    return contentHash(database);
  } finally {
    database.close();
  }
}

/**
 * Temporary directories and things to close, owned by one test file and
 * released after each of its tests (closers first, newest first, then the
 * directories). Call once at the top of the file.
 */
export function testWorkspace(): {
  directory(name: string): string;
  onCleanup(close: () => Promise<void> | void): void;
} {
  const directories: string[] = [];
  const closers: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close();
    for (const directory of directories.splice(0))
      rmSync(directory, { recursive: true, force: true });
  });
  return {
    directory(name) {
      const directory = mkdtempSync(join(tmpdir(), `backupd-${name}-`));
      directories.push(directory);
      return directory;
    },
    onCleanup(close) {
      closers.push(close);
    },
  };
}
