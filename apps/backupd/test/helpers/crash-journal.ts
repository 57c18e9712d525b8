/**
 * What the crash-restart test and its writer process share: the seeded
 * random generator, the content hash of a database the writer writes, and
 * the journal of its commits.
 *
 * The journal holds one JSON line per commit, written and fsynced right
 * after the commit returned: `{"seq": n, "time": ms, "hash": "…"}`. `seq`
 * counts the writer's commits from 1 (0 is the empty schema) and is also
 * stored in the database itself (`meta.seq`), so every committed state is
 * distinct and a restored database says which commit it holds; `time` is
 * the wall clock right after COMMIT returned.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { DatabaseSync } from 'node:sqlite';

/** mulberry32: a small, fast, seeded generator of floats in [0, 1). Same seed, same sequence. */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The schema the writer creates (its commit 0). */
export const CRASH_SCHEMA = `
  CREATE TABLE IF NOT EXISTS items (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
  CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, seq INTEGER NOT NULL);
  INSERT OR IGNORE INTO meta (key, seq) VALUES ('seq', 0);
`;

/** SHA-256 of the writer's tables in key order: equal hashes, equal content. */
export function crashStateHash(database: DatabaseSync): string {
  const hash = createHash('sha256');
  const seq = database.prepare("SELECT seq FROM meta WHERE key = 'seq'").get() as
    | { seq: number }
    | undefined;
  hash.update(`seq=${seq?.seq ?? 'none'}\n`);
  for (const row of database.prepare('SELECT id, value FROM items ORDER BY id').iterate()) {
    const { id, value } = row as { id: number; value: string };
    hash.update(`${id}\t${value}\n`);
  }
  return hash.digest('hex');
}

/** The commit number a database holds (`meta.seq`), or undefined without the table. */
export function crashStateSeq(database: DatabaseSync): number | undefined {
  try {
    const row = database.prepare("SELECT seq FROM meta WHERE key = 'seq'").get() as
      | { seq: number }
      | undefined;
    return row?.seq;
  } catch {
    return undefined;
  }
}

export interface JournalEntry {
  readonly seq: number;
  /** Wall-clock ms right after COMMIT returned. */
  readonly time: number;
  readonly hash: string;
}

/**
 * The journal's complete lines, in order. A torn last line (the writer
 * appending right now) is left out: every line before it was fsynced whole.
 * @throws Error when the lines are not consecutive commits from 0.
 */
export function readJournal(path: string): JournalEntry[] {
  const lines = readFileSync(path, 'utf8').split('\n');
  lines.pop(); // after the last newline: empty, or a line still being written
  const entries = lines.map((line) => JSON.parse(line) as JournalEntry);
  entries.forEach((entry, index) => {
    if (entry.seq !== index)
      throw new Error(`journal ${path}: line ${index + 1} holds commit ${entry.seq}`);
  });
  return entries;
}

/** The writer's state at wall time `time`: the newest commit recorded at or before it. */
export function journalStateAt(
  entries: readonly JournalEntry[],
  time: number,
): JournalEntry | undefined {
  let found: JournalEntry | undefined;
  for (const entry of entries) {
    if (entry.time > time) break;
    found = entry;
  }
  return found;
}
