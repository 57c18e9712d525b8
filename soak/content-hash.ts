/**
 * A content hash of a SQLite database as an application sees it: the schema
 * and every row of every table in rowid order, blobs included. Two databases
 * with equal hashes hold the same data, whatever their page layout. The
 * writer's `soak_clock` row holds the commit number, so no two commits of one
 * run share a hash: a hash names exactly one writer commit.
 */
import { createHash } from 'node:crypto';
import type { DatabaseSync } from 'node:sqlite';

export function contentHash(database: DatabaseSync): string {
  const hash = createHash('sha256');
  const schema = database
    .prepare(
      "SELECT type, name, sql FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name",
    )
    .all() as { type: string; name: string; sql: string | null }[];
  for (const entry of schema) {
    hash.update(`${entry.type}\u0000${entry.name}\u0000${entry.sql ?? ''}\u0001`);
    if (entry.type !== 'table') continue;
    const rows = database
      .prepare(`SELECT * FROM "${entry.name.replaceAll('"', '""')}" ORDER BY rowid`)
      .all() as Record<string, unknown>[];
    for (const row of rows) {
      for (const [column, value] of Object.entries(row)) {
        hash.update(column);
        if (value instanceof Uint8Array) {
          hash.update('b');
          hash.update(value);
        } else {
          hash.update(`${typeof value}:${String(value)}`);
        }
        hash.update('\u0002');
      }
      hash.update('\u0003');
    }
  }
  return hash.digest('hex');
}
