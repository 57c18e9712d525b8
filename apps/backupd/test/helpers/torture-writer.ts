/**
 * The application of the SQLite torture test, a process of its own with its
 * own node:sqlite connection: it runs a plan of steps the test chose from a
 * seed (bursts of small commits, large transactions, rows dropped so the
 * database shrinks and the same rows written again, VACUUM, checkpoints)
 * on a WAL-mode database with the plan's `auto_vacuum` mode. Every
 * transaction also bumps `meta.seq`, so no two committed states hash alike
 * and a restored database says which commit it holds.
 *
 * At each `point` step it prints one JSON line ({@link TorturePoint}) with the
 * content hash of the database (`sqliteContentHash`, what the test checks
 * restores with) and waits, idle, for a line `go` on stdin. After the last
 * step it closes the database and exits 0.
 *
 * Usage: node --conditions=@x/source torture-writer.ts <db> <plan.json>
 */
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { DatabaseSync } from 'node:sqlite';
import { setTimeout as sleep } from 'node:timers/promises';
import { sqliteContentHash } from '@x/source-sqlite';

/** How the database gives pages back: `none` needs a VACUUM, `incremental` a `PRAGMA incremental_vacuum`. */
export type VacuumMode = 'full' | 'incremental' | 'none';

export type TortureStep =
  /** Small transactions (inserts, updates, deletes of a few rows), with pauses of up to `maxPauseMs`. */
  | { readonly kind: 'burst'; readonly commits: number; readonly maxPauseMs: number }
  /**
   * The rows of `group` (the same bytes each time the group is written, so
   * writing it again after a drop rebuilds near-identical pages) in
   * `commits` transactions; `bytes` in all.
   */
  | {
      readonly kind: 'grow';
      readonly group: number;
      readonly bytes: number;
      readonly commits: number;
    }
  /** Deletes the rows of `group` in one transaction, then gives the pages back as the mode does. */
  | { readonly kind: 'drop'; readonly group: number }
  | { readonly kind: 'vacuum' }
  | { readonly kind: 'checkpoint'; readonly mode: 'PASSIVE' | 'TRUNCATE' }
  /** Idle until the test says `go`; the test restarts `backupd replicate` there with `restart`. */
  | { readonly kind: 'point'; readonly label: string; readonly restart?: 'SIGTERM' | 'SIGKILL' };

export interface TorturePlan {
  readonly seed: number;
  readonly vacuum: VacuumMode;
  readonly steps: readonly TortureStep[];
}

/** What the writer prints at a `point` step, idle until told `go`. */
export interface TorturePoint {
  readonly point: number;
  readonly label: string;
  /** The writer's commits so far (`meta.seq`). */
  readonly seq: number;
  readonly hash: string;
  /** Wall-clock ms just before the last transaction began: backupd cannot have seen its commit earlier. */
  readonly lastBeganAt: number;
  /** Wall-clock ms once the last transaction (and its page giveback, if any) returned. */
  readonly idleFrom: number;
  readonly pageCount: number;
  readonly pageSize: number;
}

const ROW_BYTES = 3500;

/** xorshift32 over a seed: reproducible bytes and choices. */
function generator(seed: number): () => number {
  let state = seed >>> 0 || 0x9e3779b9;
  return () => {
    state ^= state << 13;
    state >>>= 0;
    state ^= state >>> 17;
    state ^= state << 5;
    state >>>= 0;
    return state;
  };
}

/** The bytes of row `index` of `group`: the same on every write of the group. */
function groupRow(seed: number, group: number, index: number): Uint8Array {
  const next = generator((seed * 31 + group * 1_000_003 + index * 7919) >>> 0);
  const words = new Uint32Array(ROW_BYTES / 4);
  for (let i = 0; i < words.length; i += 1) words[i] = next();
  return new Uint8Array(words.buffer);
}

