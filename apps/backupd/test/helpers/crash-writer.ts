/**
 * The application of the crash-restart test, a process of its own: its own
 * node:sqlite connection to a WAL-mode database, committing seeded random
 * transactions (1–20 row operations each, inserts, updates and deletes,
 * every one also setting `meta.seq`) with short random pauses, and now and
 * then an explicit `PRAGMA wal_checkpoint(PASSIVE|FULL|RESTART|TRUNCATE)`
 * as applications run them. Each commit is appended to the journal and
 * fsynced before the next begins (see crash-journal.ts).
 *
 * Driven by lines on stdin, answered on stdout:
 * - `pause`  → finishes the transaction under way, then `paused <seq>`; no
 *   commit until `resume` (answered `resumed <seq>`);
 * - `stop`   → `stopped <seq>`, closes the database, exits 0.
 *
 * Usage: node crash-writer.ts <db> <journal.jsonl> <seed> [maxSleepMs]
 */
import { closeSync, fsyncSync, openSync, writeSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { DatabaseSync } from 'node:sqlite';
import { CRASH_SCHEMA, crashStateHash, seededRandom } from './crash-journal.ts';

const [databasePath, journalPath, seedText, maxSleepText] = process.argv.slice(2);
if (!databasePath || !journalPath || seedText === undefined) {
  console.error('usage: crash-writer.ts <db> <journal.jsonl> <seed> [maxSleepMs]');
  process.exit(2);
}
const random = seededRandom(Number(seedText));
const maxSleepMs = Number(maxSleepText ?? '20');
/** Rows the table hovers around: enough pages to free and reuse, a hash cheap after every commit. */
const TARGET_ROWS = 300;
const CHECKPOINT_MODES = ['PASSIVE', 'FULL', 'RESTART', 'TRUNCATE'] as const;

const database = new DatabaseSync(databasePath);
database.exec('PRAGMA journal_mode = WAL');
database.exec('PRAGMA busy_timeout = 10000');
database.exec(CRASH_SCHEMA);
const journal = openSync(journalPath, 'a');

let seq = 0;
function record(): void {
  const line = `${JSON.stringify({ seq, time: Date.now(), hash: crashStateHash(database) })}\n`;
  writeSync(journal, line);
  fsyncSync(journal);
}
record();

const ids: number[] = (
  database.prepare('SELECT id FROM items ORDER BY id').all() as { id: number }[]
).map((row) => row.id);
let nextId = ids.length === 0 ? 1 : ids.at(-1)! + 1;
const insert = database.prepare('INSERT INTO items (id, value) VALUES (?, ?)');
const update = database.prepare('UPDATE items SET value = ? WHERE id = ?');
const remove = database.prepare('DELETE FROM items WHERE id = ?');
const setSeq = database.prepare("UPDATE meta SET seq = ? WHERE key = 'seq'");

function value(): string {
  const length = 10 + Math.floor(random() * 600);
  return `${seq}:`.padEnd(length, String.fromCharCode(97 + Math.floor(random() * 26)));
}

function transaction(): void {
  const operations = 1 + Math.floor(random() * 20);
  database.exec('BEGIN IMMEDIATE');
  seq += 1;
  for (let index = 0; index < operations; index += 1) {
    const roll = random();
    // Fewer deletes while the table is small, more once it is past its size.
    const deleteShare = ids.length < TARGET_ROWS / 2 ? 0.1 : ids.length > TARGET_ROWS ? 0.5 : 0.3;
    if (ids.length === 0 || roll < 0.7 - deleteShare) {
      insert.run(nextId, value());
      ids.push(nextId);
      nextId += 1;
    } else if (roll < 0.7) {
      const at = Math.floor(random() * ids.length);
      remove.run(ids[at]!);
      ids.splice(at, 1);
    } else {
      update.run(value(), ids[Math.floor(random() * ids.length)]!);
    }
  }
  setSeq.run(seq);
  database.exec('COMMIT');
  record();
  if (random() < 0.04) {
    const mode = CHECKPOINT_MODES[Math.floor(random() * CHECKPOINT_MODES.length)]!;
    database.prepare(`PRAGMA wal_checkpoint(${mode})`).get();
  }
}

type State = 'running' | 'pausing' | 'paused' | 'stopping';
// Read through a function: the stdin handler changes it between the loop's checks.
let state: State = 'running';
const current = (): State => state;
let wake: (() => void) | null = null;
createInterface({ input: process.stdin }).on('line', (line) => {
  const command = line.trim();
  if (command === 'pause' && state === 'running') state = 'pausing';
  else if (command === 'resume' && (state === 'paused' || state === 'pausing')) {
    state = 'running';
    process.stdout.write(`resumed ${seq}\n`);
  } else if (command === 'stop') state = 'stopping';
  wake?.();
});

for (;;) {
  if (current() === 'stopping') break;
  if (current() === 'pausing') {
    state = 'paused';
    process.stdout.write(`paused ${seq}\n`);
  }
  if (current() === 'paused') {
    await new Promise<void>((resolve) => {
      wake = resolve;
    });
    wake = null;
    continue;
  }
  transaction();
  await new Promise((resolve) => setTimeout(resolve, Math.floor(random() * maxSleepMs)));
}
database.close();
closeSync(journal);
process.stdout.write(`stopped ${seq}\n`);
process.exit(0);
