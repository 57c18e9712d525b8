/**
 * Starting replication: the banner, the daemon (one worker per database and
 * replica, one directory daemon per directory: directory/) and, with `listen`, the status server; then lowering backupd's CPU
 * priority, which the command does only after starting the application.
 */
import { applyCpuPriority, DEFAULT_CPU_PRIORITY } from '@x/cpu-priority';
import type { BackupdConfig } from '../config.ts';
import { type Daemon, defaultSourceFactory, startDaemon } from '../daemon.ts';
import { startDirectory } from '../directory/replicate-directory.ts';
import { type StatusServer, startStatusServer } from '../http-server.ts';
import { errorFields, type Logger } from '../logger.ts';
import { sqliteSourceFactory } from '../open-sqlite.ts';
import type { Redactor } from '../redact.ts';
import { VERSION } from '../version.ts';

export interface Replication {
  readonly daemon: Daemon;
  readonly server?: StatusServer;
}

/** One line per database and replica on standard output: what is backed up where. */
export function announceBackups(
  config: BackupdConfig,
  output: { readonly stdout: NodeJS.WritableStream; readonly redactor: Redactor },
): void {
  for (const database of config.databases)
    for (const url of database.urls)
      output.stdout.write(
        output.redactor.text(
          database.directory
            ? `backupd ${VERSION}: backing up the databases of ${database.path} matching ${database.directory.pattern}${database.directory.recursive ? ' (and its subdirectories)' : ''} to ${url.text}/<name>\n`
            : `backupd ${VERSION}: backing up ${database.path} (${database.type}) to ${url.text}\n`,
        ),
      );
}

/** @throws what the daemon or the listener throws; a daemon that fails to start is logged first. */
export async function startReplication(
  config: BackupdConfig,
  options: {
    readonly logger: Logger;
    readonly env: Readonly<Record<string, string | undefined>>;
    readonly redactor: Redactor;
    /** Each database's lease instance id, kept under its local lock (see database-lock.ts). */
    readonly instanceIds?: ReadonlyMap<string, string>;
    /** `false` (`BACKUPD_DATABASE_LOCK=off`): a directory's databases take no local lock either. */
    readonly localLocks?: boolean;
  },
): Promise<Replication> {
  let daemon: Daemon;
  try {
    daemon = await startDaemons(config, options);
  } catch (error) {
    options.logger.error({ event: 'backupd.start_failed', ...errorFields(error) });
    throw error;
  }
  if (!config.listen) return { daemon };
  const server = await startStatusServer(
    config.listen,
    {
      statuses: () => daemon.statuses(),
      ...(daemon.databases ? { databases: daemon.databases } : {}),
      ...(daemon.perDatabase ? { perDatabase: daemon.perDatabase } : {}),
      version: VERSION,
      startedAt: Date.now(),
    },
    options.redactor,
  );
  options.logger.info({ event: 'backupd.listening', url: server.url });
  return { daemon, server };
}

/** The listed databases' daemon and one per directory, as one. */
async function startDaemons(
  config: BackupdConfig,
  options: Parameters<typeof startReplication>[1],
): Promise<Daemon> {
  const listed = { ...config, databases: config.databases.filter((entry) => !entry.directory) };
  const daemons: Daemon[] = [];
  try {
    if (listed.databases.length > 0)
      daemons.push(
        await startDaemon(listed, {
          logger: options.logger,
          env: options.env,
          sources: defaultSourceFactory(sqliteSourceFactory(config)),
          ...(options.instanceIds ? { instanceIds: options.instanceIds } : {}),
        }),
      );
    for (const database of config.databases)
      if (database.directory)
        daemons.push(
          await startDirectory(database, {
            logger: options.logger,
            env: options.env,
            localLocks: options.localLocks ?? true,
          }),
        );
  } catch (error) {
    await Promise.allSettled(daemons.map((daemon) => daemon.shutdown()));
    throw error;
  }
  const [only] = daemons;
  if (daemons.length === 1 && only !== undefined) return only;
  return {
    statuses: () => daemons.flatMap((daemon) => daemon.statuses()),
    databases: (query) =>
      daemons
        .flatMap((daemon) => daemon.databases?.(query) ?? [])
        .sort((a, b) => (b.lagSeconds ?? -1) - (a.lagSeconds ?? -1))
        .slice(0, query.limit),
    perDatabase: () => daemons.flatMap((daemon) => daemon.perDatabase?.() ?? []),
    shutdown: async () => (await Promise.all(daemons.map((daemon) => daemon.shutdown()))).flat(),
  };
}

/** Applies `cpuPriority` and logs what it got (a warning when less than asked). */
export function lowerCpuPriority(config: BackupdConfig, logger: Logger): void {
  const priority = applyCpuPriority(config.cpuPriority ?? DEFAULT_CPU_PRIORITY);
  if (priority.note)
    logger.warn({ event: 'backupd.cpu_priority', applied: priority.applied, note: priority.note });
  else logger.info({ event: 'backupd.cpu_priority', applied: priority.applied });
}
