/**
 * The application under test, in its own process with its own `node:sqlite`
 * connections: random transactions (inserts, updates, deletes, blobs large
 * enough for overflow pages, occasional schema changes) and, at random,
 * checkpoints of every mode (PASSIVE, FULL, RESTART, TRUNCATE) from a second
 * connection, as a real application might run them.
 *
 * After every commit it appends one line `{"commit":n,"hash":"…"}` to the
 * records file (synchronously, before the next transaction), so the record
 * of a commit exists as soon as the commit does. Line 0 is the state before
 * its first transaction. On SIGTERM it finishes the transaction in hand,
 * prints one JSON line of statistics on stdout and exits 0.
 *
 * argv: <database> <records file> <seed>
 */
import { closeSync, openSync, writeSync } from 'node:fs';
import { DatabaseSync } from 'node:sqlite';
import { setTimeout as sleep } from 'node:timers/promises';
import { sqliteContentHash as contentHash } from '@x/source-sqlite';
import { Random } from './random.ts';

const [path, recordsPath, seedText] = process.argv.slice(2);
if (!path || !recordsPath || !seedText) throw new Error('usage: writer.ts <db> <records> <seed>');
const random = new Random(Number(seedText));

/** Rows kept per table, so the database (and hashing it after every commit) stays small. */
const ROW_CAP = 250;
const CHECKPOINT_MODES = ['PASSIVE', 'FULL', 'RESTART', 'TRUNCATE'] as const;

const database = new DatabaseSync(path, { timeout: 15_000 });
const checkpointer = new DatabaseSync(path, { timeout: 3_000 });
const records = openSync(recordsPath, 'a');

const checkpoints: Record<string, { calls: number; busy: number; errors: number }> = {};
for (const mode of CHECKPOINT_MODES) checkpoints[mode] = { calls: 0, busy: 0, errors: 0 };

let stopping = false;
process.on('SIGTERM', () => {
  stopping = true;
});

function record(commit: number): void {
  writeSync(records, `${JSON.stringify({ commit, hash: contentHash(database) })}\n`);
}

function tables(): string[] {
  return (
    database
      .prepare("SELECT name FROM sqlite_schema WHERE type = 'table' AND name LIKE 'items%'")
      .all() as { name: string }[]
  ).map((row) => row.name);
}

function oneTransaction(commit: number): void {
  database.exec('BEGIN IMMEDIATE');
  try {
    const operations = 1 + Math.floor(random.next() * 4);
    for (let index = 0; index < operations; index += 1) {
      const names = tables();
      const roll = random.next();
      if (names.length === 0 || (roll < 0.01 && names.length < 5)) {
        const name = `items_${commit}_${index}`;
        database.exec(
          `CREATE TABLE "${name}" (id INTEGER PRIMARY KEY, label TEXT, payload BLOB, counter INTEGER DEFAULT 0)`,
        );
        if (random.chance(0.5)) database.exec(`CREATE INDEX "${name}_label" ON "${name}"(label)`);
        continue;
      }
      const table = random.pick(names);
      const quoted = `"${table}"`;
      if (roll < 0.015 && names.length > 1) {
        database.exec(`DROP TABLE ${quoted}`);
      } else if (roll < 0.02) {
        database.exec(`ALTER TABLE ${quoted} ADD COLUMN extra_${commit}_${index} TEXT DEFAULT 'x'`);
      } else if (roll < 0.55) {
        // A quarter of the inserts are blobs of 2–14 KB: overflow pages.
        const size = random.chance(0.25) ? random.integer(2_000, 14_000) : random.integer(0, 200);
        database
          .prepare(`INSERT INTO ${quoted} (label, payload) VALUES (?, ?)`)
          .run(`label-${commit}-${index}-${random.integer(0, 999)}`, random.bytes(size));
        const { rows } = database.prepare(`SELECT count(*) AS rows FROM ${quoted}`).get() as {
          rows: number;
        };
        if (rows > ROW_CAP) {
          database
            .prepare(
              `DELETE FROM ${quoted} WHERE id IN (SELECT id FROM ${quoted} ORDER BY id LIMIT ?)`,
            )
            .run(rows - ROW_CAP + random.integer(0, 20));
        }
      } else if (roll < 0.85) {
        database
          .prepare(
            `UPDATE ${quoted} SET counter = counter + 1, label = ? WHERE id IN (SELECT id FROM ${quoted} ORDER BY random() LIMIT 3)`,
          )
          .run(`updated-${commit}`);
      } else {
        database
          .prepare(
            `DELETE FROM ${quoted} WHERE id IN (SELECT id FROM ${quoted} ORDER BY id LIMIT ?)`,
          )
          .run(random.integer(1, 4));
      }
    }
    // Every transaction changes this row: each is exactly one SQLite commit,
    // and its content hash is unique to it.
    database.prepare('UPDATE soak_clock SET commits = ? WHERE id = 1').run(commit);
    database.exec('COMMIT');
  } catch (error) {
    if (database.isTransaction) database.exec('ROLLBACK');
    throw error;
  }
}

function maybeCheckpoint(): void {
  if (!random.chance(0.03)) return;
  const mode = random.pick(CHECKPOINT_MODES);
  const counts = checkpoints[mode]!;
  counts.calls += 1;
  try {
    const result = checkpointer.prepare(`PRAGMA wal_checkpoint(${mode})`).get() as {
      busy: number;
    };
    if (result.busy) counts.busy += 1;
  } catch {
    // SQLITE_BUSY past the checkpointer's timeout: an application would retry later.
    counts.errors += 1;
  }
}

let commit = 0;
record(0);
let burst = 0;
while (!stopping) {
  commit += 1;
  oneTransaction(commit);
  record(commit);
  maybeCheckpoint();
  if (burst > 0) {
    // A burst: commits back to back, so the WAL grows past backupd's thresholds.
    burst -= 1;
    if (burst % 10 === 0) await new Promise((resolve) => setImmediate(resolve));
  } else if (random.chance(0.004)) {
    burst = random.integer(100, 400);
  } else {
    await sleep(random.integer(2, 40));
  }
}
closeSync(records);
checkpointer.close();
database.close();
process.stdout.write(`${JSON.stringify({ commits: commit, checkpoints })}\n`);
