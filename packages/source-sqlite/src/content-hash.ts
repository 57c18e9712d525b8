/**
 * A content hash of a SQLite database as the application sees it: the schema
 * and every row of every table, in rowid order, blobs included. Two databases
 * with equal hashes hold the same data (page layout may differ), so a restore
 * drill can compare a restored database with its source without comparing
 * bytes. Reads every row: the cost is a full scan of every table.
 */
import { createHash } from 'node:crypto';
import type { DatabaseSync } from 'node:sqlite';

export function sqliteContentHash(database: DatabaseSync): string {
  const hash = createHash('sha256');
  const schema = database
    .prepare(
      "SELECT type, name, tbl_name, sql FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name",
    )
    .all() as { type: string; name: string; tbl_name: string; sql: string | null }[];
  for (const entry of schema) {
    hash.update(`${entry.type}\u0000${entry.name}\u0000${entry.sql ?? ''}\u0001`);
    if (entry.type !== 'table') continue;
    const rows = database
      .prepare(`SELECT * FROM "${entry.name.replaceAll('"', '""')}" ORDER BY rowid`)
      .all() as Record<string, unknown>[];
    for (const row of rows) {
      for (const [column, value] of Object.entries(row)) {
        hash.update(column);
        if (value instanceof Uint8Array) hash.update('b').update(value);
        else hash.update(`${typeof value}:${String(value)}`);
        hash.update('\u0002');
      }
      hash.update('\u0003');
    }
  }
  return hash.digest('hex');
}
