import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { BackupWorker } from '@x/backup-worker';
import { followSqlite } from '@x/follow';
import { SqliteSource } from '@x/source-sqlite';
import { FsStore } from '@x/store';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'source-sqlite-follow-'));
try {
  const app = new DatabaseSync(path.join(dir, 'app.db'));
  app.exec('PRAGMA journal_mode = WAL; CREATE TABLE notes (text TEXT)');
  const store = new FsStore({ root: path.join(dir, 'backups') });
  const backup = new BackupWorker({
    store,
    prefix: 'backups/app',
    walIntervalMs: 200,
    openSource: async () => SqliteSource.open({ path: path.join(dir, 'app.db') }),
  }).start();

  // The read replica: replica.db, kept up to date until `stop` aborts.
  const replicaPath = path.join(dir, 'replica.db');
  const stop = new AbortController();
  const follower = followSqlite(store, 'backups/app', replicaPath, {
    pollIntervalMs: 100,
    signal: stop.signal,
  });
  for await (const state of follower) {
    // Other processes may open replica.db read-only at any time: each read
    // transaction sees one whole state the application committed.
    const replica = new DatabaseSync(replicaPath, { readOnly: true });
    const notes = replica.prepare('SELECT count(*) AS n FROM notes').get().n;
    replica.close();
    console.log(`replica: ${notes} notes (${state.commitsApplied > 0 ? 'newer' : 'first'} state)`);
    if (notes === 2) stop.abort();
    else app.prepare('INSERT INTO notes VALUES (?)').run(`note ${notes + 1}`);
  }
  // Stopped: replica.db is left as a restore leaves a database (WAL mode).
  console.log(`journal mode byte: ${fs.readFileSync(replicaPath)[18]}`);
  await backup.shutdown();
  app.close();
} finally {
  fs.rmSync(dir, { recursive: true, force: true });
}
