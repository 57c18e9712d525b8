/**
 * The checkpoint-lock hold (src/checkpoint-hold.ts): while commits land on a
 * WAL past the auto-checkpoint size, another process's checkpoint answers
 * busy at once; the tap's own checkpoints still run and take the lock back;
 * a quiet database lets it go. The other process is a real one: a POSIX
 * lock never conflicts within the process that holds it.
 */
import { execFileSync } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import {
  type ByteLockCall,
  CHECKPOINT_LOCK_BYTE,
  CheckpointLockHold,
  loadOnce,
  TAKE_ATTEMPTS,
} from '../src/checkpoint-hold.ts';
import {
  APPLICATION_AUTO_CHECKPOINT_FRAMES,
  CHECKPOINT_LOCK_QUIET_MS,
  SqliteTap,
} from '../src/tap.ts';
import { openApplicationDatabase } from './harness.ts';

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0).reverse()) cleanup();
});

/** `PRAGMA wal_checkpoint(PASSIVE)` run by another process (no busy wait). */
function checkpointFromAnotherProcess(path: string): {
  busy: number;
  log: number;
  checkpointed: number;
} {
  const script = `
    const { DatabaseSync } = require('node:sqlite');
    const db = new DatabaseSync(process.argv[1], { timeout: 0 });
    const row = db.prepare('PRAGMA wal_checkpoint(PASSIVE)').get();
    process.stdout.write(JSON.stringify({ busy: row.busy, log: row.log, checkpointed: row.checkpointed }));
    db.close();`;
  const output = execFileSync(process.execPath, ['--no-warnings', '-e', script, path], {
    encoding: 'utf8',
  });
  return JSON.parse(output) as { busy: number; log: number; checkpointed: number };
}

/** A tap on a fresh database, its snapshot let go, on a clock the test moves. */
function setUp(options: { holdCheckpointLock?: boolean } = {}) {
  const { path, application } = openApplicationDatabase('backupd-checkpoint-lock-', cleanups);
  const clock = { now: 0 };
  const tap = SqliteTap.open(path, {
    passiveCheckpointPages: 20,
    truncateCheckpointPages: 100_000,
    monotonicNow: () => clock.now,
    holdCheckpointLock: true,
    ...options,
  });
  cleanups.push(() => tap.close());
  tap.releaseSnapshot();
  const commit = (count: number) => {
    for (let i = 0; i < count; i += 1)
      application.exec(`INSERT INTO t (body) VALUES (randomblob(100))`);
  };
  return { path, tap, clock, commit };
}

/** Commits (one frame at least each) that take the WAL past the application's auto-checkpoint size. */
const PAST_AUTO_CHECKPOINT = APPLICATION_AUTO_CHECKPOINT_FRAMES + 10;

const itOnLinux = 'call' in loadOnce(process.platform, process.arch) ? it : it.skip;

