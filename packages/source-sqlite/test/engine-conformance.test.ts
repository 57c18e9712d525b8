/** The SQLite engine runs the engine conformance suite. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import type { EngineUnderTest } from '@x/engine-conformance';
import { describeEngineConformance } from '@x/engine-conformance/vitest';
import { sqliteContentHash } from '../src/content-hash.ts';
import { sqliteMaterializer } from '../src/sqlite-materializer.ts';
import { SqliteSource } from '../src/sqlite-source.ts';
import { hashOf } from './harness.ts';

const NAME = 'app.db';

const sqliteEngine: EngineUnderTest = {
  materializer: sqliteMaterializer({ databaseName: NAME }),
  restoredState: (directory) => hashOf(join(directory, NAME), sqliteContentHash),
  async createFixture() {
    const directory = mkdtempSync(join(tmpdir(), 'sqlite-conformance-'));
    const path = join(directory, NAME);
    const application = new DatabaseSync(path, { timeout: 5000 });
    application.exec('PRAGMA journal_mode=WAL; CREATE TABLE t (id INTEGER PRIMARY KEY, body BLOB)');
    const insert = application.prepare('INSERT INTO t (body) VALUES (?)');
    for (let row = 0; row < 16; row += 1) insert.run(new Uint8Array(512).fill(row));
    const update = application.prepare('UPDATE t SET body = ? WHERE id = ?');
    let commits = 0;
    return {
      openSource: () => SqliteSource.open({ path, captureIntervalMs: 0 }),
      commit(count) {
        for (let i = 0; i < count; i += 1) {
          commits += 1;
          // Never a row's current bytes: SQLite logs no frame for an UPDATE that changes nothing.
          update.run(new Uint8Array(512).fill(16 + (commits % 200)), 1 + ((commits * 7) % 16));
        }
      },
      state: () => hashOf(path, sqliteContentHash),
      // A kill leaves no record: the tap goes without the source's close.
      kill: (source) => (source as SqliteSource).tap.close(),
      close: (source) => source.close?.(),
      dispose() {
        application.close();
        rmSync(directory, { recursive: true, force: true });
      },
    };
  },
};

describeEngineConformance('SQLite', sqliteEngine);
