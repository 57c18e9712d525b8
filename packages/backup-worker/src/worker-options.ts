/**
 * The worker's public types: its options, what its owner holds, and what a
 * shutdown reports. No behaviour lives here.
 */

import type { AgeIdentity, AgeRecipient } from '@x/age-envelope';
import type { BackupSource, EngineFiles, SourceCallOptions } from '@x/engine';
import type { Clock } from '@x/lease';
import type { ObjectStore } from '@x/store';
import { MAX_OBJECT_RECIPIENTS } from '@x/wal-segment';
import type { BackupHealth } from './health.ts';

/**
 * Points a test can fail at. Production code passes none; `TestHooks`
 * implements the usual ones (a write budget, a panic, a LIST count).
 */
export interface WorkerHooks {
  /** Before every request that changes the bucket (PUT, DELETE, upload), and before its fallback. */
  beforeWrite?(): void;
  /** At the start of every step (`runOnce`), before anything else. */
  beforeStep?(): void;
  /** Before every LIST, with its prefix. */
  beforeList?(prefix: string): void;
}

/** Default cap on one WAL segment object. */
export const DEFAULT_MAX_SEGMENT_BYTES = 32 * 1024 * 1024;
/** Default of `walIntervalMs`: a step (and a health evaluation) every second. */
export const DEFAULT_WAL_INTERVAL_MS = 1_000;
/**
 * Default of `manifestIntervalMs`: a restore point at most every 15 s while
 * WAL keeps shipping. Shipped segments are restorable before a restore point
 * names them (a restore rolls forward over them), so the interval bounds that
 * roll-forward (about 15 segments), not the recovery point, and each restore
 * point costs about three requests (manifest, LATEST, retention's LIST).
 * Requests per hour measured at 15 s and at 10 s:
 * docs/decisions/2026-12-06-worker-roll-forward-over-frequent-restore-points.md.
 */
export const DEFAULT_MANIFEST_INTERVAL_MS = 15_000;
/**
 * The window of restore points kept when neither `retain` nor `retainFor` is
 * given: the last 24 hours (a restore to any moment of the last day).
 */
export const DEFAULT_RETAIN_FOR_MS = 24 * 3_600_000;
/**
 * Default of `exactWindowMs`: the fine segments a compaction replaced are
 * kept 5 minutes after they were shipped, so every commit of the last 5
 * minutes restores exactly, by commit and by time.
 */
export const DEFAULT_EXACT_WINDOW_MS = 300_000;
/** Default of `operationTimeoutMs`. */
export const DEFAULT_OPERATION_TIMEOUT_MS = 30_000;
/** Default of `shutdownGraceMs`. */
export const DEFAULT_SHUTDOWN_GRACE_MS = 10_000;
/** Default of `snapshotIntervalMs`: a new generation, with a fresh snapshot, daily. */
export const DEFAULT_SNAPSHOT_INTERVAL_MS = 24 * 3_600_000;
/**
 * The recommended levels: level 1 merges the fine segments of each 30 s,
 * level 2 the objects of each 5 min, level 3 those of each hour.
 */
export const RECOMMENDED_COMPACTION_LEVELS_MS: readonly number[] = [30_000, 300_000, 3_600_000];
/**
 * Default of `compactionLevels`: the recommended levels. A commit inside a
 * compacted object is restorable only at the object's end (the end of a
 * window of its level); `[]` keeps every commit restorable, at a cost that
 * grows with uptime until the next scheduled snapshot.
 */
export const DEFAULT_COMPACTION_LEVELS_MS: readonly number[] = RECOMMENDED_COMPACTION_LEVELS_MS;
/**
 * Default of `snapshotLogFactor`: a new generation once the log its restore
 * point names outgrows 2.5 × the database, so a restore of the latest state
 * reads under 4 × the database (the snapshot, that log, and what ships
 * before the switch). A lower factor reads less but starts generations more
 * often, and each keeps its snapshot and restore points for the retention
 * window: 2 gave 10.3 × the database in the bucket after 90 s of 100
 * updates/s on 2 MiB, against 4 × read at most.
 */
export const DEFAULT_SNAPSHOT_LOG_FACTOR = 2.5;

/** Structured logger: one event name, key-value fields; never given credentials. */
export interface BackupLogger {
  /** Routine events (every lease renewal); optional. */
  debug?(event: string, fields?: object): void;
  info(event: string, fields?: object): void;
  warn(event: string, fields?: object): void;
  error(event: string, fields?: object): void;
}

export const silentLogger: BackupLogger = { info() {}, warn() {}, error() {} };

/**
 * Encryption at rest (see the README's `encryption`): the snapshots and log
 * objects are sealed to `recipients`; manifests, `LATEST` and the lease stay
 * in clear.
 */
