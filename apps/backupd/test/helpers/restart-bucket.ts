/**
 * What the restart tests (idle-restart, crash-restart) look at: a `file://`
 * bucket's files and what a restart added to them, and the 2.3 MiB database
 * they back up.
 */
import { readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { DatabaseSync } from 'node:sqlite';

/** Every file under `root` but the lease: relative path → size. */
export function bucketFiles(root: string): Map<string, number> {
  const files = new Map<string, number>();
  const walk = (directory: string) => {
    for (const entry of readdirSync(directory, { withFileTypes: true })) {
      const path = join(directory, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name !== 'LEASE') files.set(relative(root, path), statSync(path).size);
    }
  };
  walk(root);
  return files;
}

/** Bytes of the files `after` holds that `before` did not (or held at another size). */
export function addedBytes(before: Map<string, number>, after: Map<string, number>): number {
  let added = 0;
  for (const [path, size] of after) if (before.get(path) !== size) added += size;
  return added;
}

/** The snapshot files, sorted. */
export const snapshots = (files: Map<string, number>): string[] =>
  [...files.keys()].filter((path) => path.includes('snapshots')).sort();

/** Row `id`'s body as {@link createRestartDatabase} wrote it: 4 KiB of varied bytes. */
export function originalBody(id: number): Uint8Array {
  const body = new Uint8Array(4096);
  for (let j = 0; j < body.length; j += 1)
    body[j] = ((id - 1) * 31 + j * 7 + ((j * j) >> 3)) & 0xff;
  return body;
}

/** A WAL database at `path` of 512 such rows: about 2.3 MiB, not very compressible. */
export function createRestartDatabase(path: string): string {
  const database = new DatabaseSync(path);
  database.exec('PRAGMA journal_mode=WAL; CREATE TABLE t (id INTEGER PRIMARY KEY, body BLOB)');
  const insert = database.prepare('INSERT INTO t (body) VALUES (?)');
  for (let id = 1; id <= 512; id += 1) insert.run(originalBody(id));
  database.close();
  return path;
}
