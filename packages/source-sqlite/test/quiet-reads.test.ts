/**
 * The tap reads the application's `-wal` file without dirtying its inode
 * (see src/sqlite/quiet-descriptors.ts): one descriptor kept open across
 * captures, opened with O_NOATIME, so a capture does not update the access
 * time. Linux only (`/proc/self/fd`). Limit: a tap that closed and reopened
 * the file at every capture would likely get the same descriptor number
 * back, so these tests prove the descriptor stays open between captures,
 * not that no capture reopens it. A replaced `-wal` file is still noticed:
 * changed-underneath.test.ts.
 */
import {
  constants,
  readdirSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  statSync,
  utimesSync,
} from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { SqliteTap } from '../src/tap.ts';
import { openApplicationDatabase } from './harness.ts';

/** Linux's access-mode bits of open(2) flags (not among node's fs.constants). */
const O_ACCMODE = 0o3;

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0).reverse()) cleanup();
});

function openTap(path: string): SqliteTap {
  const tap = SqliteTap.open(path);
  cleanups.push(() => tap.close());
  tap.releaseSnapshot();
  return tap;
}

/** This process's descriptors of `file`. */
function descriptorsOf(file: string): number[] {
  const target = realpathSync(file);
  return readdirSync('/proc/self/fd')
    .map(Number)
    .filter((fd) => {
      try {
        return readlinkSync(`/proc/self/fd/${fd}`) === target;
      } catch {
        return false;
      }
    });
}

function openFlags(fd: number): number {
  const info = readFileSync(`/proc/self/fdinfo/${fd}`, 'utf8');
  const flags = /^flags:\s+([0-7]+)$/m.exec(info);
  if (flags === null) throw new Error(`no flags in /proc/self/fdinfo/${fd}`);
  return Number.parseInt(flags[1]!, 8);
}

describe('the tap reading the -wal file', () => {
  it('keeps one descriptor open across captures, opened with O_NOATIME', () => {
    const { path, application } = openApplicationDatabase('backupd-sqlite-quiet-', cleanups);
    const insert = application.prepare('INSERT INTO t (body) VALUES (randomblob(100))');
    insert.run();
    const tap = openTap(path);
    const seen = new Set<number>();
    for (let round = 0; round < 3; round += 1) {
      insert.run();
      expect(tap.capture()).toBe(1);
      // SQLite's own connections (the application's, the tap's) open it
      // read-write; the tap's reading descriptor is the read-only one.
      const descriptors = descriptorsOf(`${path}-wal`).filter(
        (fd) => (openFlags(fd) & O_ACCMODE) === constants.O_RDONLY,
      );
      expect(descriptors).toHaveLength(1);
      seen.add(descriptors[0]!);
      expect(openFlags(descriptors[0]!) & constants.O_NOATIME).toBe(constants.O_NOATIME);
    }
    expect(seen.size, 'the same descriptor at every capture').toBe(1);
  });

  it("leaves the -wal file's access time as it was, where a plain read changes it", () => {
    const { path, application } = openApplicationDatabase('backupd-sqlite-quiet-', cleanups);
    const insert = application.prepare('INSERT INTO t (body) VALUES (randomblob(100))');
    insert.run();
    const tap = openTap(path);
    const wal = `${path}-wal`;
    // An access time long before the last modification: relatime updates it
    // at the next read that is allowed to.
    const longAgo = new Date('2001-01-01T00:00:00Z');
    utimesSync(wal, longAgo, statSync(wal).mtime);
    insert.run();
    expect(tap.capture()).toBe(1);
    expect(statSync(wal).atimeMs, 'the capture read the -wal file').toBe(longAgo.getTime());
    // The premise: on this filesystem a read without O_NOATIME does update it
    // (otherwise the assertion above proves nothing).
    readFileSync(wal);
    expect(
      statSync(wal).atimeMs,
      'a plain read updates the access time here (mounted noatime?)',
    ).not.toBe(longAgo.getTime());
  });
});
