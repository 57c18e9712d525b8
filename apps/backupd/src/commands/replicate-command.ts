/**
 * `backupd replicate`: the daemon. Starts one worker per database and replica,
 * optionally the status listener and the application (`--exec`), and runs
 * until a signal or the application stops it (replicate/signals.ts): the
 * first SIGTERM or SIGINT stops gracefully (each worker flushes what is
 * durable, writes a final restore point and releases its lease, within its
 * shutdown grace), a second exits at once (code 130).
 *
 * The steps live in replicate/: the configuration from the arguments, the
 * first-boot restore, starting, supervising and stopping.
 */
import {
  booleanOption,
  type CommandContextFor,
  choiceOption,
  defineCommand,
  stringOption,
} from '../cli/command.ts';
import { DAEMON_OPTIONS } from '../cli/daemon-options.ts';
import { STORE_URL_HELP } from '../cli/store-url-help.ts';
import { UsageError } from '../cli/usage-error.ts';
import { type BackupdConfig, DATABASE_SETTINGS } from '../config.ts';
import { directoryConfig, lockPathOf } from '../directory/replicate-directory.ts';
import {
  EXIT_DATABASE_IN_USE,
  EXIT_FAILED,
  EXIT_INTERRUPTED,
  EXIT_OK,
  EXIT_USAGE,
} from '../exit-codes.ts';
import { createLogger, type Logger } from '../logger.ts';
import { assertWalDatabase, isWalDatabase, waitForWalDatabase } from '../open-sqlite.ts';
import { startApplication } from '../replicate/application.ts';
import { loadReplicateConfig } from '../replicate/config-arguments.ts';
import {
  DatabaseInUseError,
  type DatabaseLock,
  lockDatabases,
  unlockedDatabase,
} from '../replicate/database-lock.ts';
import { restoreMissingDatabases } from '../replicate/first-boot-restore.ts';
import { watchRefusals } from '../replicate/refusals.ts';
import { stopReplication } from '../replicate/shutdown.ts';
import {
  type EarlySignals,
  holdEarlySignals,
  superviseUntilStopped,
} from '../replicate/signals.ts';
import {
  announceBackups,
  lowerCpuPriority,
  type Replication,
  startReplication,
} from '../replicate/start.ts';
import {
  boundedDuration,
  DIRECTORY_DEFAULTS,
  patternProblem,
  RESCAN_BOUNDS,
  SLEEP_AFTER_BOUNDS,
} from '../settings/directory.ts';
import { ENCRYPTION_ENVIRONMENT_HELP } from '../settings/encryption.ts';
import { describeLocation } from '../store-url.ts';

export { defaultBackupUrl } from '../replicate/config-arguments.ts';

const options = {
  config: stringOption({
    short: 'c',
    argument: '<file>',
    description: 'a YAML config with several databases',
  }),
  type: choiceOption(['sqlite', 'framed'], {
    description: 'what <db> is (default sqlite; framed = a framed store directory)',
  }),
  exec: stringOption({
    argument: '"<command>"',
    description: 'run the application as a child; forward signals; exit with its code',
  }),
  dir: stringOption({
    argument: '<dir>',
    description:
      'back up every database of a directory, each under <url>/<its relative path>, each woken only while it changes',
  }),
  pattern: stringOption({
    argument: '<glob>',
    description: 'with --dir: which file names are databases (default *.db)',
  }),
  recursive: booleanOption({ description: 'with --dir: also the databases of its subdirectories' }),
  'sleep-after': stringOption({
    argument: '<duration>',
    description: 'with --dir: a database whose files stay unchanged this long sleeps (default 30s)',
    parse: durationBetween('--sleep-after', SLEEP_AFTER_BOUNDS),
  }),
  rescan: stringOption({
    argument: '<duration>',
    description:
      'with --dir: how often the directory is read again and sleeping databases looked at, beside the file-system watch (default 10s)',
    parse: durationBetween('--rescan', RESCAN_BOUNDS),
  }),
  'restore-if-missing': booleanOption({
    description:
      'restore <db> from <url> first when it does not exist (nothing backed up yet: start fresh), then continue that backup',
  }),
  ...DAEMON_OPTIONS,
} as const;

