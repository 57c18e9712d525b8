/**
 * A directory of databases, each backed up under its own prefix by a
 * worker that runs only while the database changes. Asleep, a database
 * costs two `stat` calls per rescan and nothing else: no request, no lease,
 * no open descriptor, no held read transaction. A change (seen by the
 * file-system watch, or by the rescan when the watch misses it) wakes it:
 * its local lock, then a worker that takes its lease, continues its
 * generation (comparing the database with what the bucket holds) and ships
 * what is new. Once the files have been quiet for `quietMs` and everything
 * is shipped, the worker stops gracefully (a final restore point, the lease
 * released) and the database sleeps again. The rule and its proof:
 * docs/decisions/2026-12-07-sleeping-databases.md.
 */
import { type FSWatcher, watch } from 'node:fs';
import { basename } from 'node:path';
import type { BackupHandle, BackupHealth, ShutdownReport } from '@x/backup-worker';
import type { DatabaseConfig } from '../config.ts';
import { newWorker, type ReplicaShutdown, replicaStatus } from '../daemon.ts';
import type { EncryptionKeys } from '../encryption-settings.ts';
import type { InstrumentedStore } from '../instrumented-store.ts';
import { errorFields, type Logger } from '../logger.ts';
import { sqliteFileState, sqliteSourceFactory } from '../open-sqlite.ts';
import {
  DatabaseInUseError,
  type DatabaseLock,
  lockDatabase,
  unlockedDatabase,
} from '../replicate/database-lock.ts';
import type {
  DatabaseQuery,
  DirectoryDatabaseRow,
  DirectorySummary,
  ReplicaStatus,
} from '../status.ts';
import { describeLocation, type StoreLocation } from '../store-url.ts';
import { type DirectoryDatabaseName, globMatcher, scanDirectory } from './database-names.ts';
import type { DirectoryLayout } from './directory-layout.ts';
import { type FileFingerprint, fingerprintOf } from './file-fingerprint.ts';
import { requestOwner } from './request-limit.ts';

export interface DirectorySettings {
  /** Absolute. */
  readonly directory: string;
  readonly pattern: string;
  readonly recursive: boolean;
  /** How long a database's files stay unchanged before its worker stops. */
  readonly quietMs: number;
  /** How often the directory is read again and every sleeping database looked at. */
  readonly rescanMs: number;
  /** Databases starting at once (a wake until it holds the lease, a restore point, and nothing unshipped). */
  readonly maxStarting: number;
}

/** The directory's shared parts, opened by the command. */
export interface DirectoryParts {
  /** Each database's settings: a copy of this with its own path. */
  readonly template: DatabaseConfig;
  /** Where each database goes in the store. */
  readonly layout: DirectoryLayout;
  /** The directory's URL as displayed (no credentials). */
  readonly replica: string;
  /** Counts every database's requests. */
  readonly store: InstrumentedStore;
  /** A database's store: the directory's one store (one connection pool, one precondition probe) where the layout shares it. */
  readonly storeOf: (location: StoreLocation) => InstrumentedStore;
  readonly keys: EncryptionKeys;
  readonly logger: Logger;
  /** `false` (`BACKUPD_DATABASE_LOCK=off`): no local lock per database. */
  readonly localLocks: boolean;
}

type State = 'asleep' | 'waking' | 'awake' | 'stopping' | 'in-use' | 'refused';

interface Awake {
  readonly handle: BackupHandle;
  readonly lock: DatabaseLock;
  /** Its first evaluation found everything shipped: it no longer counts as starting. */
  started: boolean;
  /** The worker ended by itself (a refusal, a panic). */
  ended: boolean;
}

