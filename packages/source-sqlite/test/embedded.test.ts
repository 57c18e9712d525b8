/**
 * The tap embedded in the application's own process: POSIX locks belong to
 * a process, and closing any descriptor of a file drops every lock the
 * process holds on it. An application connection (`node:sqlite`) holding a
 * write transaction across the tap's open and close keeps its locks: another
 * process still finds the database locked, and no committed row is lost.
 * The other process is a real one: a POSIX lock never conflicts within the
 * process that holds it.
 */
import { execFileSync } from 'node:child_process';
import { DatabaseSync } from 'node:sqlite';
import { afterEach, describe, expect, it } from 'vitest';
import { LockedFileDescriptors, lockedFileDescriptors } from '../src/quiet-descriptors.ts';
import { SqliteTap } from '../src/tap.ts';
import { openApplicationDatabase } from './harness.ts';

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0).reverse()) {
    try {
      cleanup();
    } catch {
      // An application connection a test closed itself.
    }
  }
});

/** Another process commits one row (no busy wait): `committed`, or `busy` when locked. */
function writeFromAnotherProcess(path: string, label: string): string {
  const script = `
    const { DatabaseSync } = require('node:sqlite');
    const db = new DatabaseSync(process.argv[1], { timeout: 0 });
    try {
      db.exec('BEGIN IMMEDIATE');
      db.prepare('INSERT INTO t (body) VALUES (?)').run(process.argv[2]);
      db.exec('COMMIT');
      process.stdout.write('committed');
    } catch (error) {
      process.stdout.write((error.errcode & 0xff) === 5 ? 'busy' : String(error.message));
    }
    db.close();`;
  return execFileSync(process.execPath, ['--no-warnings', '-e', script, path, label], {
    encoding: 'utf8',
  });
}

function rows(path: string): string[] {
  const reader = new DatabaseSync(path, { readOnly: true });
  try {
    return (reader.prepare('SELECT body FROM t ORDER BY id').all() as { body: unknown }[]).map(
      (row) => String(row.body),
    );
  } finally {
    reader.close();
  }
}

describe('the tap in the application’s process', () => {
  it('keeps an application connection’s write transaction locked across the tap’s open and close, and loses no row', () => {
    const { path, application } = openApplicationDatabase('backupd-embedded-', cleanups);
    application.exec("INSERT INTO t (body) VALUES ('before')");
    const before = lockedFileDescriptors.openCount;

    application.exec('BEGIN IMMEDIATE');
    application.exec("INSERT INTO t (body) VALUES ('application')");
    const tap = SqliteTap.open(path, { truncateCheckpointPages: 100 });
    tap.capture();
    tap.releaseSnapshot();
    expect(writeFromAnotherProcess(path, 'other-while-open')).toBe('busy');
    tap.checkpoint('passive');
    tap.close();
    // The application's write lock, read mark and SHARED lock are still its own.
    expect(writeFromAnotherProcess(path, 'other-after-close')).toBe('busy');

    application.exec('COMMIT');
    expect(writeFromAnotherProcess(path, 'other')).toBe('committed');
    application.exec("INSERT INTO t (body) VALUES ('application-after')");
    expect(rows(path)).toEqual(['before', 'application', 'other', 'application-after']);
    expect(application.prepare('PRAGMA integrity_check').get()).toEqual({ integrity_check: 'ok' });

    // Once the application's connection is gone, the descriptors kept for
    // it are closed at the registry's next call (here another tap's).
    application.close();
    SqliteTap.open(path).close();
    expect(lockedFileDescriptors.openCount).toBe(before);
  });

  it('does not hold the checkpoint lock unless asked (a process of its own)', () => {
    const { path } = openApplicationDatabase('backupd-embedded-', cleanups);
    const tap = SqliteTap.open(path);
    cleanups.push(() => tap.close());
    expect(tap.checkpointLock).toMatchObject({
      state: 'unavailable',
      unavailableReason: 'turned off (holdCheckpointLock: false)',
    });
  });
});

describe('LockedFileDescriptors', () => {
  it('shares one descriptor per file, and closes it only when no other descriptor of the file is open', () => {
    const { path, application } = openApplicationDatabase('backupd-embedded-', cleanups);
    const registry = new LockedFileDescriptors();
    const first = registry.acquire(path);
    const second = registry.acquire(path);
    expect(second.fd).toBe(first.fd);
    first.release();
    second.release();
    second.release();
    // The application's connection has the file open: parked, then reused.
    expect(registry.openCount).toBe(1);
    const again = registry.acquire(path);
    expect(again.fd).toBe(first.fd);
    again.release();
    application.close();
    registry.acquire(path).release();
    expect(registry.openCount).toBe(0);
  });

  it('keeps a descriptor open when the process’s descriptors cannot be listed', () => {
    const { path, application } = openApplicationDatabase('backupd-embedded-', cleanups);
    application.close();
    const registry = new LockedFileDescriptors(() => null);
    registry.acquire(path).release();
    expect(registry.openCount).toBe(1);
  });
});
