/**
 * A directory of databases in `replicate`: its configuration from the
 * command line (`--dir`), and its start. One lock on the directory (taken
 * with the databases' locks, see replicate-command.ts) keeps a second
 * `replicate` of it from starting on this host; each database's own lock
 * is taken while it is awake, so a `replicate` of one of its databases
 * alone is refused, or refuses it, as two replicates of one database are.
 */
import { existsSync, statSync } from 'node:fs';
import { isAbsolute, join, relative, resolve } from 'node:path';
import { FsStore } from '@x/store';
import { joinKey } from '@x/store/keys';
import { UsageError } from '../cli/usage-error.ts';
import { type BackupdConfig, type DatabaseConfig, singleDatabaseConfig } from '../config.ts';
import type { Daemon } from '../daemon.ts';
import { loadEncryptionKeys } from '../encryption-settings.ts';
import { InstrumentedStore } from '../instrumented-store.ts';
import type { Logger } from '../logger.ts';
import { openStore } from '../open-store.ts';
import type { DirectoryOptions } from '../settings/parsed-config.ts';
import { commandLineUrl, describeLocation, type StoreLocation } from '../store-url.ts';
import { type DirectoryDaemon, startDirectoryDaemon } from './directory-daemon.ts';
import { directoryLayout } from './directory-layout.ts';
import { DEFAULT_MAX_REQUESTS, LimitedStore, RequestLimit } from './request-limit.ts';

/** The name the directory's own lock is taken under (hidden: never a database of it). */
export const DIRECTORY_LOCK_NAME = '.backupd-directory';

/** Databases starting at once: enough to keep a store busy, few enough to bound memory. */
export const DEFAULT_MAX_STARTING = 16;

/** The path whose local lock a database entry takes: the database's, or the directory's own. */
export function lockPathOf(database: DatabaseConfig): string {
  return database.directory ? join(database.path, DIRECTORY_LOCK_NAME) : database.path;
}

/** The directory's backup URL when none is given: a directory beside it, `<dir>-backups`. */
export function defaultDirectoryUrl(directory: string): string {
  return `${directory}-backups`;
}

/** `replicate --dir`'s configuration: the environment's settings for every database of it. @throws UsageError | ConfigError */
export function directoryConfig(args: {
  readonly directory: string;
  readonly url: string | undefined;
  readonly options: DirectoryOptions;
  readonly listen: string | undefined;
  readonly cwd: string;
  readonly env: Readonly<Record<string, string | undefined>>;
}): BackupdConfig {
  const directory = resolve(args.cwd, args.directory);
  if (!existsSync(directory) || !statSync(directory).isDirectory())
    throw new UsageError(`--dir ${args.directory}: no such directory`);
  const url =
    args.url === undefined ? defaultDirectoryUrl(directory) : commandLineUrl(args.url, args.cwd);
  const config = singleDatabaseConfig(
    { path: directory, url, type: 'sqlite' },
    { env: args.env, baseDir: args.cwd, ...(args.listen ? { listen: args.listen } : {}) },
  );
  return {
    ...config,
    databases: config.databases.map((database) => ({ ...database, directory: args.options })),
  };
}

/** A directory entry that cannot be started: nothing of it was backed up. */
export class DirectoryUnusableError extends Error {
  /** Whether the same call, made again later, may succeed with nothing else changed. */
  get retryable(): boolean {
    return false;
  }

  override readonly name = 'DirectoryUnusableError';
  readonly code = 'DIRECTORY_UNUSABLE';
  readonly directory: string;

  constructor(directory: string, why: string) {
    super(`cannot back up the databases of ${directory}: ${why}`);
    this.directory = directory;
  }
}

function isWithin(path: string, directory: string): boolean {
  const inside = relative(directory, path);
  return inside === '' || (!inside.startsWith('..') && !isAbsolute(inside));
}

/**
 * Opens the store once for every database of the directory, refuses a URL
 * that is one database's backup, starts the daemon.
 * @throws DirectoryUnusableError
 */
export async function startDirectory(
  database: DatabaseConfig,
  options: {
    readonly logger: Logger;
    readonly env: Readonly<Record<string, string | undefined>>;
    readonly localLocks: boolean;
  },
): Promise<Daemon & { readonly directory: DirectoryDaemon }> {
  const directoryOptions = database.directory;
  const url = database.urls[0];
  if (directoryOptions === undefined || url === undefined)
    throw new Error(`${database.path} is not a directory entry`);
  const directory = database.path;
  if (!existsSync(directory) || !statSync(directory).isDirectory())
    throw new DirectoryUnusableError(directory, 'it is not a directory');
  const layout = directoryLayout(url.location);
  if (url.location.scheme === 'file' && isWithin(url.location.root, directory))
    throw new DirectoryUnusableError(
      directory,
      `its backups cannot be written inside it (${url.location.root}): give a URL outside it`,
    );
  const { store: bare, prefix } = await openStore(layout.root, options.env);
  const limit = new RequestLimit(DEFAULT_MAX_REQUESTS);
  const store = new InstrumentedStore(new LimitedStore(bare, limit));
  if ((await store.head(joinKey(prefix, 'LATEST'))) !== null)
    throw new DirectoryUnusableError(
      directory,
      `${url.text} holds the backup of one database (its LATEST is there): a directory's databases are backed up in prefixes below its URL, so give the directory a prefix of its own`,
    );
  const storeOf = (location: StoreLocation): InstrumentedStore => {
    if (layout.sharedStore) return store;
    if (location.scheme !== 'file') throw new Error(`no store of its own for ${location.scheme}`);
    return new InstrumentedStore(
      new LimitedStore(new FsStore({ root: location.root }), limit),
      store.counters,
    );
  };
  const daemon = await startDirectoryDaemon(
    { directory, ...directoryOptions, maxStarting: DEFAULT_MAX_STARTING },
    {
      template: database,
      layout,
      storeOf,
      replica: describeLocation(url.location),
      store,
      keys: loadEncryptionKeys(database.encryption, directory),
      logger: options.logger,
      localLocks: options.localLocks,
    },
  );
  return {
    directory: daemon,
    statuses: () => daemon.statuses(),
    databases: (query) => daemon.databases(query),
    perDatabase: () => daemon.perDatabase(),
    shutdown: () => daemon.shutdown(),
  };
}
