/**
 * Every error class a package exports (and the app's own) says whether the
 * same call, made again later, may succeed: `retryable`, a boolean on every
 * instance. The transient ones are listed here, so a class that changes its
 * answer fails this test.
 */
import * as worker from '@x/backup-worker';
import * as workerTesting from '@x/backup-worker/testing';
import * as lease from '@x/lease';
import * as manifest from '@x/manifest';
import * as restore from '@x/restore';
import * as framed from '@x/source-framed';
import * as sqlite from '@x/source-sqlite';
import * as store from '@x/store';
import * as walSegment from '@x/wal-segment';
import { describe, expect, it } from 'vitest';
import { UsageError } from '../src/cli/usage-error.ts';
import { BackupDirectoryMissingError } from '../src/commands/ls-command.ts';
import { ConfigError } from '../src/config.ts';
import { DatabaseInUseError } from '../src/replicate/database-lock.ts';
import { DatabaseTargetExistsError } from '../src/restore-database.ts';
import { FileUrlNotAbsoluteError, StoreUrlError } from '../src/store-url.ts';

type ErrorClass = abstract new (...args: never[]) => Error;

function errorClasses(module: Record<string, unknown>): [string, ErrorClass][] {
  return Object.entries(module).filter(
    (entry): entry is [string, ErrorClass] =>
      typeof entry[1] === 'function' && entry[1].prototype instanceof Error,
  );
}

const classes = new Map<string, ErrorClass>([
  ...[worker, workerTesting, lease, manifest, restore, framed, sqlite, store, walSegment].flatMap(
    (module) => errorClasses(module as Record<string, unknown>),
  ),
  ...errorClasses({
    UsageError,
    BackupDirectoryMissingError,
    ConfigError,
    DatabaseInUseError,
    DatabaseTargetExistsError,
    FileUrlNotAbsoluteError,
    StoreUrlError,
  }),
]);

/** Retrying can help: a transport failure, a timeout, a lease held or not yet renewed, a database not there yet. */
const RETRYABLE = [
  'StoreError',
  'ConflictError',
  'ForeignActiveError',
  'WriteDeadlineError',
  'LeaseWaitTimeoutError',
  'SqliteDatabaseMissingError',
  'SqliteDatabaseReplacedError',
  'SqliteDatabaseUnavailableError',
  'SqliteWalRestartedUnderneathError',
  'SqliteReaderLostError',
  'DatabaseInUseError',
];

describe('retryable', () => {
  it('is a boolean on every exported error class, true exactly for the transient ones', () => {
    expect(classes.size).toBeGreaterThan(55);
    const answers = [...classes].map(([name, errorClass]) => {
      const instance = Object.create(errorClass.prototype) as { retryable?: unknown };
      return [name, instance.retryable] as const;
    });
    expect(answers.filter(([, value]) => typeof value !== 'boolean')).toEqual([]);
    expect(
      answers
        .filter(([, value]) => value === true)
        .map(([name]) => name)
        .sort(),
    ).toEqual([...RETRYABLE].sort());
  });

  it('is what an instance made by its constructor says', () => {
    expect(new store.StoreError('connection reset').retryable).toBe(true);
    expect(new store.NotFoundError('db/LATEST').retryable).toBe(false);
    expect(new worker.BackupError('refused').retryable).toBe(false);
    // The worker's codes: the classes they replaced answered the same.
    expect(new worker.BackupError('late', { code: 'OPERATION_TIMEOUT' }).retryable).toBe(true);
    expect(new worker.BackupError('fenced', { code: 'WRITE_FENCED' }).retryable).toBe(true);
    for (const code of [
      'LINEAGE_REFUSED',
      'WRITER_CONFLICT',
      'BUCKET_STATE',
      'COMPACTION_INPUT',
    ] as const)
      expect(new worker.BackupError('failed', { code }).retryable).toBe(false);
    expect(new UsageError('missing <url>').retryable).toBe(false);
  });
});
