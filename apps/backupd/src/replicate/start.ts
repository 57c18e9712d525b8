/**
 * Starting replication: the banner, the daemon (one worker per database and
 * replica) and, with `listen`, the status server; then lowering backupd's CPU
 * priority, which the command does only after starting the application.
 */
import { applyCpuPriority, DEFAULT_CPU_PRIORITY } from '@x/cpu-priority';
import type { BackupdConfig } from '../config.ts';
import { type Daemon, defaultSourceFactory, startDaemon } from '../daemon.ts';
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
          `backupd ${VERSION}: backing up ${database.path} (${database.type}) to ${url.text}\n`,
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
  },
): Promise<Replication> {
  let daemon: Daemon;
  try {
    daemon = await startDaemon(config, {
      logger: options.logger,
      env: options.env,
      sources: defaultSourceFactory(sqliteSourceFactory(config)),
      ...(options.instanceIds ? { instanceIds: options.instanceIds } : {}),
    });
  } catch (error) {
    options.logger.error({ event: 'backupd.start_failed', ...errorFields(error) });
    throw error;
  }
  if (!config.listen) return { daemon };
  const server = await startStatusServer(
    config.listen,
    { statuses: () => daemon.statuses(), version: VERSION, startedAt: Date.now() },
    options.redactor,
  );
  options.logger.info({ event: 'backupd.listening', url: server.url });
  return { daemon, server };
}

/** Applies `cpuPriority` and logs what it got (a warning when less than asked). */
export function lowerCpuPriority(config: BackupdConfig, logger: Logger): void {
  const priority = applyCpuPriority(config.cpuPriority ?? DEFAULT_CPU_PRIORITY);
  if (priority.note)
    logger.warn({ event: 'backupd.cpu_priority', applied: priority.applied, note: priority.note });
  else logger.info({ event: 'backupd.cpu_priority', applied: priority.applied });
}