export interface EncryptionOptions {
  /** The operator's age public keys (`parseRecipient`): 1 to {@link MAX_ENCRYPTION_RECIPIENTS}. */
  readonly recipients: readonly AgeRecipient[];
  /**
   * Secret keys of some of `recipients`, when this host holds one: the worker
   * then reads its own objects with it and a restart continues the
   * generation. Without one, each worker adds a key of its own (the tenure
   * key) and a restart takes a new snapshot.
   */
  readonly identities?: readonly AgeIdentity[];
}

/**
 * Most recipients `encryption` takes (31): an object holds 32, and one is
 * kept for the tenure key.
 */
export const MAX_ENCRYPTION_RECIPIENTS: number = MAX_OBJECT_RECIPIENTS - 1;

export interface BackupWorkerOptions {
  readonly store: ObjectStore;
  /** The backup prefix: non-empty, no trailing slash. */
  readonly prefix: string;
  /**
   * The engine's files, opened by the caller (who also closes them). Give
   * exactly one of `source` and `openSource`.
   */
  readonly source?: BackupSource;
  /**
   * Opens the engine's files when the worker holds the lease and is about to
   * step; the worker closes what it opened when the lease is dropped or
   * released, and opens afresh at its next tenure. For engines whose open
   * has effects a standby must not have (see `SourceSlot`).
   */
  readonly openSource?: OpenSource;
  /** Step cadence and health-evaluation cadence. Default 1000 ms. */
  readonly walIntervalMs?: number;
  /** Minimum time between manifests while WAL keeps shipping. Default 15 000 ms. */
  readonly manifestIntervalMs?: number;
  /**
   * Restore points of this lineage to keep by count: the newest `retain`
   * manifests; 0 keeps all. With `retainFor` too, what either keeps is kept.
   * Default: none (only the window counts).
   */
  readonly retain?: number;
  /**
   * Restore points of this lineage to keep by time, in milliseconds: every
   * manifest created within `retainFor` of the clock's wall time, and the
   * newest one before that (it holds the commits at the window's start).
   * With `retain` too, what either keeps is kept. Default
   * {@link DEFAULT_RETAIN_FOR_MS} (24 h) when `retain` is not given either.
   */
  readonly retainFor?: number;
  /**
   * How long, in milliseconds, the fine segments a compaction replaced stay
   * in the bucket after they were shipped: a restore to a commit or a time
   * inside a compacted object reads them and lands exactly there. 0 deletes
   * them with the next restore point. Default {@link DEFAULT_EXACT_WINDOW_MS} (5 min).
   */
  readonly exactWindowMs?: number;
  /** Lease TTL in seconds. Default `DEFAULT_TTL_S` (30). */
  readonly leaseTtlSeconds?: number;
  /**
   * Conditional writes for the lease, manifests and `LATEST`. Default true.
   * `false` is best-effort exclusion: two writers may overwrite each other.
   */
  readonly conditional?: boolean;
  /** Deadline of every request (and of progress within an upload). Default 30 000 ms. */
  readonly operationTimeoutMs?: number;
  /** Time a shutdown has to flush and write its final manifest. Default 10 000 ms. */
  readonly shutdownGraceMs?: number;
  /**
   * Scheduled snapshots (for sources with `startGeneration`): a new
   * generation once the current one is this old (wall time, from when this
   * worker started it, or from its snapshot's recorded time for a generation
   * continued after a restart); 0 disables. Default 24 h.
   */
  readonly snapshotIntervalMs?: number;
  /**
   * Also a new generation once the log its restore point names (stored bytes) exceeds
   * this many times the database's size (as the source reports it); 0
   * disables. Default 2.5.
   */
  readonly snapshotLogFactor?: number;
  /**
   * Compaction of the commit log: the interval of each level, in ms,
   * ascending, each a whole multiple of the one before (at most 9). Level 1 merges the fine segments shipped inside
   * each window of its interval into one object, level n the objects of the
   * levels below. Point-in-time restore is exact to the commit over the
   * fine segments (the newest level-1 window); over a level's objects it
   * is what the engine's merge keeps: exact to the level's window for
   * SQLite (the newest version of each page), exact to the commit for the
   * framed store (its frames concatenated). `[]` turns compaction off.
   * Default: 30 s, 5 min, 1 h ({@link DEFAULT_COMPACTION_LEVELS_MS}, the
   * same as {@link RECOMMENDED_COMPACTION_LEVELS_MS}). Only engines with a
   * `logCompactor` compact (SQLite and the framed store both have one).
   */
  readonly compactionLevels?: readonly number[];
  /** Part size passed to `store.upload`. */
  readonly partSize?: number;
  /** Largest WAL segment object. Default {@link DEFAULT_MAX_SEGMENT_BYTES}. */
  readonly maxSegmentBytes?: number;
  /** Clock for timers, deadlines, lag and the lease. Default `systemClock`. */
  readonly clock?: Clock;
  readonly logger?: BackupLogger;
  /** The lease instance id, the same for every attempt. Default: a new random id. */
  readonly instanceId?: string;
  /**
   * `@x/lease`'s `ownRecord` for this worker's acquisitions. `'reclaim'`
   * takes a lease record naming `instanceId` over at once as a new tenure:
   * only for an id the caller proves no other live process uses (a dead
   * earlier run of this one). Default `'continue'`.
   */
  readonly leaseOwnRecord?: 'continue' | 'reclaim';
  /**
   * Encrypts every object that carries database content to age recipients:
   * snapshots and log objects, and an engine's archives, chain and side
   * files (sealed whole under `.bko` keys). Default: none (objects in clear).
   */
  readonly encryption?: EncryptionOptions;
  /**
   * Called at points a test wants to fail at (see `TestHooks`); an exception
   * one throws fails that request or step as if it happened there. Default: none.
   */
  readonly hooks?: WorkerHooks;
}

