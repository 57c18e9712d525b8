/**
 * The daemon: one backup worker per (database, replica URL), each with its
 * own store, lease and health, and the status they report. It owns nothing
 * else: signals, the HTTP listener and a child application are the
 * replicate command's.
 */

import { hostname } from 'node:os';
import {
  type BackupHandle,
  type BackupHealth,
  type BackupLogger,
  BackupWorker,
  type EncryptionOptions,
  type OpenSource,
  type ShutdownReport,
} from '@x/backup-worker';
import type { BackupSource } from '@x/engine';
import { FramedDirSource } from '@x/source-framed';
import { type BackupdConfig, type DatabaseConfig, retentionOptions } from './config.ts';
import {
  type EncryptionKeys,
  loadEncryptionKeys,
  workerEncryption,
} from './encryption-settings.ts';
import { InstrumentedStore } from './instrumented-store.ts';
import type { Logger } from './logger.ts';
import { openStore } from './open-store.ts';
import type { DatabaseQuery, DirectoryDatabaseRow, ReplicaStatus } from './status.ts';
import { describeLocation, type StoreLocation } from './store-url.ts';

interface Replica {
  readonly database: DatabaseConfig;
  readonly location: StoreLocation;
  readonly store: InstrumentedStore;
  readonly handle: BackupHandle;
  /** The source the daemon opened and closes; null when the worker opens its own (`openSource`). */
  readonly source: BackupSource | null;
  /** Set once the worker has ended for good (its `done` settled): `/livez` answers 503. */
  stopped: boolean;
}

export interface Daemon {
  statuses(): ReplicaStatus[];
  /** A directory's databases (see `StatusSource.databases`). */
  databases?(query: DatabaseQuery): DirectoryDatabaseRow[];
  /** A directory's awake databases, a row each. */
  perDatabase?(): ReplicaStatus[];
  /**
   * Graceful: every worker flushes, writes its final manifest and releases
   * its lease, within its grace period. Resolves with each replica's report
   * of what it could not make restorable.
   */
  shutdown(): Promise<ReplicaShutdown[]>;
}

/** One replica's shutdown report. */
export interface ReplicaShutdown {
  readonly database: string;
  readonly replica: string;
  readonly report: ShutdownReport;
}

/**
 * How a replica's worker gets its source: opened here (`source`, closed by
 * the daemon at shutdown), or opened by the worker when it holds the lease
 * (`openSource`, closed by the worker when the lease goes).
 */
export type SourceChoice =
  | { readonly source: BackupSource; readonly openSource?: undefined }
  | { readonly openSource: OpenSource; readonly source?: undefined };

export type SourceFactory = (database: DatabaseConfig) => Promise<SourceChoice>;

/** The default sources: framed store directories here; SQLite through `sqliteSourceFactory` when given. */
export function defaultSourceFactory(sqlite?: SourceFactory): SourceFactory {
  return async (database) => {
    if (database.type === 'framed')
      return { source: new FramedDirSource({ directory: database.path }) };
    if (!sqlite) throw new Error('SQLite sources are not available in this build');
    return sqlite(database);
  };
}

function workerLogger(logger: Logger, fields: Record<string, string>): BackupLogger {
  const child = logger.child(fields);
  return {
    debug: (event, extra) => child.debug({ event, ...extra }),
    info: (event, extra) => child.info({ event, ...extra }),
    warn: (event, extra) => child.warn({ event, ...extra }),
    error: (event, extra) => child.error({ event, ...extra }),
  };
}

function encryptionOf(keys: EncryptionKeys): { encryption?: EncryptionOptions } {
  const encryption = workerEncryption(keys);
  return encryption === undefined ? {} : { encryption };
}

/** A worker backing `database` up to `prefix` of `store`, with the database's settings. */
export function newWorker(
  database: DatabaseConfig,
  parts: {
    readonly store: InstrumentedStore;
    readonly prefix: string;
    readonly choice: SourceChoice;
    readonly keys: EncryptionKeys;
    readonly logger: Logger;
    /** The replica as logs name it. */
    readonly replica: string;
    /** The lease instance id kept under the database's local lock, if any. */
    readonly instanceId: string | undefined;
  },
): BackupWorker {
  const { instanceId } = parts;
  return new BackupWorker({
    store: parts.store,
    prefix: parts.prefix,
    ...parts.choice,
    walIntervalMs: database.intervalMs,
    manifestIntervalMs: database.restorePointIntervalMs,
    ...retentionOptions(database.retention),
    leaseTtlSeconds: database.leaseTtlSeconds,
    conditional: database.conditional,
    shutdownGraceMs: database.shutdownGraceMs,
    snapshotIntervalMs: database.snapshotIntervalMs,
    snapshotLogFactor: database.snapshotLogFactor,
    compactionLevels: database.compactionLevelsMs,
    exactWindowMs: database.exactWindowMs,
    ...encryptionOf(parts.keys),
    logger: workerLogger(parts.logger, { database: database.path, replica: parts.replica }),
    ...(instanceId === undefined ? {} : { instanceId, leaseOwnRecord: 'reclaim' as const }),
  });
}

