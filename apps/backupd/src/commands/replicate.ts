/**
 * `backupd replicate`: the daemon. Starts one worker per database and replica,
 * optionally the status listener and the application (`--exec`), and handles
 * signals:
 * - the first SIGTERM or SIGINT starts a graceful shutdown: each worker
 *   flushes what is durable, writes a final restore point and releases its
 *   lease, within its shutdown grace;
 * - a second one exits at once (code 130);
 * - with `--exec`, signals are forwarded to the application, and backupd
 *   shuts down and exits with the application's code once it exits.
 */
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { basename, dirname, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import {
  type BackupdConfig,
  parseConfig,
  type SourceKind,
  singleDatabaseConfig,
} from '../config.ts';
import { applyCpuPriority, DEFAULT_CPU_PRIORITY } from '../cpu-priority.ts';
import { type Daemon, defaultSourceFactory, startDaemon } from '../daemon.ts';
import { EXIT_FAILED, EXIT_INCOMPLETE, EXIT_INTERRUPTED, EXIT_OK } from '../exit-codes.ts';
import { type StatusServer, startStatusServer } from '../http-server.ts';
import { createLogger, errorFields } from '../logger.ts';
import type { CommandContext } from '../main.ts';
import { UsageError } from '../main.ts';
import { openStore } from '../open-store.ts';
import { restoreDatabase } from '../restore-database.ts';
import { sqliteSourceFactory } from '../sqlite-source.ts';
import { VERSION } from '../usage.ts';

/** The embedded default: a directory beside the database, `<db>-backups`. */
export function defaultBackupUrl(databasePath: string): string {
  return pathToFileURL(resolve(dirname(databasePath), `${basename(databasePath)}-backups`)).href;
}

function loadConfig(context: CommandContext): BackupdConfig {
  const listen = typeof context.values.listen === 'string' ? context.values.listen : undefined;
  const type = context.values.type as SourceKind | undefined;
  if (type !== undefined && type !== 'sqlite' && type !== 'framed')
    throw new UsageError(`--type must be sqlite or framed, got "${type}"`);
  if (typeof context.values.config === 'string') {
    if (context.positionals.length > 0)
      throw new UsageError('give either -c <config> or <db> [<url>], not both');
    const path = resolve(context.cwd, context.values.config);
    let text: string;
    try {
      text = readFileSync(path, 'utf8');
    } catch (error) {
      throw new UsageError(
        `cannot read the config file ${path}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`,
      );
    }
    const config = parseConfig(text, { env: context.env, baseDir: dirname(path), source: path });
    return listen ? { ...config, listen } : config;
  }
  const [database, url, extra] = context.positionals;
  if (database === undefined) throw new UsageError('missing <db> (or -c <config>)');
  if (extra !== undefined) throw new UsageError(`unexpected argument "${extra}"`);
  const absolute = resolve(context.cwd, database);
  return singleDatabaseConfig(
    { path: absolute, url: url ?? defaultBackupUrl(absolute), ...(type ? { type } : {}) },
    { env: context.env, baseDir: context.cwd, ...(listen ? { listen } : {}) },
  );
}

export async function replicateCommand(context: CommandContext): Promise<number> {
  const config = loadConfig(context);
  const format = context.values['log-format'];
  if (format !== undefined && format !== 'json' && format !== 'pretty')
    throw new UsageError(`--log-format must be json or pretty, got "${format}"`);
  const logger = createLogger({
    redactor: context.redactor,
    destination: context.stderr,
    ...(format ? { format } : {}),
    ...(typeof context.values['log-level'] === 'string'
      ? { level: context.values['log-level'] }
      : {}),
  });

  for (const database of config.databases) {
    for (const url of database.urls) {
      context.stdout.write(
        context.redactor.text(
          `backupd ${VERSION}: backing up ${database.path} (${database.type}) to ${url.text}\n`,
        ),
      );
    }
  }

  if (context.values['restore-if-missing']) {
    for (const database of config.databases) {
      if (existsSync(database.path)) continue;
      const first = database.urls[0]!;
      const { store, prefix } = await openStore(first.location, context.env);
      logger.info({ event: 'restore-if-missing', database: database.path, from: first.text });
      const result = await restoreDatabase(store, prefix, database.path, { force: false });
      logger.info({
        event: 'restored',
        database: database.path,
        commitSeq: result.commitSeq,
        manifest: result.manifestKey,
      });
    }
  }

  let daemon: Daemon;
  try {
    daemon = await startDaemon(config, {
      logger,
      env: context.env,
      sources: defaultSourceFactory(sqliteSourceFactory(config)),
    });
  } catch (error) {
    logger.error({ event: 'start-failed', ...errorFields(error) });
    throw error;
  }
  let server: StatusServer | undefined;
  if (config.listen) {
    server = await startStatusServer(
      config.listen,
      { statuses: () => daemon.statuses(), version: VERSION, startedAt: Date.now() },
      context.redactor,
    );
    logger.info({ event: 'listening', url: server.url });
  }

  // The workers' timers do not keep the process alive by themselves; the
  // daemon runs until a signal (or the application) stops it.
  const keepAlive = setInterval(() => {}, 1 << 30);
  return await new Promise<number>((resolvePromise) => {
    let stopping = false;
    let childExit: number | undefined;
    const child =
      typeof context.values.exec === 'string'
        ? // `exec` makes the shell replace itself with the application, so the
          // signals forwarded below reach the application, not a shell around it.
          spawn('/bin/sh', ['-c', `exec ${context.values.exec}`], { stdio: 'inherit' })
        : undefined;
    // Only now, so the application started above keeps its own priority.
    const priority = applyCpuPriority(config.cpuPriority ?? DEFAULT_CPU_PRIORITY);
    if (priority.note)
      logger.warn({ event: 'cpu-priority', applied: priority.applied, note: priority.note });
    else logger.info({ event: 'cpu-priority', applied: priority.applied });

    const stop = async (code: number) => {
      if (stopping) return;
      stopping = true;
      logger.info({ event: 'shutting-down' });
      try {
        const reports = await daemon.shutdown();
        await server?.close();
        const incomplete = reports.filter((entry) => !entry.report.complete);
        for (const entry of incomplete) {
          const { report } = entry;
          logger.error({
            event: 'stopped-incomplete',
            database: entry.database,
            replica: entry.replica,
            unrestorableCommits: report.unrestorableCommits,
            restorableCommitSeq: report.restorableCommitSeq,
            capturedCommitSeq: report.capturedCommitSeq,
            unrestorableSince:
              report.unrestorableSince === null
                ? null
                : new Date(report.unrestorableSince).toISOString(),
            unrestorableUntil:
              report.unrestorableUntil === null
                ? null
                : new Date(report.unrestorableUntil).toISOString(),
          });
        }
        logger.info({ event: 'stopped' });
        clearInterval(keepAlive);
        // The application's own failure is reported as it is; a clean exit
        // (or none) that left commits unrestorable is not a success.
        resolvePromise(incomplete.length > 0 && code === EXIT_OK ? EXIT_INCOMPLETE : code);
      } catch (error) {
        logger.error({ event: 'shutdown-failed', ...errorFields(error) });
        clearInterval(keepAlive);
        resolvePromise(EXIT_FAILED);
      }
    };

    let signals = 0;
    const onSignal = (signal: NodeJS.Signals) => {
      signals += 1;
      if (signals > 1) {
        logger.warn({
          event: 'second-signal',
          signal,
          note: 'exiting without finishing the shutdown',
        });
        process.exit(EXIT_INTERRUPTED);
      }
      if (child && child.exitCode === null) {
        child.kill(signal);
        return; // backupd stops when the application has exited
      }
      void stop(EXIT_OK);
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
    if (child) {
      process.on('SIGHUP', () => child.kill('SIGHUP'));
      child.on('exit', (code, signal) => {
        childExit = code ?? (signal ? 128 + (signalNumber(signal) ?? 1) : EXIT_FAILED);
        logger.info({ event: 'application-exited', code, signal });
        void stop(childExit);
      });
      child.on('error', (error) => {
        logger.error({ event: 'application-failed-to-start', ...errorFields(error) });
        void stop(EXIT_FAILED);
      });
    }
  });
}

function signalNumber(signal: NodeJS.Signals): number | undefined {
  const numbers: Partial<Record<NodeJS.Signals, number>> = {
    SIGHUP: 1,
    SIGINT: 2,
    SIGKILL: 9,
    SIGTERM: 15,
  };
  return numbers[signal];
}
