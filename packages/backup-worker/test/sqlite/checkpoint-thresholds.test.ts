/**
 * The tap's PASSIVE threshold counts frames landed since its last copy, not
 * the WAL's size: past the threshold it copies once, and again only after
 * that many more frames (each copy costs two fsyncs beside the application's).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { afterEach, describe, expect, it } from 'vitest';
import { SqliteTap } from '../../src/sqlite/tap.ts';

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0).reverse()) cleanup();
});

describe('SQLite tap PASSIVE threshold', () => {
  it('copies once per passiveCheckpointPages new frames, not at every call past it', () => {
    const directory = mkdtempSync(join(tmpdir(), 'backupd-sqlite-thresholds-'));
    cleanups.push(() => rmSync(directory, { recursive: true, force: true }));
    const path = join(directory, 'app.db');
    const application = new DatabaseSync(path);
    cleanups.push(() => application.close());
    application.exec('PRAGMA journal_mode=WAL; PRAGMA wal_autocheckpoint=0');
    application.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, body BLOB)');
    const tap = SqliteTap.open(path, {
      passiveCheckpointPages: 20,
      truncateCheckpointPages: 10_000,
    });
    cleanups.push(() => tap.close());
    tap.releaseSnapshot();
    // One page of blob per commit: at least one frame each.
    const commit = (count: number) => {
      for (let i = 0; i < count; i += 1)
        application.exec('INSERT INTO t (body) VALUES (randomblob(3000))');
    };

    commit(25);
    const first = tap.maintain();
    expect(first?.mode).toBe('passive');
    expect(first?.checkpointedFrames).toBeGreaterThanOrEqual(20);

    // A few frames more: the WAL is still past 20 frames, but only a few are new.
    commit(2);
    expect(tap.walFrames).toBeGreaterThanOrEqual(20);
    expect(tap.maintain()).toBeNull();

    commit(25);
    expect(tap.maintain()?.mode).toBe('passive');
  });
});