export const replicateCommand = defineCommand({
  name: 'replicate',
  synopsis: 'replicate <db> [<url>]',
  summary: 'back up a database continuously (default: a directory beside it)',
  usage: `Usage: backupd replicate <db> [<url>] [options]
       backupd replicate --dir <dir> [<url>] [--pattern <glob>] [--recursive] [options]
       backupd replicate -c <config.yml> [options]`,
  description: `Backs up <db> continuously. Without <url>, backups go to the directory
<db>-backups/ beside it (a local store: no cloud account needed).`,
  options,
  afterOptions: environmentHelp(),
  examples: [
    'backupd replicate ./app.db',
    'backupd replicate ./app.db s3://my-bucket/app --listen 127.0.0.1:9090',
    'backupd replicate -c /etc/backupd.yml',
    "backupd replicate --dir /data/tenants --pattern '*.db' s3://my-bucket/tenants",
    'backupd replicate ./app.db s3://my-bucket/app --restore-if-missing --exec "node server.js"',
  ],
  footer: STORE_URL_HELP,
  run: replicate,
});

/** The one-database mode's variables, as many to a line as fit in 120 columns. */
function environmentHelp(): string {
  const lines = ['Environment (durations with a unit: 500ms, 5s, 2m, 1h):'];
  let line = '';
  for (const setting of DATABASE_SETTINGS) {
    const name = `${setting.variable}${setting.value.reading.helpSuffix ?? ''}`;
    if (line !== '' && `${line}, ${name}`.length > 120) {
      lines.push(`${line},`);
      line = '';
    }
    line = line === '' ? `  ${name}` : `${line}, ${name}`;
  }
  return [...lines, line, ENCRYPTION_ENVIRONMENT_HELP].join('\n');
}

/** A duration option within `bounds` (ms). @throws UsageError */
function durationBetween(
  flag: string,
  bounds: { readonly min: number; readonly max: number },
): (text: string) => number {
  return (text) => {
    const parsed = boundedDuration(text, bounds);
    if (typeof parsed === 'string') throw new UsageError(`${flag} ${parsed}`);
    return parsed;
  };
}

async function replicate(context: CommandContextFor<typeof options>): Promise<number> {
  const { values } = context;
  const config =
    values.dir !== undefined
      ? directoryArguments(context, values.dir)
      : replicateArguments(context);
  const logger = createLogger({
    redactor: context.redactor,
    destination: context.stderr,
    ...(values['log-format'] ? { format: values['log-format'] } : {}),
    ...(values['log-level'] ? { level: values['log-level'] } : {}),
  });
  const early = holdEarlySignals(process, (signal) => {
    logger.warn({
      event: 'backupd.second_signal',
      signal,
      note: 'exiting before the start finished',
    });
    process.exit(EXIT_INTERRUPTED);
  });
  try {
    return await replicateWithLocks(context, config, logger, early);
  } finally {
    early.release();
  }
}

/** `--dir <dir> [<url>]` and its options. @throws UsageError | ConfigError */
function directoryArguments(
  context: CommandContextFor<typeof options>,
  directory: string,
): BackupdConfig {
  const { values } = context;
  if (values.config !== undefined) throw new UsageError('give either --dir or -c, not both');
  if (values['restore-if-missing'])
    throw new UsageError('--restore-if-missing restores one database: it does not go with --dir');
  if (values.type === 'framed') throw new UsageError('--dir backs up SQLite databases only');
  const [url, extra] = context.positionals;
  if (extra !== undefined) throw new UsageError(`unexpected argument "${extra}"`);
  const pattern = values.pattern ?? DIRECTORY_DEFAULTS.pattern;
  const badPattern = patternProblem(pattern);
  if (badPattern !== undefined) throw new UsageError(`--pattern ${badPattern}`);
  return directoryConfig({
    directory,
    url,
    options: {
      pattern,
      recursive: values.recursive === true,
      quietMs: values['sleep-after'] ?? DIRECTORY_DEFAULTS.quietMs,
      rescanMs: values.rescan ?? DIRECTORY_DEFAULTS.rescanMs,
    },
    listen: values.listen,
    cwd: context.cwd,
    env: context.env,
  });
}

