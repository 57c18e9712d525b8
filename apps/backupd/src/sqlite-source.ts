/**
 * SQLite sources for the daemon, with each database's checkpoint thresholds.
 *
 * The source is opened lazily: at start only the database header is read (so
 * a database that is not in WAL mode still fails `replicate` at once), and
 * the SQLite source itself — its pinned read transaction, its checkpoints
 * and its commit-count state file beside the database — is opened by the
 * worker's first backup step, which runs only once this instance holds the
 * bucket lease. A standby instance on the same database (a second `backupd
 * replicate` waiting for the lease) therefore never counts commits of its
 * own: when it takes over, it starts from the count the previous holder left
 * in the state file, beyond every restore point that holder wrote, instead of
 * from the lower count it would have reached since it started (which made the
 * worker refuse the prefix as rewound), and it never overwrites the holder's
 * state file while waiting.
 * Limit: an instance that held the lease and lost it keeps its source open.
 */
import { closeSync, openSync, readSync } from 'node:fs';
import {
  type BackupSource,
  type DurablePosition,
  SqliteNotWalError,
  SqliteSource,
  type SqliteSourceOptions,
} from '@x/backup-worker';
import type { BackupdConfig } from './config.ts';
import type { SourceFactory } from './daemon.ts';

/**
 * What the file at `path` is, read-only (it never creates the file): missing,
 * not (yet) a SQLite database in WAL mode (too short, another header, or
 * another journal mode), or a WAL database. Byte offsets 18 and 19 of a
 * SQLite header are the file format versions, both 2 in WAL mode: the
 * `journal_mode=WAL` setting as the file stores it.
 */
export function sqliteFileState(path: string): 'missing' | 'not-wal' | 'wal' {
  let descriptor: number;
  try {
    descriptor = openSync(path, 'r');
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ENOENT' ? 'missing' : 'not-wal';
  }
  try {
    const header = Buffer.alloc(100);
    const read = readSync(descriptor, header, 0, 100, 0);
    return read === 100 &&
      header.toString('latin1', 0, 16) === 'SQLite format 3\u0000' &&
      header[18] === 2 &&
      header[19] === 2
      ? 'wal'
      : 'not-wal';
  } finally {
    closeSync(descriptor);
  }
}

/** Whether `path` is a SQLite database in WAL mode ({@link sqliteFileState}). */
export function isWalDatabase(path: string): boolean {
  return sqliteFileState(path) === 'wal';
}

/**
 * Polls `path` until it is a SQLite database in WAL mode (read-only: never
 * creates it). Resolves true then, or false once `gaveUp()` says to stop
 * waiting (checked after a last look at the file).
 */
export async function waitForWalDatabase(
  path: string,
  options: { readonly gaveUp: () => boolean; readonly intervalMs?: number },
): Promise<boolean> {
  for (;;) {
    const stop = options.gaveUp();
    if (isWalDatabase(path)) return true;
    if (stop) return false;
    await new Promise((resolve) => setTimeout(resolve, options.intervalMs ?? 100));
  }
}

/** A {@link SqliteSource} opened by the first call that needs the database (see the module comment). */
export class LazySqliteSource implements BackupSource {
  readonly description: string;
  readonly sideFileNames: readonly string[] = [];
  readonly #options: SqliteSourceOptions;
  // Typed as the interface: the worker's calls pass options the SQLite
  // source's own signatures leave out.
  #source: BackupSource | null = null;

  constructor(options: SqliteSourceOptions) {
    this.#options = options;
    this.description = `sqlite:${options.path}`;
  }

  /** Whether the SQLite source has been opened (this instance took the lease at least once). */
  get opened(): boolean {
    return this.#source !== null;
  }

  #open(): BackupSource {
    this.#source ??= SqliteSource.open(this.#options);
    return this.#source;
  }

  async durablePosition(
    ...args: Parameters<BackupSource['durablePosition']>
  ): Promise<DurablePosition> {
    // The health supervisor asks at every interval, lease or not; before the
    // source is open the count is unknown, which the worker treats as "not
    // yet" (and health as no lag of its own).
    if (this.#source === null)
      return {
        engineGeneration: '',
        snapshot: null,
        wal: null,
        durableLength: 0,
        commitCount: null,
        snapshotInProgress: false,
      };
    return this.#source.durablePosition(...args);
  }
  observe(...args: Parameters<BackupSource['observe']>) {
    return this.#open().observe(...args);
  }
  catchUp(...args: Parameters<BackupSource['catchUp']>) {
    return this.#open().catchUp(...args);
  }
  openRestorePoint(...args: Parameters<BackupSource['openRestorePoint']>) {
    return this.#open().openRestorePoint(...args);
  }
  readWalRange(...args: Parameters<BackupSource['readWalRange']>) {
    return this.#open().readWalRange(...args);
  }
  frameCounter() {
    return this.#open().frameCounter();
  }
  readSideFile(...args: Parameters<BackupSource['readSideFile']>) {
    return this.#open().readSideFile(...args);
  }
  readLineage(...args: Parameters<BackupSource['readLineage']>) {
    return this.#open().readLineage(...args);
  }
  createLineage(...args: Parameters<BackupSource['createLineage']>) {
    return this.#open().createLineage(...args);
  }
  readParent(...args: Parameters<BackupSource['readParent']>) {
    return this.#open().readParent(...args);
  }
  async afterStep(...args: Parameters<NonNullable<BackupSource['afterStep']>>): Promise<void> {
    await this.#source?.afterStep?.(...args);
  }
  async close(): Promise<void> {
    await this.#source?.close?.();
  }
}

export function sqliteSourceFactory(_config: BackupdConfig): SourceFactory {
  return async (database) => {
    // Checked here so `replicate` on a database that is not in WAL mode (or
    // does not exist) fails at start, as opening the source would, without
    // opening it (and without creating an empty file at a mistyped path).
    if (!isWalDatabase(database.path)) throw new SqliteNotWalError(database.path, 'delete');
    return new LazySqliteSource({
      path: database.path,
      passiveCheckpointPages: database.checkpoint.passivePages,
      truncateCheckpointPages: database.checkpoint.truncatePages,
    });
  };
}
