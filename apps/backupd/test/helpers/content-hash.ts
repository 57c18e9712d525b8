/** The content hash of a SQLite database file (`@x/source-sqlite`'s `sqliteContentHash`), opened read-only. */
import { DatabaseSync } from 'node:sqlite';
import { sqliteContentHash } from '@x/source-sqlite';

export function databaseHash(path: string): string {
  const database = new DatabaseSync(path, { readOnly: true });
  try {
    return sqliteContentHash(database);
  } finally {
    database.close();
  }
}