interface Entry {
  readonly name: DirectoryDatabaseName;
  state: State;
  /** The files as last seen; `null`: never looked at by a worker of this process (wake it). */
  seen: FileFingerprint | null;
  /** When its files last changed, as this process saw it (ms). */
  lastChangeAt: number;
  awake: Awake | null;
  /** Why it is in-use or refused, for the log and the summary. */
  problem: string | null;
  /** Removed from the directory: drop it once it sleeps. */
  removed: boolean;
  /** Opened at its first wake, kept for the next. */
  store: InstrumentedStore | null;
  /** What the worker that ended by itself could not make restorable (reported at shutdown while refused). */
  ended: ReplicaShutdown | null;
}

export interface DirectoryDaemon {
  statuses(): ReplicaStatus[];
  summary(): DirectorySummary;
  databases(query: DatabaseQuery): DirectoryDatabaseRow[];
  perDatabase(): ReplicaStatus[];
  /** Every awake database stops gracefully; a database changed since it last slept is woken and stopped first. */
  shutdown(): Promise<ReplicaShutdown[]>;
}

/** How often awake databases are looked at (two `stat` calls and the worker's health each). */
const AWAKE_CHECK_MS = 250;
/** How long after a refusal or a lock held elsewhere a database is tried again, changed or not. */
const RETRY_MS = 60_000;
/** Which file a watch event names: the database, or one of its companions. */
const COMPANION = /-(wal|shm|journal)$/;

/** It holds the lease, has a restore point, and nothing durable waits: a stop now only flushes. */
function caughtUp(health: BackupHealth): boolean {
  return health.leaseHeld && health.latestRestorePoint !== null && health.unshippedBytes === 0;
}

