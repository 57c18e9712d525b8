/**
 * The sidecar directory `.<db>-backupd/`: an earlier release's files move in
 * and keep their meaning, and restore places its files there, removes stale
 * ones on `force`, and never writes through a link.
 */
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { BackupWorker } from '@x/backup-worker';
import { FakeClock } from '@x/lease';
import { RestoreTargetUnsafeError, restore } from '@x/restore';
import { MemoryStore } from '@x/store';
import { describe, expect, it } from 'vitest';
import {
  adoptLegacySidecars,
  SQLITE_LEGACY_SIDECAR_SUFFIXES,
  sqliteSidecarFiles,
} from '../src/sidecar-files.ts';
import { sqliteMaterializer } from '../src/sqlite-materializer.ts';
import { SqliteSource } from '../src/sqlite-source.ts';
import { createDatabase, testWorkspace } from './harness.ts';

const workspaces = testWorkspace();
const workspace = () => workspaces.directory('sidecars');

const legacy = (database: string, kind: keyof typeof SQLITE_LEGACY_SIDECAR_SUFFIXES) =>
  `${database}${SQLITE_LEGACY_SIDECAR_SUFFIXES[kind]}`;

describe('an earlier release’s sidecar files', () => {
  it('move into the directory whole (same inode), and a second move finds nothing to do', () => {
    const database = join(workspace(), 'app.db');
    writeFileSync(legacy(database, 'lineage'), 'abc\n');
    writeFileSync(legacy(database, 'state'), '{"commitCount":41}\n');
    writeFileSync(legacy(database, 'lock'), '');
    const inode = statSync(legacy(database, 'lock')).ino;
    const files = sqliteSidecarFiles(database);

    const moved = adoptLegacySidecars(database, ['lineage', 'state', 'resume', 'lock']);
    expect(moved.map((m) => m.kind).sort()).toEqual(['lineage', 'lock', 'state']);
    expect(readFileSync(files.lineage, 'utf8')).toBe('abc\n');
    expect(readFileSync(files.state, 'utf8')).toBe('{"commitCount":41}\n');
    expect(statSync(files.lock).ino).toBe(inode);
    for (const kind of ['lineage', 'state', 'lock'] as const)
      expect(existsSync(legacy(database, kind))).toBe(false);
    expect(statSync(files.directory).mode & 0o777).toBe(0o700);
    expect(adoptLegacySidecars(database, ['lineage', 'state', 'lock'])).toEqual([]);
  });

  it('where a file is in both places the newer stays; a lock in the directory is never replaced', () => {
    const database = join(workspace(), 'app.db');
    const files = sqliteSidecarFiles(database);
    mkdirSync(files.directory);
    writeFileSync(files.state, '{"commitCount":5}\n');
    writeFileSync(legacy(database, 'state'), '{"commitCount":9}\n');
    writeFileSync(files.lineage, 'new\n');
    writeFileSync(legacy(database, 'lineage'), 'old\n');
    writeFileSync(files.lock, 'kept');
    writeFileSync(legacy(database, 'lock'), 'legacy');
    const past = new Date(Date.now() - 60_000);
    utimesSync(files.state, past, past);
    utimesSync(legacy(database, 'lineage'), past, past);

    adoptLegacySidecars(database, ['state', 'lineage', 'lock']);
    expect(readFileSync(files.state, 'utf8')).toBe('{"commitCount":9}\n');
    expect(readFileSync(files.lineage, 'utf8')).toBe('new\n');
    expect(existsSync(legacy(database, 'state'))).toBe(false);
    expect(existsSync(legacy(database, 'lineage'))).toBe(false);
    expect(readFileSync(files.lock, 'utf8')).toBe('kept');
    expect(readFileSync(legacy(database, 'lock'), 'utf8')).toBe('legacy');
  });

  it('SqliteSource.open moves them in and continues the commit count and the lineage they hold', async () => {
    const database = join(workspace(), 'app.db');
    createDatabase(database);
    writeFileSync(legacy(database, 'lineage'), 'lineage-from-0.2\n');
    writeFileSync(legacy(database, 'state'), '{"commitCount":41}\n');
    const source = SqliteSource.open({ path: database, captureIntervalMs: 0 });
    try {
      expect(await source.readLineage()).toBe('lineage-from-0.2');
      // A new generation counts one commit for the break.
      expect((await source.durablePosition()).commitCount).toBe(42);
      expect(existsSync(legacy(database, 'state'))).toBe(false);
      expect(readdirSync(sqliteSidecarFiles(database).directory).sort()).toEqual([
        'lineage',
        'state',
      ]);
    } finally {
      await source.close();
    }
  });

  it('a file where the sidecar directory belongs is refused by name, before anything is written', () => {
    const database = join(workspace(), 'app.db');
    createDatabase(database);
    writeFileSync(sqliteSidecarFiles(database).directory, 'not a directory');
    expect(() => SqliteSource.open({ path: database, captureIntervalMs: 0 })).toThrow(
      /cannot write .*\.app\.db-backupd \(ENOTDIR\)/,
    );
  });

  it('a missing database leaves no sidecar directory behind', () => {
    const database = join(workspace(), 'missing.db');
    expect(() => SqliteSource.open({ path: database, captureIntervalMs: 0 })).toThrow(
      /does not exist/,
    );
    expect(existsSync(sqliteSidecarFiles(database).directory)).toBe(false);
  });
});