describe('the checkpoint-lock hold', () => {
  itOnLinux(
    'makes another process checkpoint busy while commits land past the auto-checkpoint size, across the tap’s own checkpoints',
    () => {
      const { path, tap, clock, commit } = setUp();
      commit(PAST_AUTO_CHECKPOINT);
      tap.maintain();
      expect(tap.walFrames).toBeGreaterThanOrEqual(APPLICATION_AUTO_CHECKPOINT_FRAMES);
      expect(tap.checkpointLock.state).toBe('held');
      // SQLite's answer when the checkpoint lock is busy: nothing looked at.
      expect(checkpointFromAnotherProcess(path)).toEqual({ busy: 1, log: -1, checkpointed: -1 });

      // The tap's own checkpoint runs through the lock (same process) and
      // takes it back after (its unlock dropped it).
      clock.now += 10;
      commit(5);
      const report = tap.checkpoint('passive');
      expect(report.busy).toBe(false);
      expect(report.checkpointedFrames).toBeGreaterThan(0);
      expect(checkpointFromAnotherProcess(path)).toEqual({ busy: 1, log: -1, checkpointed: -1 });
      expect(tap.checkpointLock.taken).toBeGreaterThanOrEqual(2);
    },
  );

  itOnLinux('lets the lock go once no commit has landed for the quiet time', () => {
    const { path, tap, clock, commit } = setUp();
    commit(PAST_AUTO_CHECKPOINT);
    tap.maintain();
    expect(tap.checkpointLock.state).toBe('held');
    // A second call right after, with no commit in between, keeps it.
    clock.now += CHECKPOINT_LOCK_QUIET_MS - 1;
    tap.maintain();
    expect(tap.checkpointLock.state).toBe('held');
    expect(checkpointFromAnotherProcess(path).busy).toBe(1);
    clock.now += 1;
    tap.maintain();
    expect(tap.checkpointLock.state).toBe('let-go');
    const quiet = checkpointFromAnotherProcess(path);
    expect(quiet.busy).toBe(0);
    expect(quiet.log).toBeGreaterThan(0);
  });

  itOnLinux('is not taken below the auto-checkpoint size', () => {
    const { path, tap, commit } = setUp();
    commit(APPLICATION_AUTO_CHECKPOINT_FRAMES / 2);
    tap.maintain();
    expect(tap.walFrames).toBeLessThan(APPLICATION_AUTO_CHECKPOINT_FRAMES);
    expect(tap.checkpointLock.state).toBe('let-go');
    expect(checkpointFromAnotherProcess(path).busy).toBe(0);
  });

  it('turned off, or unavailable, leaves the application’s checkpoints alone and the tap working', () => {
    const off = setUp({ holdCheckpointLock: false });
    off.commit(PAST_AUTO_CHECKPOINT);
    off.tap.maintain();
    expect(off.tap.checkpointLock).toMatchObject({
      state: 'unavailable',
      unavailableReason: 'turned off (holdCheckpointLock: false)',
    });
    expect(checkpointFromAnotherProcess(off.path).busy).toBe(0);
    expect(off.tap.checkpoint('truncate').busy).toBe(false);

    const { path, application } = openApplicationDatabase('backupd-checkpoint-lock-', cleanups);
    const tap = SqliteTap.open(path, {
      passiveCheckpointPages: 20,
      holdCheckpointLock: true,
      checkpointLockCall: () => loadOnce('darwin', 'arm64'),
    });
    cleanups.push(() => tap.close());
    tap.releaseSnapshot();
    for (let i = 0; i < PAST_AUTO_CHECKPOINT; i += 1)
      application.exec('INSERT INTO t (body) VALUES (randomblob(1))');
    tap.maintain();
    expect(tap.checkpointLock).toMatchObject({
      state: 'unavailable',
      unavailableReason: 'not supported on darwin/arm64 (64-bit Linux only)',
    });
    expect(tap.commits).toBe(PAST_AUTO_CHECKPOINT);
  });
});

describe('CheckpointLockHold', () => {
  function recorder(answers: (call: number) => number) {
    const calls: { kind: string; byte: number }[] = [];
    const call: ByteLockCall = (_fd, kind, byte) => {
      calls.push({ kind, byte });
      return answers(calls.length);
    };
    return { calls, call };
  }

  it('asks the kernel at every take, even when it believes the lock held', () => {
    const { calls, call } = recorder(() => 0);
    const hold = new CheckpointLockHold(3, { call });
    expect(hold.take()).toBe(true);
    expect(hold.take()).toBe(true);
    expect(calls).toEqual([
      { kind: 'shared', byte: CHECKPOINT_LOCK_BYTE },
      { kind: 'shared', byte: CHECKPOINT_LOCK_BYTE },
    ]);
    hold.letGo();
    expect(calls.at(-1)).toEqual({ kind: 'unlock', byte: CHECKPOINT_LOCK_BYTE });
    expect(hold.state).toBe('let-go');
    // Nothing to let go of: no call.
    hold.letGo();
    expect(calls).toHaveLength(3);
  });

  it('gives up after its tries while another process checkpoints, and tries again at the next take', () => {
    const { calls, call } = recorder((n) => (n <= TAKE_ATTEMPTS + 3 ? 11 : 0));
    const hold = new CheckpointLockHold(3, { call });
    expect(hold.take()).toBe(false);
    expect(calls).toHaveLength(TAKE_ATTEMPTS);
    expect(hold.state).toBe('let-go');
    expect(hold.counts).toEqual({ taken: 0, missed: 1 });
    expect(hold.take()).toBe(true);
    expect(calls).toHaveLength(TAKE_ATTEMPTS + 4);
    expect(hold.counts).toEqual({ taken: 1, missed: 1 });
  });

  it('becomes unavailable when the kernel refuses to let it go', () => {
    const { calls, call } = recorder((n) => (n === 1 ? 0 : 22));
    const hold = new CheckpointLockHold(3, { call });
    expect(hold.take()).toBe(true);
    hold.letGo();
    expect(hold.state).toBe('unavailable');
    expect(hold.unavailableReason).toBe('fcntl(F_SETLK, F_UNLCK) failed with errno 22');
    expect(hold.take()).toBe(false);
    expect(calls).toHaveLength(2);
  });

  it('becomes unavailable, with the errno, when the kernel refuses for another reason than a conflict', () => {
    const { calls, call } = recorder(() => 9);
    const hold = new CheckpointLockHold(3, { call });
    expect(hold.take()).toBe(false);
    expect(hold.state).toBe('unavailable');
    expect(hold.unavailableReason).toBe('fcntl(F_SETLK) failed with errno 9');
    expect(hold.take()).toBe(false);
    expect(calls).toHaveLength(1);
  });
});