/** `<db> [<url>]` or `-c <config>`. @throws UsageError | ConfigError */
function replicateArguments(context: CommandContextFor<typeof options>): BackupdConfig {
  const { values } = context;
  for (const flag of ['pattern', 'recursive', 'sleep-after', 'rescan'] as const)
    if (values[flag] !== undefined && values[flag] !== false)
      throw new UsageError(`--${flag} goes with --dir`);
  return loadReplicateConfig({
    positionals: context.positionals,
    config: values.config,
    type: values.type,
    listen: values.listen,
    cwd: context.cwd,
    env: context.env,
  });
}

/** `replicate` once its settings are read: the local locks, then the run. */
async function replicateWithLocks(
  context: CommandContextFor<typeof options>,
  config: BackupdConfig,
  logger: Logger,
  early: EarlySignals,
): Promise<number> {
  const { values } = context;
  // A database that is not there (or not in WAL mode) is refused before
  // anything is written beside it; a first boot restores or awaits it.
  if (!values['restore-if-missing'])
    for (const database of config.databases)
      if (database.type === 'sqlite' && !database.directory) assertWalDatabase(database.path);
  // One replicate per database on a host: before anything else (a first
  // boot's restore included), each database's lock beside it is taken or
  // the start is refused, naming the holder. The kernel releases the locks
  // when this process ends, however it ends.
  let locks: DatabaseLock[];
  const lockSetting = context.env.BACKUPD_DATABASE_LOCK;
  if (lockSetting !== undefined && lockSetting !== 'on' && lockSetting !== 'off') {
    context.stderr.write(
      `backupd replicate: BACKUPD_DATABASE_LOCK must be "on" or "off", got ${JSON.stringify(lockSetting)}\n`,
    );
    return EXIT_USAGE;
  }
  if (lockSetting === 'off') {
    // For a file system without working POSIX locks, or to exercise the
    // bucket lease alone: a second replicate is then not refused.
    logger.warn({
      event: 'backupd.database_lock_off',
      note: 'BACKUPD_DATABASE_LOCK=off: a second replicate of the same database is not refused; the bucket lease alone keeps writers apart, and a restart waits out the lease TTL',
    });
    locks = config.databases.map((database) => unlockedDatabase(lockPathOf(database)));
    return await replicateLocked(context, { config, logger, locks, early, localLocks: false });
  }
  try {
    locks = lockDatabases(
      config.databases.map((database) => ({
        path: lockPathOf(database),
        replicas: database.urls.map((url) => describeLocation(url.location)),
      })),
    );
  } catch (error) {
    if (!(error instanceof DatabaseInUseError)) throw error;
    logger.error({
      event: 'backupd.database_in_use',
      database: error.database,
      lock: error.lockFile,
      ...(error.holder ? { holder: error.holder } : {}),
      error: error.message,
    });
    context.stderr.write(context.redactor.text(`backupd replicate: ${error.message}\n`));
    return EXIT_DATABASE_IN_USE;
  }
  try {
    return await replicateLocked(context, { config, logger, locks, early, localLocks: true });
  } finally {
    for (const lock of locks) lock.release();
  }
}

