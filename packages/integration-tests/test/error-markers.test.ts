import * as mainWorkerErrors from '@x/backup-worker';
import { SimulatedCrashError } from '@x/backup-worker/testing';
import * as restoreErrors from '@x/restore';
import * as sqliteErrors from '@x/source-sqlite';
import { describe, expect, it } from 'vitest';

const workerErrors = { ...mainWorkerErrors, SimulatedCrashError };

// The marker strings are the compatibility contract between two installed
// copies of this package: an error made by one copy carries only these
// symbols, so each class must go on recognising exactly these strings.
const released: { module: object; namespace: string; classes: string[] }[] = [
  {
    module: workerErrors,
    namespace: 'x.backup-worker.error',
    classes: [
      'BackupError',
      'SimulatedCrashError',
      'ShutdownAbandonedError',
      'WorkerPanicError',
      'LatestUnusableError',
      'RestorePointReadError',
    ],
  },
  {
    module: restoreErrors,
    namespace: 'x.backup-worker.restore.error',
    classes: [
      'RestoreError',
      'RestoreOptionsError',
      'RestoreTargetNotEmptyError',
      'RestoreTargetUnsafeError',
      'NoRestorePointError',
      'RestorePointRejectedError',
      'ObjectMissingError',
      'ObjectCorruptError',
      'ObjectEncodingError',
      'ObjectKeyError',
      'RestoreIncompleteError',
      'RestoredStateError',
    ],
  },
  {
    module: sqliteErrors,
    namespace: 'x.backup-worker.sqlite.error',
    classes: [
      'SqliteBackupError',
      'SqliteNotWalError',
      'SqliteDatabaseMissingError',
      'SqliteOpenRefusedError',
      'SqliteDatabaseReplacedError',
      'SqliteCaptureStoppedError',
      'SqliteWalRestartedUnderneathError',
      'SqliteRestoreRefusedError',
      'SqliteRestoreCorruptError',
      'SqliteReaderLostError',
      'SqliteDatabaseUnavailableError',
    ],
  },
];

type ErrorClass = { isInstance(value: unknown): boolean };

function errorClassesOf(module: object): string[] {
  return Object.entries(module)
    .filter(([, value]) => typeof value === 'function' && 'isInstance' in value)
    .map(([name]) => name)
    .sort();
}

describe('backup-worker error markers', () => {
  for (const { module, namespace, classes } of released) {
    it(`lists every error class of ${namespace}`, () => {
      expect(errorClassesOf(module)).toEqual([...classes].sort());
    });

    it.each(classes)(`%s recognises an error from another copy by ${namespace}.%s`, (name) => {
      const errorClass = (module as Record<string, ErrorClass>)[name]!;
      expect(errorClass.isInstance({ [Symbol.for(`${namespace}.${name}`)]: true })).toBe(true);
      expect(errorClass.isInstance({})).toBe(false);
    });
  }
});

// Classes folded into BackupError's codes: an error of such a code still
// carries its former class's marker (a copy that has the class recognises
// it), and `hasCode` recognises one made by a copy that had the class.
const folded = {
  LINEAGE_REFUSED: 'LineageRefusedError',
  WRITER_CONFLICT: 'WriterConflictError',
  OPERATION_TIMEOUT: 'OperationTimeoutError',
  WRITE_FENCED: 'WriteFencedError',
  BUCKET_STATE: 'BucketStateError',
  COMPACTION_INPUT: 'CompactionInputError',
} as const;

describe('backup-worker error codes', () => {
  it.each(Object.entries(folded))('%s keeps the name and marker of %s', (code, name) => {
    const { BackupError } = mainWorkerErrors;
    const error = new BackupError('failed', { code: code as keyof typeof folded });
    expect(error.name).toBe(name);
    expect(
      (error as unknown as Record<symbol, unknown>)[Symbol.for(`x.backup-worker.error.${name}`)],
    ).toBe(true);
    const fromAnotherCopy = { [Symbol.for('x.backup-worker.error.BackupError')]: true, code };
    expect(BackupError.hasCode(fromAnotherCopy, code as keyof typeof folded)).toBe(true);
    expect(BackupError.hasCode({ code }, code as keyof typeof folded)).toBe(false);
    expect(BackupError.hasCode(error, 'BACKUP_ERROR')).toBe(false);
  });
});