describe('restore with the sidecar directory', () => {
  async function backedUp(): Promise<{ store: MemoryStore; database: string }> {
    const database = join(workspace(), 'app.db');
    createDatabase(database);
    const source = SqliteSource.open({ path: database, captureIntervalMs: 0 });
    const store = new MemoryStore();
    const worker = new BackupWorker({
      store,
      prefix: 'p',
      source,
      clock: new FakeClock(),
      manifestIntervalMs: 0,
    });
    await worker.runOnce();
    await worker.runOnce();
    await source.close();
    return { store, database };
  }
  const materializer = sqliteMaterializer({ databaseName: 'app.db' });

  it('places state and parent in it, beside the replicate command’s files, which stay', async () => {
    const { store } = await backedUp();
    const target = workspace();
    // What a replicate that lost its database leaves: its lock and holder record.
    mkdirSync(join(target, '.app.db-backupd'));
    writeFileSync(join(target, '.app.db-backupd', 'holder.json'), '{}');
    writeFileSync(join(target, '.app.db-backupd', 'lock'), '');
    await restore(store, 'p', target, { materializer });
    expect(readdirSync(target).sort()).toEqual(['.app.db-backupd', 'app.db']);
    expect(readdirSync(join(target, '.app.db-backupd')).sort()).toEqual([
      'holder.json',
      'lock',
      'parent',
      'state',
    ]);
  });

  it('forced over a database: removes stale lineage and state, old names included', async () => {
    const { store } = await backedUp();
    const target = workspace();
    createDatabase(join(target, 'app.db'));
    mkdirSync(join(target, '.app.db-backupd'));
    writeFileSync(join(target, '.app.db-backupd', 'lineage'), 'stale\n');
    writeFileSync(join(target, '.app.db-backupd', 'holder.json'), '{}');
    writeFileSync(join(target, 'app.db-backupd.lineage'), 'stale\n');
    writeFileSync(join(target, 'app.db-backupd.state'), '{"commitCount":99}\n');
    writeFileSync(join(target, 'notes.txt'), 'the application’s');
    await restore(store, 'p', target, { materializer, force: true });
    expect(readdirSync(target).sort()).toEqual(['.app.db-backupd', 'app.db', 'notes.txt']);
    expect(readdirSync(join(target, '.app.db-backupd')).sort()).toEqual([
      'holder.json',
      'parent',
      'state',
    ]);
  });

  it('refuses a sidecar directory that is a symbolic link, writing nothing through it', async () => {
    const { store } = await backedUp();
    const target = workspace();
    const elsewhere = workspace();
    symlinkSync(elsewhere, join(target, '.app.db-backupd'));
    for (const force of [false, true])
      await expect(restore(store, 'p', target, { materializer, force })).rejects.toSatisfy(
        (error: unknown) =>
          RestoreTargetUnsafeError.isInstance(error) &&
          /\.app\.db-backupd in it is a symbolic link/.test((error as Error).message),
      );
    expect(readdirSync(elsewhere)).toEqual([]);
    expect(readdirSync(target)).toEqual(['.app.db-backupd']);
  });
});