/** `replicate` once every database's local lock is held. */
async function replicateLocked(
  context: CommandContextFor<typeof options>,
  run: {
    readonly config: BackupdConfig;
    readonly logger: Logger;
    readonly locks: DatabaseLock[];
    readonly early: EarlySignals;
    readonly localLocks: boolean;
  },
): Promise<number> {
  const { values } = context;
  const { config, logger, localLocks } = run;
  const instanceIds = new Map(run.locks.map((lock) => [lock.database, lock.instanceId]));
  for (const lock of run.locks)
    logger.info({
      event: 'backupd.database_locked',
      database: lock.database,
      lock: lock.files.lock,
      instanceId: lock.instanceId,
      instanceIdKept: lock.reused,
    });
  announceBackups(config, context);
  const firstBoot = values['restore-if-missing']
    ? await restoreMissingDatabases(config, { env: context.env, logger })
    : { restored: [], fresh: [] };
  // A first boot's SQLite database is the application's to create.
  const awaited = config.databases.filter(
    (database) =>
      database.type === 'sqlite' &&
      !database.directory &&
      firstBoot.fresh.includes(database.path) &&
      !isWalDatabase(database.path),
  );
  const first = awaited[0];
  if (first !== undefined && values.exec === undefined)
    throw new Error(
      `${first.path} does not exist and nothing was backed up at ${first.urls[0]?.text} yet: create it (a SQLite database in WAL mode) first, or give --exec so backupd starts the application and backs the database up once it exists`,
    );
  // The workers' timers do not keep the process alive by themselves; the
  // daemon runs until a signal (or the application) stops it.
  const keepAlive = setInterval(() => {}, 1 << 30);
  try {
    if (values.exec !== undefined && awaited.length > 0)
      return await firstBootReplicate(context, {
        config,
        logger,
        command: values.exec,
        awaited: awaited.map((database) => database.path),
        instanceIds,
        early: run.early,
        localLocks,
      });
    const replication = await startReplication(config, {
      ...context,
      logger,
      instanceIds,
      localLocks,
    });
    const application = values.exec !== undefined ? startApplication(values.exec) : undefined;
    // Only now, so the application started above keeps its own priority.
    lowerCpuPriority(config, logger);
    return await superviseUntilStopped({
      logger,
      signals: process,
      early: run.early,
      ...(application ? { application } : {}),
      stop: (code) => stopReplication(replication, logger, code),
      exit: (code) => process.exit(code),
      watchRefusals: (onRefused) => watchRefusals(() => replication.daemon.statuses(), onRefused),
    });
  } finally {
    clearInterval(keepAlive);
  }
}

/**
 * A first boot with nothing backed up yet: the application starts first
 * (it creates the database), replication once every awaited database is a
 * SQLite database in WAL mode. Signals reach the application meanwhile. An
 * application that exits before creating its database backed up nothing:
 * its own failure code, or 1 when it exited 0.
 * @throws what starting replication threw (after the application stopped).
 */
async function firstBootReplicate(
  context: CommandContextFor<typeof options>,
  run: {
    readonly config: BackupdConfig;
    readonly logger: Logger;
    readonly command: string;
    readonly awaited: readonly string[];
    readonly instanceIds: ReadonlyMap<string, string>;
    readonly early: EarlySignals;
    readonly localLocks: boolean;
  },
): Promise<number> {
  const { logger } = run;
  const application = startApplication(run.command);
  lowerCpuPriority(run.config, logger);
  let startError: unknown;
  const starting = (async (): Promise<Replication | undefined> => {
    for (const path of run.awaited) {
      logger.info({
        event: 'backupd.waiting_for_database',
        database: path,
        note: 'the backup starts once the application has created it in WAL mode',
      });
      const created = await waitForWalDatabase(path, {
        gaveUp: () => application.exitCode !== null,
      });
      if (!created) {
        logger.error({
          event: 'backupd.database_not_created',
          database: path,
          note: `the application exited before creating ${path} in WAL mode; nothing was backed up`,
        });
        return undefined;
      }
    }
    return startReplication(run.config, {
      ...context,
      logger,
      instanceIds: run.instanceIds,
      localLocks: run.localLocks,
    });
  })().catch((error: unknown) => {
    startError = error;
    if (application.exitCode === null) application.kill('SIGTERM');
    return undefined;
  });
  const code = await superviseUntilStopped({
    logger,
    signals: process,
    early: run.early,
    application,
    watchRefusals: (onRefused) => {
      let replication: Replication | undefined;
      void starting.then((started) => {
        replication = started;
      });
      return watchRefusals(() => replication?.daemon.statuses() ?? [], onRefused);
    },
    stop: async (asked) => {
      const replication = await starting;
      if (replication) return stopReplication(replication, logger, asked);
      return asked === EXIT_OK ? EXIT_FAILED : asked;
    },
    exit: (exitCode) => process.exit(exitCode),
  });
  if (startError !== undefined) throw startError;
  return code;
}
