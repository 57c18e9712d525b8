/**
 * The SQLite source tells the worker what the database's files look like
 * (for health, the status page and metrics): the database and WAL sizes on
 * disk, and the checkpoints it ran, by mode.
 */
import { statSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { SqliteSource } from '../src/sqlite-source.ts';
import { openApplicationDatabase } from './harness.ts';

describe('SqliteSource engine files', () => {
  const cleanups: (() => void)[] = [];
  afterEach(() => {
    for (const cleanup of cleanups.splice(0).reverse()) cleanup();
  });

  it('reports the database and WAL sizes and counts its checkpoints by mode', async () => {
    const { path, application } = openApplicationDatabase('backupd-engine-files-', cleanups);
    const insert = application.prepare('INSERT INTO t (body) VALUES (?)');
    for (let i = 0; i < 20; i += 1) insert.run(new Uint8Array(4096).fill(i));
    const source = SqliteSource.open({ path, captureIntervalMs: 0 });
    cleanups.push(() => void source.close());
    await source.catchUp();
    const before = (await source.durablePosition()).engine!;
    expect(before.databaseBytes).toBe(statSync(path).size);
    expect(before.walBytes).toBe(statSync(`${path}-wal`).size);
    expect(before.walBytes).toBeGreaterThan(20 * 4096);
    expect(before.checkpoints).toEqual({ passive: 0, truncate: 0 });

    source.tap.checkpoint('passive');
    source.tap.checkpoint('truncate');
    const after = (await source.durablePosition()).engine!;
    expect(after.checkpoints).toEqual({ passive: 1, truncate: 1 });
    expect(after.databaseBytes).toBe(statSync(path).size);
  });
});