async function main(): Promise<void> {
  const [databasePath, planPath] = process.argv.slice(2);
  if (!databasePath || !planPath) {
    console.error('usage: torture-writer.ts <db> <plan.json>');
    process.exit(2);
  }
  const plan = JSON.parse(readFileSync(planPath, 'utf8')) as TorturePlan;
  const random = generator(plan.seed ^ 0x5bd1e995);
  const below = (n: number) => random() % n;

  const database = new DatabaseSync(databasePath, { timeout: 20_000 });
  // auto_vacuum takes effect only on a database with no table yet.
  database.exec(`PRAGMA auto_vacuum = ${plan.vacuum.toUpperCase()}`);
  database.exec('PRAGMA journal_mode = WAL');
  database.exec(`
    CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, seq INTEGER NOT NULL);
    INSERT OR IGNORE INTO meta (key, seq) VALUES ('seq', 0);
    CREATE TABLE IF NOT EXISTS items (id INTEGER PRIMARY KEY, note TEXT NOT NULL);
    CREATE TABLE IF NOT EXISTS grouped (id INTEGER PRIMARY KEY, grp INTEGER NOT NULL, body BLOB NOT NULL);
    CREATE INDEX IF NOT EXISTS grouped_by_group ON grouped (grp);
  `);
  const mode = (database.prepare('PRAGMA auto_vacuum').get() as { auto_vacuum: number })
    .auto_vacuum;
  if (mode !== { none: 0, full: 1, incremental: 2 }[plan.vacuum])
    throw new Error(`auto_vacuum is ${mode}, not the plan's ${plan.vacuum}`);

  const bumpSeq = database.prepare("UPDATE meta SET seq = seq + 1 WHERE key = 'seq'");
  const insertItem = database.prepare('INSERT INTO items (note) VALUES (?)');
  const updateItem = database.prepare('UPDATE items SET note = ? WHERE id = ?');
  const deleteItem = database.prepare('DELETE FROM items WHERE id = ?');
  const itemIds = database.prepare('SELECT id FROM items ORDER BY id');
  const insertGrouped = database.prepare('INSERT INTO grouped (id, grp, body) VALUES (?, ?, ?)');
  const deleteGroup = database.prepare('DELETE FROM grouped WHERE grp = ?');
  let seq = 0;
  let lastBeganAt = Date.now();

  function transaction(body: () => void): void {
    lastBeganAt = Date.now();
    database.exec('BEGIN IMMEDIATE');
    try {
      body();
      bumpSeq.run();
      database.exec('COMMIT');
      seq += 1;
    } catch (error) {
      database.exec('ROLLBACK');
      throw error;
    }
  }

  function note(): string {
    const length = 20 + below(1500);
    return `${seq}:${'abcdefghijklmnopqrstuvwxyz'[below(26)]!.repeat(length)}`;
  }

  function smallTransaction(): void {
    const ids = (itemIds.all() as { id: number }[]).map((row) => row.id);
    transaction(() => {
      const operations = 1 + below(8);
      for (let i = 0; i < operations; i += 1) {
        const roll = below(10);
        if (ids.length < 20 || roll < 5) insertItem.run(note());
        else if (roll < 8) updateItem.run(note(), ids[below(ids.length)]!);
        else deleteItem.run(ids.splice(below(ids.length), 1)[0]!);
      }
    });
  }

  function grow(group: number, bytes: number, commits: number): void {
    const rows = Math.max(1, Math.round(bytes / ROW_BYTES));
    const perCommit = Math.ceil(rows / commits);
    for (let first = 0; first < rows; first += perCommit)
      transaction(() => {
        for (let index = first; index < Math.min(rows, first + perCommit); index += 1)
          insertGrouped.run(group * 1_000_000 + index, group, groupRow(plan.seed, group, index));
      });
  }

  // A VACUUM changes no content: the commit after it makes the state a
  // restore can only reach by taking the VACUUM in too.
  function giveBack(): void {
    if (plan.vacuum === 'none') database.exec('VACUUM');
    else if (plan.vacuum === 'incremental') {
      // Sometimes part of the free pages only: the rest stays free in the file.
      const pages = below(3) === 0 ? `(${1 + below(200)})` : '';
      database.prepare(`PRAGMA incremental_vacuum${pages}`).all();
    }
    if (plan.vacuum !== 'full') transaction(() => {});
  }

  const commands = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
  let point = 0;
  for (const step of plan.steps) {
    switch (step.kind) {
      case 'burst':
        for (let i = 0; i < step.commits; i += 1) {
          smallTransaction();
          if (step.maxPauseMs > 0) await sleep(below(step.maxPauseMs + 1));
        }
        break;
      case 'grow':
        grow(step.group, step.bytes, step.commits);
        break;
      case 'drop':
        transaction(() => deleteGroup.run(step.group));
        giveBack();
        break;
      case 'vacuum':
        database.exec('VACUUM');
        transaction(() => {});
        break;
      case 'checkpoint':
        database.prepare(`PRAGMA wal_checkpoint(${step.mode})`).all();
        break;
      case 'point': {
        const idleFrom = Date.now();
        const { page_count: pageCount } = database.prepare('PRAGMA page_count').get() as {
          page_count: number;
        };
        const { page_size: pageSize } = database.prepare('PRAGMA page_size').get() as {
          page_size: number;
        };
        const record: TorturePoint = {
          point,
          label: step.label,
          seq,
          hash: sqliteContentHash(database),
          lastBeganAt,
          idleFrom,
          pageCount,
          pageSize,
        };
        point += 1;
        process.stdout.write(`${JSON.stringify(record)}\n`);
        const command = await commands.next();
        if (command.done || command.value.trim() !== 'go')
          throw new Error(`expected "go" after point ${record.point}, got ${command.value}`);
        break;
      }
    }
  }
  database.close();
  process.exit(0);
}

await main();