/** What `/metrics`, the status page and the probes show of one worker. */
export function replicaStatus(
  database: DatabaseConfig,
  parts: {
    readonly replica: string;
    readonly health: BackupHealth;
    /** Absent for a database of a directory (see `ReplicaStatus.requests`). */
    readonly requests?: ReplicaStatus['requests'];
    readonly stopped: boolean;
  },
): ReplicaStatus {
  const { health } = parts;
  return {
    database: database.path,
    replica: parts.replica,
    healthy: health.healthy,
    ...(health.reason ? { reason: health.reason } : {}),
    lagSeconds: health.lagSeconds,
    unshippedBytes: health.unshippedBytes,
    unrestorableCommits: health.unrestorableCommits,
    lastSuccessSeconds: health.lastSuccessAt === null ? 0 : Math.floor(health.lastSuccessAt / 1000),
    errors: health.errorCount,
    leaseHeld: health.leaseHeld,
    ...(health.latestRestorePoint
      ? {
          latestRestorePoint: {
            commitSeq: health.latestRestorePoint.commitSeq,
            key: health.latestRestorePoint.manifestKey,
            ...(health.latestRestorePoint.createdAt
              ? { createdAt: health.latestRestorePoint.createdAt }
              : {}),
          },
        }
      : {}),
    ...(health.oldestRestorePoint ? { oldestRestorePoint: health.oldestRestorePoint } : {}),
    ...(health.lastError !== null ? { lastError: health.lastError } : {}),
    ...(health.evaluatedAt !== null ? { evaluatedSeconds: health.evaluatedAt / 1000 } : {}),
    ...(health.restorePoints !== null ? { restorePoints: health.restorePoints } : {}),
    ...(health.refusal !== null ? { refusal: health.refusal } : {}),
    ...(health.engine !== null ? { engine: health.engine } : {}),
    ...(parts.requests ? { requests: parts.requests } : {}),
    stopped: parts.stopped,
    evaluationIntervalSeconds: database.intervalMs / 1000,
  };
}

export async function startDaemon(
  config: BackupdConfig,
  options: {
    logger: Logger;
    env: Readonly<Record<string, string | undefined>>;
    sources: SourceFactory;
    /**
     * The lease instance id of each database's workers, by database path,
     * kept across restarts beside the database under its local lock
     * (replicate/database-lock.ts). With one, a lease record naming it is
     * reclaimed at once (`leaseOwnRecord: 'reclaim'`): the lock proves no
     * other live process uses the id. Without: a new random id per worker.
     */
    instanceIds?: ReadonlyMap<string, string>;
  },
): Promise<Daemon> {
  const replicas: Replica[] = [];
  try {
    for (const database of config.databases) {
      // Read here, not when the configuration is parsed: a parsed config never holds a secret key.
      const keys = loadEncryptionKeys(database.encryption, database.path);
      for (const url of database.urls) {
        const { store: bare, prefix } = await openStore(url.location, options.env);
        const store = new InstrumentedStore(bare);
        const choice = await options.sources(database);
        const replica = describeLocation(url.location);
        const instanceId = options.instanceIds?.get(database.path);
        const worker = newWorker(database, {
          store,
          prefix,
          choice,
          keys,
          logger: options.logger,
          replica,
          instanceId,
        });
        options.logger.info({
          event: 'backupd.replica_started',
          database: database.path,
          replica,
          host: hostname(),
          instanceId: worker.instanceId,
        });
        const replicaEntry: Replica = {
          database,
          location: url.location,
          store,
          handle: worker.start(),
          source: choice.source ?? null,
          stopped: false,
        };
        void replicaEntry.handle.done.then(() => {
          replicaEntry.stopped = true;
        });
        replicas.push(replicaEntry);
      }
    }
  } catch (error) {
    await Promise.allSettled(replicas.map((replica) => replica.handle.shutdown()));
    throw error;
  }
  return {
    statuses: () =>
      replicas.map((replica) =>
        replicaStatus(replica.database, {
          replica: describeLocation(replica.location),
          health: replica.handle.health(),
          requests: replica.store.counters,
          stopped: replica.stopped,
        }),
      ),
    shutdown: async () => {
      const reports = await Promise.all(
        replicas.map(async (replica): Promise<ReplicaShutdown> => {
          const report = await replica.handle.shutdown();
          return {
            database: replica.database.path,
            replica: describeLocation(replica.location),
            report,
          };
        }),
      );
      await Promise.allSettled(replicas.map((replica) => replica.source?.close?.()));
      return reports;
    },
  };
}
