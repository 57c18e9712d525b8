import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { setTimeout as sleep } from 'node:timers/promises';
import { BackupWorker } from '@x/backup-worker';
import { restore } from '@x/restore';
import { SqliteSource, sqliteMaterializer } from '@x/source-sqlite';
import { FsStore } from '@x/store';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'source-sqlite-example-'));
try {
  // The application's database, in WAL mode:
  const app = new DatabaseSync(path.join(dir, 'app.db'));
  app.exec('PRAGMA journal_mode = WAL; CREATE TABLE notes (text TEXT)');

  const store = new FsStore({ root: path.join(dir, 'backups') });
  // The worker opens the source when it holds the lease and closes it when the
  // lease goes (a standby never pins a read transaction or counts commits).
  const worker = new BackupWorker({
    store,
    prefix: 'backups/app',
    openSource: async () => SqliteSource.open({ path: path.join(dir, 'app.db') }), // SqliteNotWalError if not WAL
  });
  const handle = worker.start();
  while (handle.health().latestRestorePoint === null) await sleep(100);
  for (const text of ['one', 'two', 'three']) {
    app.prepare('INSERT INTO notes VALUES (?)').run(text);
  }
  const report = await handle.shutdown(); // releases the lease, then closes the source
  console.log(`backed up: commit ${report.restorableCommitSeq}`);
  app.close();

  // Restore commit 2 (or the latest: leave target out) into restore/app.db
  const result = await restore(store, 'backups/app', path.join(dir, 'restore'), {
    target: { kind: 'commit', commitSeq: 2 },
    materializer: sqliteMaterializer({ databaseName: 'app.db' }),
  });
  console.log(`restored: commit ${result.commitSeq}`);
  const restored = new DatabaseSync(path.join(dir, 'restore', 'app.db'), { readOnly: true });
  console.log(
    restored
      .prepare('SELECT text FROM notes')
      .all()
      .map((row) => row.text),
  );
  restored.close();
} finally {
  fs.rmSync(dir, { recursive: true, force: true });
}