/**
 * What a stopped worker could not make restorable. A graceful stop ships
 * what is durable and writes a final restore point; when the grace period,
 * the bucket or the lease did not allow all of it, this says how much is
 * missing, so the owner can exit non-zero and say so.
 */
export interface ShutdownReport {
  /**
   * True when every commit this worker captured is in the restore point
   * LATEST names, when another instance held the lease at the stop (that
   * instance backs the same database up: see {@link leaseHeldBy}), or when
   * it never held the lease (it was nothing's writer). False also when the
   * count could not be read.
   */
  readonly complete: boolean;
  /** Commits captured but in no restore point (0 when complete). */
  readonly unrestorableCommits: number;
  /** The commit LATEST's restore point holds (`null`: none known). */
  readonly restorableCommitSeq: number | null;
  /**
   * The newest commit captured when the stop began, which it set out to make
   * restorable (`null`: not known). Commits an application makes during the
   * stop are not counted: the next run's restore point holds them.
   */
  readonly capturedCommitSeq: number | null;
  /** Wall-clock ms when the first commit not restorable was first seen (`null`: none, or not known). */
  readonly unrestorableSince: number | null;
  /** Wall-clock ms when the newest commit was first seen (`null`: none, or not known). */
  readonly unrestorableUntil: number | null;
  /** Whether this worker held the lease at any time. */
  readonly heldLease: boolean;
  /**
   * Why it is not complete (absent when it is): `unrestorable-commits`
   * (captured commits in no restore point); `flush-abandoned` (the grace
   * period ended before the final flush finished: `unrestorableCommits` is
   * then a floor, commits not captured yet are not counted); `refused` (the
   * prefix was refused for good: nothing of this run reached it after the
   * refusal, `lastError` says why); `count-unknown`; `never-held-lease` (no tenure: nothing reached the bucket in this run;
   * `capturedCommitSeq` is `null` when the source was never opened).
   */
  readonly shortfall?: ShutdownShortfall;
  /** The engine's files at the stop when a source was open (what was left, in bytes). */
  readonly engine?: EngineFiles | null;
  /** The last failure of a step or lease attempt (`null`: none), e.g. why the lease was never taken. */
  readonly lastError?: string | null;
  /**
   * Set when the stop found the lease held by another instance (its
   * instance id): what this worker captured is that instance's to make
   * restorable, and this worker uploaded nothing at the stop.
   */
  readonly leaseHeldBy?: string;
}

/** Why a {@link ShutdownReport} is not complete. */
export type ShutdownShortfall =
  | 'unrestorable-commits'
  | 'flush-abandoned'
  | 'refused'
  | 'count-unknown'
  | 'never-held-lease';

/** What the owner of a running worker holds. */
export interface BackupHandle {
  /** Current health and counters. */
  health(): BackupHealth;
  /** `snapshot`: a snapshot finished, step now. `shutdown`: flush, final manifest, release, stop. */
  trigger(kind: 'snapshot' | 'shutdown'): void;
  /**
   * Triggers a shutdown and waits until the worker has stopped (within the
   * grace period plus one operation deadline for the release); resolves with
   * what it could not make restorable.
   */
  shutdown(): Promise<ShutdownReport>;
  /** Settles when the worker has stopped; never rejects. */
  readonly done: Promise<void>;
}

/**
 * Opens the worker's source (`openSource`): called when the worker holds the
 * lease and is about to step; the worker closes what it returns once the
 * lease is gone.
 */
export type OpenSource = (options: SourceCallOptions) => Promise<BackupSource>;
