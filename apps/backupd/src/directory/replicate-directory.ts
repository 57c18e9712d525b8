/**
 * `backupd replicate --dir <dir> [<url>]`: every database of a directory,
 * each under `<url>/<its relative path>`, each woken only while it changes
 * (directory-daemon.ts). One lock on the directory keeps a second
 * `replicate --dir` of it from starting on this host; each database's own
 * lock is taken while it is awake, so a `replicate` of one of its databases
 * alone is refused, or refuses it, as two replicates of one database are.
 */
import { existsSync, statSync } from 'node:fs';
import { isAbsolute, join, relative, resolve } from 'node:path';
import { FsStore } from '@x/store';
import { joinKey } from '@x/store/keys';
import { UsageError } from '../cli/usage-error.ts';
import { type BackupdConfig, singleDatabaseConfig } from '../config.ts';
import type { Daemon } from '../daemon.ts';
import { loadEncryptionKeys } from '../encryption-settings.ts';
import { InstrumentedStore } from '../instrumented-store.ts';
import type { Logger } from '../logger.ts';
import { openStore } from '../open-store.ts';
import { DatabaseInUseError, type DatabaseLock, lockDatabase } from '../replicate/database-lock.ts';
import {
  commandLineUrl,
  describeLocation,
  parseStoreUrl,
  type StoreLocation,
} from '../store-url.ts';
import { globMatcher } from './database-names.ts';
import {
  type DirectoryDaemon,
  type DirectorySettings,
  startDirectoryDaemon,
} from './directory-daemon.ts';
import { directoryLayout } from './directory-layout.ts';

/** The name the directory's own lock is taken under (hidden: never a database of it). */
export const DIRECTORY_LOCK_NAME = '.backupd-directory';

/** Databases starting at once: enough to keep a store busy, few enough to bound memory. */
export const DEFAULT_MAX_STARTING = 8;

export interface DirectoryArguments {
  readonly directory: string;
  readonly url: string | undefined;
  readonly pattern: string;
  readonly recursive: boolean;
  readonly quietMs: number;
  readonly rescanMs: number;
  readonly listen: string | undefined;
  readonly cwd: string;
  readonly env: Readonly<Record<string, string | undefined>>;
}

/** The directory's backup URL when none is given: a directory beside it, `<dir>-backups`. */
export function defaultDirectoryUrl(directory: string): string {
  return `${directory}-backups`;
}

/** The settings, checked: every database of the directory takes them. @throws UsageError | ConfigError */
export function directoryConfig(args: DirectoryArguments): {
  readonly config: BackupdConfig;
  readonly settings: DirectorySettings;
} {
  const directory = resolve(args.cwd, args.directory);
  if (!existsSync(directory) || !statSync(directory).isDirectory())
    throw new UsageError(`--dir ${args.directory}: no such directory`);
  try {
    globMatcher(args.pattern);
  } catch (error) {
    throw new UsageError(`--pattern: ${(error as Error).message}`);
  }
  const url =
    args.url === undefined ? defaultDirectoryUrl(directory) : commandLineUrl(args.url, args.cwd);
  const location = parseStoreUrl(url);
  if (location.scheme === 'file' && isWithin(location.root, directory))
    throw new UsageError(
      `the backups of ${directory} cannot be written inside it (${location.root}): give a directory outside it`,
    );
  const config = singleDatabaseConfig(
    { path: directory, url, type: 'sqlite' },
    { env: args.env, baseDir: args.cwd, ...(args.listen ? { listen: args.listen } : {}) },
  );
  return {
    config,
    settings: {
      directory,
      pattern: args.pattern,
      recursive: args.recursive,
      quietMs: args.quietMs,
      rescanMs: args.rescanMs,
      maxStarting: DEFAULT_MAX_STARTING,
    },
  };
}

function isWithin(path: string, directory: string): boolean {
  const inside = relative(directory, path);
  return inside === '' || (!inside.startsWith('..') && !isAbsolute(inside));
}

/** A directory whose URL already holds one database's backup at its root. */
export class DirectoryPrefixTakenError extends Error {
  /** Whether the same call, made again later, may succeed with nothing else changed. */
  get retryable(): boolean {
    return false;
  }

  override readonly name = 'DirectoryPrefixTakenError';
  readonly code = 'DIRECTORY_PREFIX_TAKEN';

  constructor(url: string) {
    super(
      `${url} holds the backup of one database (its LATEST is there): a directory's databases are backed up in prefixes below its URL, so give the directory a prefix of its own`,
    );
  }
}

/** Locks the directory. @throws DatabaseInUseError when another `replicate --dir` of it runs. */
export function lockDirectory(directory: string, replica: string): DatabaseLock {
  return lockDatabase(join(directory, DIRECTORY_LOCK_NAME), [replica]);
}

export { DatabaseInUseError };

/** Opens the store once for every database, refuses a URL that is one database's backup, starts the daemon. */
export async function startDirectory(
  config: BackupdConfig,
  settings: DirectorySettings,
  options: {
    readonly logger: Logger;
    readonly env: Readonly<Record<string, string | undefined>>;
    readonly localLocks: boolean;
  },
): Promise<Daemon & { readonly directory: DirectoryDaemon }> {
  const template = config.databases[0]!;
  const url = template.urls[0]!;
  const layout = directoryLayout(url.location);
  const { store: bare, prefix } = await openStore(layout.root, options.env);
  const store = new InstrumentedStore(bare);
  if ((await store.head(joinKey(prefix, 'LATEST'))) !== null)
    throw new DirectoryPrefixTakenError(url.text);
  const storeOf = (location: StoreLocation): InstrumentedStore => {
    if (layout.sharedStore) return store;
    if (location.scheme !== 'file') throw new Error(`no store of its own for ${location.scheme}`);
    return new InstrumentedStore(new FsStore({ root: location.root }), store.counters);
  };
  const directory = await startDirectoryDaemon(settings, {
    template,
    layout,
    storeOf,
    replica: describeLocation(url.location),
    store,
    keys: loadEncryptionKeys(template.encryption, settings.directory),
    logger: options.logger,
    localLocks: options.localLocks,
  });
  return { directory, statuses: () => directory.statuses(), shutdown: () => directory.shutdown() };
}
