/**
 * `replicate --dir`: the command's run once its options are read. The
 * directory's lock, the banner, the daemon, the status listener and the
 * application, then supervision until a signal (replicate/signals.ts), as
 * for one database.
 */
import type { CommandIo } from '../cli/command.ts';
import { UsageError } from '../cli/usage-error.ts';
import { EXIT_DATABASE_IN_USE, EXIT_INTERRUPTED } from '../exit-codes.ts';
import { startStatusServer } from '../http-server.ts';
import { createLogger, errorFields, type LogLevel } from '../logger.ts';
import { startApplication } from '../replicate/application.ts';
import type { DatabaseLock } from '../replicate/database-lock.ts';
import { stopReplication } from '../replicate/shutdown.ts';
import { holdEarlySignals, superviseUntilStopped } from '../replicate/signals.ts';
import { lowerCpuPriority, type Replication } from '../replicate/start.ts';
import { VERSION } from '../version.ts';
import {
  DatabaseInUseError,
  directoryConfig,
  lockDirectory,
  startDirectory,
} from './replicate-directory.ts';

export interface DirectoryCommandValues {
  readonly directory: string;
  readonly positionals: readonly string[];
  readonly pattern: string;
  readonly recursive: boolean;
  readonly quietMs: number;
  readonly rescanMs: number;
  readonly listen: string | undefined;
  readonly logFormat: 'json' | 'pretty' | undefined;
  readonly logLevel: LogLevel | undefined;
  readonly exec: string | undefined;
}

export async function replicateDirectory(
  values: DirectoryCommandValues,
  io: CommandIo,
): Promise<number> {
  const [url, extra] = values.positionals;
  if (extra !== undefined) throw new UsageError(`unexpected argument "${extra}"`);
  const { config, settings } = directoryConfig({
    directory: values.directory,
    url,
    pattern: values.pattern,
    recursive: values.recursive,
    quietMs: values.quietMs,
    rescanMs: values.rescanMs,
    listen: values.listen,
    cwd: io.cwd,
    env: io.env,
  });
  const logger = createLogger({
    redactor: io.redactor,
    destination: io.stderr,
    ...(values.logFormat ? { format: values.logFormat } : {}),
    ...(values.logLevel ? { level: values.logLevel } : {}),
  });
  const early = holdEarlySignals(process, () => process.exit(EXIT_INTERRUPTED));
  const backupUrl = config.databases[0]!.urls[0]!.text;
  const localLocks = io.env.BACKUPD_DATABASE_LOCK !== 'off';
  let lock: DatabaseLock | null = null;
  try {
    if (localLocks) lock = lockDirectory(settings.directory, backupUrl);
  } catch (error) {
    early.release();
    if (!(error instanceof DatabaseInUseError)) throw error;
    logger.error({
      event: 'backupd.directory_in_use',
      directory: settings.directory,
      error: error.message,
    });
    io.stderr.write(io.redactor.text(`backupd replicate: ${error.message}\n`));
    return EXIT_DATABASE_IN_USE;
  }
  const keepAlive = setInterval(() => {}, 1 << 30);
  try {
    io.stdout.write(
      io.redactor.text(
        `backupd ${VERSION}: backing up the databases of ${settings.directory} matching ${settings.pattern}${settings.recursive ? ' (and its subdirectories)' : ''} to ${backupUrl}/<name>\n`,
      ),
    );
    let replication: Replication;
    try {
      const daemon = await startDirectory(config, settings, { logger, env: io.env, localLocks });
      const server = config.listen
        ? await startStatusServer(
            config.listen,
            { statuses: () => daemon.statuses(), version: VERSION, startedAt: Date.now() },
            io.redactor,
          )
        : undefined;
      if (server) logger.info({ event: 'backupd.listening', url: server.url });
      replication = server ? { daemon, server } : { daemon };
    } catch (error) {
      logger.error({ event: 'backupd.start_failed', ...errorFields(error) });
      throw error;
    }
    const application = values.exec !== undefined ? startApplication(values.exec) : undefined;
    lowerCpuPriority(config, logger);
    return await superviseUntilStopped({
      logger,
      signals: process,
      early,
      ...(application ? { application } : {}),
      stop: (code) => stopReplication(replication, logger, code),
      exit: (code) => process.exit(code),
    });
  } finally {
    clearInterval(keepAlive);
    early.release();
    lock?.release();
  }
}