export async function startDirectoryDaemon(
  settings: DirectorySettings,
  parts: DirectoryParts,
): Promise<DirectoryDaemon> {
  const { logger } = parts;
  const entries = new Map<string, Entry>();
  const queue: Entry[] = [];
  const queued = new Set<Entry>();
  const refusedNames = new Set<string>();
  const pending = new Set<Promise<void>>();
  const openSource = sqliteSourceFactory({ databases: [] });
  const matches = globMatcher(settings.pattern);
  let stopping = false;
  let wakes = 0;
  let incompleteSleeps = 0;
  let firstPassDone = false;

  const replicaOf = (entry: Entry): string => describeLocation(entry.name.location);

  /** Keeps a wake or a sleep for the stop to wait on; a failure is logged, never left unhandled. */
  const track = (work: Promise<void>): void => {
    const settled = work.catch((error: unknown) => {
      logger.error({ event: 'backupd.directory_step_failed', ...errorFields(error) });
    });
    pending.add(settled);
    void settled.finally(() => pending.delete(settled));
  };

  /** Waking, awake or stopping: what `checkAwake` looks at. */
  const active = new Set<Entry>();
  /** Woken, and not caught up yet (`caughtUp`). */
  const startingNow = new Set<Entry>();
  const starting = (): number => startingNow.size;
  const settle = (entry: Entry): void => {
    active.delete(entry);
    startingNow.delete(entry);
  };

  const enqueue = (entry: Entry): void => {
    if (queued.has(entry) || entry.removed) return;
    queued.add(entry);
    queue.push(entry);
    scheduleCheck();
  };

  // The look at awake databases runs only while one is awake or waits to
  // wake: a directory whose databases all sleep has no timer but the rescan.
  let checkTimer: NodeJS.Timeout | null = null;
  const scheduleCheck = (): void => {
    if (checkTimer !== null || stopping) return;
    checkTimer = setTimeout(() => {
      checkTimer = null;
      checkAwake();
      if (active.size > 0 || queue.length > 0) scheduleCheck();
    }, AWAKE_CHECK_MS);
    checkTimer.unref();
  };

  const drain = (): void => {
    while (queue.length > 0 && starting() < settings.maxStarting) {
      const entry = queue.shift()!;
      queued.delete(entry);
      if (entry.state !== 'asleep' && entry.state !== 'in-use' && entry.state !== 'refused')
        continue;
      track(wake(entry));
    }
    if (queue.length === 0 && !firstPassDone && starting() === 0) firstPassDone = true;
  };

  const wake = async (entry: Entry): Promise<void> => {
    const { path } = entry.name;
    const before = fingerprintOf(path);
    if (before === null) {
      forget(entry);
      return;
    }
    if (before.changedAtMs === null) {
      refuse(entry, before, 'refused', `cannot look at it (${before.key})`);
      return;
    }
    // Read before any source of this database is open here: closing a
    // descriptor of it would drop that source's locks.
    if (sqliteFileState(path) !== 'wal') {
      refuse(entry, before, 'refused', 'not a SQLite database in WAL mode');
      return;
    }
    let lock: DatabaseLock;
    try {
      lock = parts.localLocks ? lockDatabase(path, [replicaOf(entry)]) : unlockedDatabase(path);
    } catch (error) {
      if (error instanceof DatabaseInUseError) refuse(entry, before, 'in-use', error.message);
      else refuse(entry, before, 'refused', `its local lock: ${String(errorFields(error).error)}`);
      return;
    }
    entry.state = 'waking';
    active.add(entry);
    startingNow.add(entry);
    const database: DatabaseConfig = { ...parts.template, path };
    try {
      const choice = await openSource(database);
      entry.store ??= parts.storeOf(entry.name.location);
      const worker = newWorker(database, {
        store: entry.store,
        prefix: entry.name.location.prefix,
        choice,
        keys: parts.keys,
        logger,
        replica: replicaOf(entry),
        instanceId: parts.localLocks ? lock.instanceId : undefined,
      });
      const handle = requestOwner.run(entry, () => worker.start());
      const awake: Awake = { handle, lock, started: false, ended: false };
      void awake.handle.done.then(() => {
        awake.ended = true;
      });
      wakes += 1;
      entry.awake = awake;
      entry.seen = before;
      entry.lastChangeAt = Math.min(Date.now(), before.changedAtMs ?? Date.now());
      entry.problem = null;
      entry.ended = null;
      entry.state = 'awake';
      logger.debug({ event: 'backupd.database_woken', database: path });
    } catch (error) {
      lock.release();
      settle(entry);
      refuse(entry, before, 'refused', String(errorFields(error).error));
    }
  };

  const refuse = (
    entry: Entry,
    seen: FileFingerprint,
    state: 'in-use' | 'refused',
    problem: string,
  ): void => {
    if (entry.problem !== problem) {
      const fields = {
        database: entry.name.path,
        error: problem,
        note: 'the other databases go on; this one is tried again when it changes, and every minute',
      };
      if (state === 'in-use') logger.warn({ event: 'backupd.database_held_elsewhere', ...fields });
      else logger.warn({ event: 'backupd.database_refused', ...fields });
    }
    entry.state = state;
    entry.seen = seen;
    entry.problem = problem;
    entry.lastChangeAt = Date.now();
  };

  const forget = (entry: Entry): void => {
    entry.removed = true;
    entries.delete(entry.name.relative);
    logger.info({
      event: 'backupd.database_removed',
      database: entry.name.path,
      note: `its backup stays restorable at ${replicaOf(entry)}`,
    });
  };

  /** Stops the worker gracefully; anything written meanwhile makes the next look wake it again. */
  const sleep = async (entry: Entry): Promise<ReplicaShutdown | null> => {
    const awake = entry.awake;
    if (awake === null) return null;
    entry.state = 'stopping';
    const before = fingerprintOf(entry.name.path);
    const report = await awake.handle.shutdown();
    awake.lock.release();
    entry.awake = null;
    settle(entry);
    entry.seen = report.complete ? before : null;
    entry.state = 'asleep';
    if (!report.complete) {
      incompleteSleeps += 1;
      logger.warn({
        event: 'backupd.database_sleep_incomplete',
        database: entry.name.path,
        unrestorableCommits: report.unrestorableCommits,
        ...(report.lastError ? { error: report.lastError } : {}),
        note: 'it is woken again at the next look',
      });
    } else logger.debug({ event: 'backupd.database_asleep', database: entry.name.path });
    if (entry.removed || before === null) forget(entry);
    return {
      database: entry.name.path,
      replica: replicaOf(entry),
      report,
    };
  };

  /** Awake databases: changes noted, quiet ones put to sleep, ended or refused workers released. */
  const checkAwake = (): void => {
    const now = Date.now();
    for (const entry of active) {
      const awake = entry.awake;
      if (entry.state !== 'awake' || awake === null) continue;
      // A refusal no retry of this worker clears (another database's backup
      // in its place, say) ends it as if it had stopped by itself.
      if (awake.ended || awake.handle.health().refusal !== null) {
        const health = awake.handle.health();
        entry.awake = null;
        settle(entry);
        track(
          awake.handle
            .shutdown()
            .then((report) => {
              entry.ended = { database: entry.name.path, replica: replicaOf(entry), report };
            })
            .finally(() => awake.lock.release()),
        );
        refuse(
          entry,
          fingerprintOf(entry.name.path) ?? { key: '', changedAtMs: null },
          'refused',
          health.refusal?.reason ?? health.reason ?? 'the worker stopped',
        );
        continue;
      }
      const seen = fingerprintOf(entry.name.path);
      if (seen === null) entry.removed = true;
      else if (seen.key !== entry.seen?.key) {
        entry.seen = seen;
        entry.lastChangeAt = now;
      }
      const health = awake.handle.health();
      if (caughtUp(health)) {
        awake.started = true;
        startingNow.delete(entry);
      }
      const quiet = now - entry.lastChangeAt >= settings.quietMs;
      if (entry.removed || (quiet && awake.started && caughtUp(health)))
        track(sleep(entry).then(() => {}));
    }
    drain();
  };

  /** Reads the directory: new databases queued, removed ones stopped, changed sleeping ones queued. */
  const rescan = (): void => {
    let scan: ReturnType<typeof scanDirectory>;
    try {
      scan = scanDirectory(settings.directory, {
        pattern: settings.pattern,
        recursive: settings.recursive,
        locationOf: parts.layout.locationOf,
      });
    } catch (error) {
      logger.error({
        event: 'backupd.directory_unreadable',
        directory: settings.directory,
        ...errorFields(error),
      });
      return;
    }
    for (const refused of scan.refused)
      if (!refusedNames.has(refused.relative)) {
        refusedNames.add(refused.relative);
        logger.error({
          event: 'backupd.database_name_refused',
          database: refused.relative,
          error: refused.message,
        });
      }
    const present = new Set<string>();
    for (const name of scan.databases) {
      present.add(name.relative);
      if (entries.has(name.relative)) continue;
      const entry: Entry = {
        name,
        state: 'asleep',
        seen: null,
        lastChangeAt: Date.now(),
        awake: null,
        problem: null,
        removed: false,
        ended: null,
        store: null,
      };
      entries.set(name.relative, entry);
      logger.info({
        event: 'backupd.database_found',
        database: name.path,
        replica: describeLocation(name.location),
      });
      enqueue(entry);
    }
    const now = Date.now();
    for (const entry of [...entries.values()]) {
      if (!present.has(entry.name.relative)) {
        if (entry.awake !== null) entry.removed = true;
        else if (entry.state !== 'waking' && entry.state !== 'stopping') forget(entry);
        continue;
      }
      if (entry.state === 'asleep' && fingerprintOf(entry.name.path)?.key !== entry.seen?.key)
        enqueue(entry);
      else if (
        (entry.state === 'in-use' || entry.state === 'refused') &&
        (now - entry.lastChangeAt >= RETRY_MS ||
          fingerprintOf(entry.name.path)?.key !== entry.seen?.key)
      )
        enqueue(entry);
    }
    drain();
  };

  /** A watch event: the database it names, if asleep and changed, is queued at once. */
  const onWatchEvent = (filename: string | null): void => {
    if (filename === null || stopping) return;
    const relative = filename.split(/[\\/]/).join('/').replace(COMPANION, '');
    const entry = entries.get(relative);
    if (entry === undefined) {
      if (matches(basename(relative)) && !relative.split('/').some((part) => part.startsWith('.')))
        rescanSoon();
      return;
    }
    if (entry.state === 'asleep' && fingerprintOf(entry.name.path)?.key !== entry.seen?.key) {
      enqueue(entry);
      drain();
    }
  };

  let rescanTimer: NodeJS.Timeout | null = null;
  const rescanSoon = (): void => {
    if (rescanTimer !== null) return;
    rescanTimer = setTimeout(() => {
      rescanTimer = null;
      rescan();
    }, 100);
    rescanTimer.unref();
  };

  let watcher: FSWatcher | null = null;
  try {
    watcher = watch(
      settings.directory,
      { recursive: settings.recursive, persistent: false },
      (_event, filename) => onWatchEvent(typeof filename === 'string' ? filename : null),
    );
    watcher.on('error', (error) => {
      logger.warn({
        event: 'backupd.directory_watch_failed',
        directory: settings.directory,
        ...errorFields(error),
        note: `changes are seen by the rescan every ${settings.rescanMs} ms`,
      });
      watcher?.close();
      watcher = null;
    });
  } catch (error) {
    logger.warn({
      event: 'backupd.directory_watch_failed',
      directory: settings.directory,
      ...errorFields(error),
      note: `changes are seen by the rescan every ${settings.rescanMs} ms`,
    });
  }

  rescan();
  const rescanInterval = setInterval(rescan, settings.rescanMs);
  rescanInterval.unref();

  const summary = (): DirectorySummary => {
    const count = (...states: State[]) =>
      [...entries.values()].filter((entry) => states.includes(entry.state)).length;
    return {
      databases: entries.size,
      awake: count('awake', 'waking', 'stopping'),
      asleep: count('asleep'),
      starting: starting(),
      inUse: count('in-use'),
      refused: count('refused'),
      wakes,
      incompleteSleeps,
    };
  };

  const row = (entry: Entry): DirectoryDatabaseRow => {
    const health = entry.awake?.handle.health();
    return {
      database: entry.name.relative,
      directory: settings.directory,
      url: replicaOf(entry),
      state: entry.state,
      lagSeconds: health?.lagSeconds ?? null,
      unshippedBytes: health?.unshippedBytes ?? null,
      latestCommitSeq: health?.latestRestorePoint?.commitSeq ?? null,
      problem: entry.problem,
      changedAt: new Date(entry.lastChangeAt).toISOString(),
    };
  };

  return {
    summary,
    statuses: () => [directoryStatus(settings, parts, summary(), entries, firstPassDone)],
    databases: (query) => {
      const search = query.search.toLowerCase();
      const rows = [...entries.values()]
        .filter((entry) => entry.name.relative.toLowerCase().includes(search))
        .map(row);
      rows.sort(
        (a, b) =>
          (b.lagSeconds ?? -1) - (a.lagSeconds ?? -1) ||
          (a.database < b.database ? -1 : a.database > b.database ? 1 : 0),
      );
      return rows.slice(0, query.limit);
    },
    perDatabase: () =>
      [...active].flatMap((entry) =>
        entry.awake === null
          ? []
          : [
              replicaStatus(
                { ...parts.template, path: entry.name.path },
                {
                  replica: replicaOf(entry),
                  health: entry.awake.handle.health(),
                  stopped: entry.awake.ended,
                },
              ),
            ],
      ),
    shutdown: async () => {
      stopping = true;
      if (checkTimer !== null) clearTimeout(checkTimer);
      clearInterval(rescanInterval);
      if (rescanTimer !== null) clearTimeout(rescanTimer);
      watcher?.close();
      await Promise.allSettled([...pending]);
      const reports: ReplicaShutdown[] = [];
      const stopAwake = async (): Promise<void> => {
        const awake = [...entries.values()].filter((entry) => entry.awake !== null);
        for (const report of await Promise.all(awake.map((entry) => sleep(entry))))
          if (report !== null) reports.push(report);
      };
      await stopAwake();
      // A sleeping database changed since it slept is woken, ships, and stops.
      const changed = [...entries.values()].filter(
        (entry) =>
          entry.state !== 'in-use' &&
          entry.state !== 'refused' &&
          fingerprintOf(entry.name.path)?.key !== entry.seen?.key,
      );
      for (let i = 0; i < changed.length; i += settings.maxStarting) {
        await Promise.all(changed.slice(i, i + settings.maxStarting).map((entry) => wake(entry)));
        await waitUntilCaughtUp(entries, parts.template.shutdownGraceMs);
        await stopAwake();
      }
      // A worker that ended by itself left its database unbacked: not a clean stop.
      // A refused database was not backed up by this run: not a clean stop either.
      for (const entry of entries.values())
        if (entry.state === 'refused')
          reports.push(
            entry.ended ?? {
              database: entry.name.path,
              replica: replicaOf(entry),
              report: refusedBeforeStart(entry.problem),
            },
          );
      return reports;
    },
  };
}

