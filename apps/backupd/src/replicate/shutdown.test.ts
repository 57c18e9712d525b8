import type { ShutdownReport } from '@x/backup-worker';
import { describe, expect, it } from 'vitest';
import { recordingLogger } from '../../test/helpers/recording-logger.ts';
import type { Daemon, ReplicaShutdown } from '../daemon.ts';
import { EXIT_FAILED, EXIT_INCOMPLETE, EXIT_OK } from '../exit-codes.ts';
import type { DatabaseOnDisk } from './database-on-disk.ts';
import {
  reviewShutdown,
  shutdownExitCode,
  stoppedIncompleteEvent,
  stopReplication,
} from './shutdown.ts';

function replica(complete: boolean): ReplicaShutdown {
  const report: ShutdownReport = {
    complete,
    unrestorableCommits: complete ? 0 : 3,
    restorableCommitSeq: 40,
    capturedCommitSeq: complete ? 40 : 43,
    unrestorableSince: complete ? null : Date.UTC(2026, 10, 29, 8, 0, 0),
    unrestorableUntil: complete ? null : Date.UTC(2026, 10, 29, 8, 0, 2),
    heldLease: true,
  };
  return { database: '/srv/app.db', replica: 'file:///b', report };
}

function daemon(shutdown: () => Promise<ReplicaShutdown[]>): Daemon {
  return { statuses: () => [], shutdown };
}

describe('shutdownExitCode', () => {
  it('is the code asked for, except a clean one that left commits unrestorable (4)', () => {
    expect(shutdownExitCode([replica(true)], EXIT_OK)).toBe(EXIT_OK);
    expect(shutdownExitCode([replica(true), replica(false)], EXIT_OK)).toBe(EXIT_INCOMPLETE);
    // The application's own failure is reported as it is.
    expect(shutdownExitCode([replica(false)], 7)).toBe(7);
    expect(shutdownExitCode([], EXIT_OK)).toBe(EXIT_OK);
  });
});

describe('stopReplication', () => {
  it('shuts the daemon down, closes the listener, and logs each incomplete replica', async () => {
    const { logger, events } = recordingLogger();
    let closed = false;
    const code = await stopReplication(
      {
        daemon: daemon(async () => [replica(true), replica(false)]),
        server: {
          url: 'http://127.0.0.1:1',
          close: async () => {
            closed = true;
          },
        },
      },
      logger,
      EXIT_OK,
    );
    expect(code).toBe(EXIT_INCOMPLETE);
    expect(closed).toBe(true);
    const logged = events();
    expect(logged.map((event) => event.event)).toEqual([
      'backupd.shutting_down',
      'backupd.stopped_incomplete',
      'backupd.stopped',
    ]);
    expect(logged[1]).toMatchObject({
      level: 50,
      database: '/srv/app.db',
      replica: 'file:///b',
      unrestorableCommits: 3,
      restorableCommitSeq: 40,
      capturedCommitSeq: 43,
      unrestorableSince: '2026-11-29T08:00:00.000Z',
      unrestorableUntil: '2026-11-29T08:00:02.000Z',
    });
  });

  it('resolves with 1 (never rejects) when the shutdown fails, and logs why', async () => {
    const { logger, events } = recordingLogger();
    const code = await stopReplication(
      {
        daemon: daemon(async () => {
          throw new Error('bucket gone');
        }),
      },
      logger,
      EXIT_OK,
    );
    expect(code).toBe(EXIT_FAILED);
    expect(events().at(-1)).toMatchObject({ event: 'backupd.shutdown_failed', level: 50 });
    expect(JSON.stringify(events().at(-1))).toContain('bucket gone');
  });
});

describe('reviewShutdown', () => {
  const neverHeld: ReplicaShutdown = {
    database: '/srv/app.db',
    replica: 's3://b/p',
    report: {
      complete: false,
      unrestorableCommits: 0,
      restorableCommitSeq: null,
      capturedCommitSeq: null,
      unrestorableSince: null,
      unrestorableUntil: null,
      heldLease: false,
      shortfall: 'never-held-lease',
      lastError: 'taking the bucket lease: connect ECONNREFUSED',
    },
  };
  const disk = (state: DatabaseOnDisk['state']): DatabaseOnDisk => ({
    path: '/srv/app.db',
    state,
    databaseBytes: state === 'empty' ? 4096 : 8192,
    pages: state === 'empty' ? 1 : 2,
    walBytes: state === 'empty' ? 0 : 8272,
    walFrames: state === 'empty' ? 0 : 2,
  });

  it('a never-opened database with content stays incomplete, and the event says how much and why', () => {
    const reviewed = reviewShutdown(neverHeld, () => disk('content'));
    expect(reviewed.report.complete).toBe(false);
    expect(shutdownExitCode([reviewed], EXIT_OK)).toBe(EXIT_INCOMPLETE);
    const event = stoppedIncompleteEvent(reviewed);
    expect(event).toMatchObject({
      shortfall: 'never-held-lease',
      databaseBytes: 8192,
      walFrames: 2,
    });
    expect(event.reason).toBe(
      "this replica never held the bucket's lease (last error: taking the bucket lease: connect ECONNREFUSED), so nothing reached the bucket in this run: the database at /srv/app.db has 8192 bytes (2 pages) and its WAL 8272 bytes (up to 2 frames), none of it backed up by this run",
    );
  });

  it('a provably empty one is complete; a missing one is not; other reports are left alone', () => {
    expect(reviewShutdown(neverHeld, () => disk('empty')).report.complete).toBe(true);
    expect(reviewShutdown(neverHeld, () => disk('missing')).report.complete).toBe(false);
    const held = replica(false);
    expect(reviewShutdown(held, () => disk('empty'))).toBe(held);
  });

  it('a refused one stays incomplete whatever is on disk, and the event names the refusal', () => {
    const refused: ReplicaShutdown = {
      ...neverHeld,
      report: {
        ...neverHeld.report,
        shortfall: 'refused',
        lastError: 'not a SQLite database in WAL mode',
      },
    };
    const reviewed = reviewShutdown(refused, () => disk('empty'));
    expect(reviewed).toBe(refused);
    expect(shutdownExitCode([reviewed], EXIT_OK)).toBe(EXIT_INCOMPLETE);
    expect(stoppedIncompleteEvent(reviewed)).toMatchObject({
      shortfall: 'refused',
      reason:
        'the backup of this database was refused (not a SQLite database in WAL mode), so this run backed up nothing of it after the refusal',
    });
  });
});
