/**
 * The application under test, in its own process with its own node:sqlite
 * connection. Runs random transactions (inserts, updates, deletes, blobs big
 * enough for overflow pages, schema changes) and random checkpoints of every
 * mode; after each commit prints one JSON line `{ "commit": n, "hash": ... }`
 * (commit 0 is the state before its first transaction), and at the end
 * `{ "maxCheckpointMs": ms }`, the longest of its checkpoints.
 *
 * argv: <database> <transactions> <seed> <checkpoints: random|truncate-loop|passive-loop|none> [delayMs]
 */
import { DatabaseSync } from 'node:sqlite';
import { sqliteContentHash as contentHash } from '../src/content-hash.ts';

const [path, countText, seedText, checkpoints = 'random', delayText = '0'] = process.argv.slice(2);
if (!path || !countText || !seedText)
  throw new Error('usage: writer-child <db> <count> <seed> [checkpoints] [delayMs]');
const count = Number(countText);
const delayMs = Number(delayText);

let state = Number(seedText) >>> 0 || 1;
function random(): number {
  // xorshift32: reproducible from the seed.
  state ^= state << 13;
  state >>>= 0;
  state ^= state >>> 17;
  state ^= state << 5;
  state >>>= 0;
  return state / 0x100000000;
}
function pick<T>(items: readonly T[]): T {
  return items[Math.floor(random() * items.length)]!;
}
function bytes(length: number): Uint8Array {
  const out = new Uint8Array(length);
  for (let i = 0; i < length; i += 1) out[i] = Math.floor(random() * 256);
  return out;
}

const database = new DatabaseSync(path, { timeout: 10_000 });
database.exec('PRAGMA journal_mode=WAL');
// The application's own automatic checkpoints stay on (SQLite's default),
// as in a real application.
const checkpointer = new DatabaseSync(path, { timeout: 10_000 });

function tables(): string[] {
  return (
    database
      .prepare("SELECT name FROM sqlite_schema WHERE type='table' AND name LIKE 'items%'")
      .all() as { name: string }[]
  ).map((row) => row.name);
}

function oneTransaction(n: number): void {
  database.exec('BEGIN IMMEDIATE');
  try {
    const operations = 1 + Math.floor(random() * 4);
    for (let i = 0; i < operations; i += 1) {
      const names = tables();
      const roll = random();
      if (names.length === 0 || roll < 0.03) {
        const name = `items_${n}_${i}`;
        database.exec(
          `CREATE TABLE "${name}" (id INTEGER PRIMARY KEY, label TEXT, payload BLOB, counter INTEGER DEFAULT 0)`,
        );
        if (random() < 0.5) database.exec(`CREATE INDEX "${name}_label" ON "${name}"(label)`);
        continue;
      }
      const table = pick(names);
      if (roll < 0.05 && names.length > 1) {
        database.exec(`DROP TABLE "${table}"`);
      } else if (roll < 0.07) {
        database.exec(`ALTER TABLE "${table}" ADD COLUMN extra_${n}_${i} TEXT DEFAULT 'x${n}'`);
      } else if (roll < 0.55) {
        // Up to ~3 pages of blob: overflow pages.
        const size =
          random() < 0.25 ? 2000 + Math.floor(random() * 10_000) : Math.floor(random() * 200);
        database
          .prepare(`INSERT INTO "${table}" (label, payload) VALUES (?, ?)`)
          .run(`label-${n}-${i}-${Math.floor(random() * 1000)}`, bytes(size));
      } else if (roll < 0.8) {
        database
          .prepare(
            `UPDATE "${table}" SET counter = counter + 1, label = ? WHERE id IN (SELECT id FROM "${table}" ORDER BY random() LIMIT 3)`,
          )
          .run(`updated-${n}`);
      } else {
        database
          .prepare(
            `DELETE FROM "${table}" WHERE id IN (SELECT id FROM "${table}" ORDER BY id LIMIT ?)`,
          )
          .run(1 + Math.floor(random() * 4));
      }
    }
    // Every transaction changes at least this row, so every one is exactly one
    // SQLite commit (a transaction that changes nothing writes no WAL frame).
    database.prepare('UPDATE writer_clock SET commits = ? WHERE id = 1').run(n);
    database.exec('COMMIT');
  } catch (error) {
    database.exec('ROLLBACK');
    throw error;
  }
}

const modes = ['PASSIVE', 'FULL', 'RESTART', 'TRUNCATE'] as const;
// The longest any checkpoint of the application took: backupd must never
// make one wait (a FULL/RESTART/TRUNCATE checkpoint waits for readers).
let maxCheckpointMs = 0;
function timed(mode: string): void {
  const started = performance.now();
  checkpointer.prepare(`PRAGMA wal_checkpoint(${mode})`).get();
  maxCheckpointMs = Math.max(maxCheckpointMs, performance.now() - started);
}
function checkpoint(): void {
  if (checkpoints === 'random' && random() < 0.08) {
    timed(pick(modes));
  } else if (checkpoints === 'truncate-loop') {
    for (let i = 0; i < 3; i += 1) timed('TRUNCATE');
  } else if (checkpoints === 'passive-loop') {
    // Copies everything without restarting the WAL: the next commit restarts
    // it and overwrites its first frames.
    timed('PASSIVE');
  }
}

process.stdout.write(`${JSON.stringify({ commit: 0, hash: contentHash(database) })}\n`);
for (let n = 1; n <= count; n += 1) {
  oneTransaction(n);
  process.stdout.write(
    `${JSON.stringify({ commit: n, hash: contentHash(database), time: Date.now() })}\n`,
  );
  checkpoint();
  if (delayMs > 0) await new Promise((resolve) => setTimeout(resolve, delayMs));
  else if (n % 10 === 0) await new Promise((resolve) => setImmediate(resolve));
}
process.stdout.write(`${JSON.stringify({ maxCheckpointMs })}\n`);
checkpointer.close();
database.close();