/** The report of a database refused before any worker ran for it (`problem`: why). */
function refusedBeforeStart(problem: string | null): ShutdownReport {
  return {
    complete: false,
    shortfall: 'refused',
    heldLease: false,
    unrestorableCommits: 0,
    restorableCommitSeq: null,
    capturedCommitSeq: null,
    unrestorableSince: null,
    unrestorableUntil: null,
    lastError: problem,
  };
}

/** Until every awake worker has caught up once (or the grace period ends). */
async function waitUntilCaughtUp(entries: Map<string, Entry>, graceMs: number): Promise<void> {
  const deadline = Date.now() + graceMs;
  while (Date.now() < deadline) {
    const behind = [...entries.values()].some(
      (entry) =>
        entry.awake !== null && !entry.awake.ended && !caughtUp(entry.awake.handle.health()),
    );
    if (!behind) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** The directory as one row of `/metrics` and the status page. */
function directoryStatus(
  settings: DirectorySettings,
  parts: DirectoryParts,
  summary: DirectorySummary,
  entries: Map<string, Entry>,
  firstPassDone: boolean,
): ReplicaStatus {
  let lagSeconds = 0;
  let unshippedBytes = 0;
  let unrestorableCommits = 0;
  let errors = 0;
  let unhealthy: string | null = null;
  for (const entry of entries.values()) {
    const awake = entry.awake;
    if (awake === null) continue;
    const health = awake.handle.health();
    lagSeconds = Math.max(lagSeconds, health.lagSeconds);
    unshippedBytes += health.unshippedBytes;
    unrestorableCommits += health.unrestorableCommits;
    errors += health.errorCount;
    if (!health.healthy && unhealthy === null)
      unhealthy = `${entry.name.relative}: ${health.reason ?? 'unhealthy'}`;
  }
  const reason =
    unhealthy ??
    (summary.refused > 0 ? `${summary.refused} databases refused (see the log)` : null);
  return {
    database: settings.directory,
    replica: parts.replica,
    healthy: reason === null,
    ...(reason === null ? {} : { reason }),
    lagSeconds,
    unshippedBytes,
    unrestorableCommits,
    lastSuccessSeconds: Math.floor(Date.now() / 1000),
    errors,
    // Ready once every database was looked at by a worker once.
    leaseHeld: firstPassDone,
    requests: parts.store.counters,
    stopped: false,
    evaluationIntervalSeconds: parts.template.intervalMs / 1000,
    directory: summary,
  };
}
