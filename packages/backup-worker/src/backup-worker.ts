/**
 * The backup worker: ships WAL segments, snapshots, archives and side files,
 * and writes the manifests that name consistent restore points.
 *
 * It learns everything about the engine through a {@link BackupSource} and
 * writes nothing into the store's directory except the lineage id, once.
 *
 * Consistency
 * - Nothing is read while a snapshot intent is pending: the step is deferred,
 *   not failed.
 * - Every read is bracketed by two observations of the files and kept only if
 *   neither the snapshot, the WAL file nor the intent changed and the WAL did
 *   not shrink.
 * - A restore point is built only when the engine's position names the
 *   snapshot and WAL file on disk; a new generation starts whenever the
 *   engine generation, snapshot or WAL file changes.
 * - A manifest's `commitSeq` is computed from the objects it lists (floor plus
 *   the frames of every archive and segment), so it is what a restore reports.
 *
 * Objects and ordering
 * - Immutable objects (segments, side files) are written create-if-absent; one
 *   already there is accepted only with the same CRC (a retried upload that
 *   had landed). Snapshots and archives are streamed in bounded memory and
 *   checked absent first (and created conditionally where the store can).
 * - Manifests and `LATEST` are written replace-if-version against the version
 *   this worker last wrote or read (create-if-absent when there was none).
 * - A manifest only after every object it names; `LATEST` only after its
 *   manifest; retention deletes only what no kept manifest names. So after a
 *   crash between any two requests, every manifest verifies and `LATEST`
 *   names one of them.
 * - A refused conditional write means another writer: the worker drops its
 *   lease and starts over through it, reading the bucket afresh.
 *
 * The lease, health, shutdown, lineage and retention rules are described at
 * the methods that implement them and in the package README.
 */
import {
  BucketLease,
  type Clock,
  DEFAULT_TTL_S,
  ForeignActiveError,
  LeaseLostError,
  LeaseWatch,
  newInstanceId,
  PreconditionsIgnoredError,
  releaseOwnRecord,
  systemClock,
} from '@x/lease';
import {
  archiveKey,
  Crc32,
  computeCommitSeq,
  crc32Hex,
  type FileEntry,
  formatCrc32,
  latestKey,
  MANIFEST_FORMAT_VERSION,
  MAX_LATEST_BYTES,
  MAX_MANIFEST_BYTES,
  type Manifest,
  manifestKey,
  parseArchiveName,
  parseLatest,
  parseManifest,
  parseManifestKey,
  parseSegmentGenerationPrefix,
  parseSegmentKey,
  parseVersionedGeneration,
  type SegmentEntry,
  segmentGenerationPrefix,
  segmentKey,
  serializeLatest,
  serializeManifest,
  sideKey,
  snapshotKey,
  verifyLineage,
} from '@x/manifest';
import {
  AlreadyExistsError,
  ConflictError,
  getCapped,
  isTooLarge,
  NotFoundError,
  NotImplementedError,
  type ObjectStore,
  type ObjectVersion,
  PreconditionFailedError,
  sameVersion,
} from '@x/store';
import {
  BackupError,
  BucketStateError,
  LineageRefusedError,
  OperationTimeoutError,
  ShutdownAbandonedError,
  SimulatedCrashError,
  WorkerPanicError,
  WriteFencedError,
  WriterConflictError,
} from './errors.ts';
import {
  type BackupHealth,
  FIRST_BACKOFF_MS,
  HealthTracker,
  MAX_BACKOFF_MS,
  sameWalKey,
  type WalKey,
} from './health.ts';
import {
  type BackupSource,
  type DurablePosition,
  type FileObservation,
  type OpenedFile,
  type ShippedProgress,
  unchangedBetween,
  type WalRange,
} from './source.ts';

/** Retry delay after a failed lease renewal (capped at the renewal interval). */
export const RENEW_RETRY_MS = 1_000;
/** Default cap on one WAL segment object. */
export const DEFAULT_MAX_SEGMENT_BYTES = 32 * 1024 * 1024;

/** Structured logger: one event name, key-value fields; never given credentials. */
export interface BackupLogger {
  /** Routine events (every lease renewal); optional. */
  debug?(event: string, fields?: object): void;
  info(event: string, fields?: object): void;
  warn(event: string, fields?: object): void;
  error(event: string, fields?: object): void;
}

const silentLogger: BackupLogger = { info() {}, warn() {}, error() {} };

export interface BackupWorkerOptions {
  readonly store: ObjectStore;
  /** The backup prefix: non-empty, no trailing slash. */
  readonly prefix: string;
  readonly source: BackupSource;
  /** Step cadence and health-evaluation cadence. Default 1000 ms. */
  readonly walIntervalMs?: number;
  /** Minimum time between manifests while WAL keeps shipping. Default 10 000 ms. */
  readonly manifestIntervalMs?: number;
  /** Manifests of this lineage to keep; 0 keeps all. Default 24. */
  readonly retain?: number;
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
  /** Part size passed to `store.upload`. */
  readonly partSize?: number;
  /** Largest WAL segment object. Default {@link DEFAULT_MAX_SEGMENT_BYTES}. */
  readonly maxSegmentBytes?: number;
  /** Clock for timers, deadlines, lag and the lease. Default `systemClock`. */
  readonly clock?: Clock;
  readonly logger?: BackupLogger;
  /** The lease instance id, the same for every attempt. Default: a new random id. */
  readonly instanceId?: string;
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
   * LATEST names, or when it never held the lease (it was nothing's
   * writer). False also when the count could not be read.
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
}

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

interface Generation {
  /** Its number in the bucket (`walGeneration`). */
  readonly number: number;
  readonly key: WalKey;
  /** Bytes of the WAL file shipped so far. */
  cursor: number;
  /** `cursor` as of the last manifest `LATEST` names. */
  inRestorePoint: number;
  readonly floor: number;
  /** The chain files, as they were when the generation started. */
  readonly chain: FileEntry[];
  readonly segments: SegmentEntry[];
}

interface KnownArchive {
  readonly length: number;
  readonly entry: FileEntry;
  /** The local file is known to hold these bytes (uploaded by this tenure, or CRC-checked). */
  verified: boolean;
}

function keyOf(position: DurablePosition): WalKey {
  return {
    engineGeneration: position.engineGeneration,
    snapshot: position.snapshot,
    wal: position.wal,
  };
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

export class BackupWorker {
  readonly #store: ObjectStore;
  readonly #prefix: string;
  readonly #source: BackupSource;
  readonly #clock: Clock;
  readonly #logger: BackupLogger;
  readonly #walIntervalMs: number;
  readonly #manifestIntervalMs: number;
  readonly #retain: number;
  readonly #ttlSeconds: number;
  readonly #conditional: boolean;
  readonly #operationTimeoutMs: number;
  readonly #shutdownGraceMs: number;
  readonly #partSize: number | undefined;
  readonly #maxSegmentBytes: number;
  readonly #instanceId: string;
  readonly #health: HealthTracker;

  #backoffMs = FIRST_BACKOFF_MS;
  #resumed = false;
  #nextGeneration = 0;
  /** Generation numbers with objects in the bucket that retention has not retired. */
  #generations = new Set<number>();
  #current: Generation | null = null;
  #snapshot: FileEntry | null = null;
  #archives = new Map<number, KnownArchive>();
  #baseArchives: number[] = [];
  #side = new Map<string, { identity: string; entry: FileEntry }>();
  #manifestDirty = false;
  #lastManifestAt: number | null = null;
  #writeBudget: number | null = null;
  #panicNext = false;
  #lists = 0;
  #lineage: string | null = null;
  #parentLineage: string | null = null;
  #parentKeys = new Set<string>();
  #refused: LineageRefusedError | null = null;
  #latestVersion: ObjectVersion | null = null;
  #latestTarget: string | null = null;
  #manifestVersions = new Map<string, ObjectVersion>();
  #allocated = new Set<number>();
  /** Manifests read or written, by key, with the version they were read at (see retention). */
  #manifestCache = new Map<string, { version: ObjectVersion; manifest: Manifest | null }>();
  /** Side-file keys this tenure wrote (or found with the same content), not deleted since. */
  #sideKeysWritten = new Set<string>();
  /** Generations whose segment prefix retention has already listed and cleared. */
  #retiredSegments = new Set<number>();

  // The lease (spawned workers only).
  #lease: BucketLease | null = null;
  /** Aborted when this worker drops its lease after a refused write. */
  #leaseDrop: AbortController | null = null;
  #leaseDropped = false;
  #renewTimer: (() => void) | null = null;
  #renewing: Promise<void> | null = null;
  #tenures = 0;
  #foreign: string | null = null;
  #watch = new LeaseWatch();
  /** Aborted when a shutdown abandons what is in flight. */
  #runAbort = new AbortController();
  #graceOver = false;
  #started = false;
  /**
   * Commit counts newer than LATEST's restore point, with the wall time each
   * was first seen, oldest first (for the shutdown report); pruned as
   * restore points cover them.
   */
  #unrestorableSeen: { commitCount: number; at: number }[] = [];
  #shutdownReport: ShutdownReport | null = null;
  /**
   * The commit count a shutdown's flush set out to make restorable (what was
   * captured when it began): commits an application makes after that are not
   * this stop's to ship (the next run's restore point holds them).
   */
  #stopGoalCommits: number | null = null;

  constructor(options: BackupWorkerOptions) {
    if (!options.prefix || options.prefix.endsWith('/'))
      throw new BackupError(
        `invalid backup prefix ${JSON.stringify(options.prefix)}: non-empty, no trailing slash`,
      );
    this.#store = options.store;
    this.#prefix = options.prefix;
    this.#source = options.source;
    this.#clock = options.clock ?? systemClock;
    this.#logger = options.logger ?? silentLogger;
    this.#walIntervalMs = options.walIntervalMs ?? 1_000;
    this.#manifestIntervalMs = options.manifestIntervalMs ?? 10_000;
    this.#retain = options.retain ?? 24;
    this.#ttlSeconds = options.leaseTtlSeconds ?? DEFAULT_TTL_S;
    this.#conditional = options.conditional ?? true;
    this.#operationTimeoutMs = options.operationTimeoutMs ?? 30_000;
    this.#shutdownGraceMs = options.shutdownGraceMs ?? 10_000;
    this.#partSize = options.partSize;
    this.#maxSegmentBytes = options.maxSegmentBytes ?? DEFAULT_MAX_SEGMENT_BYTES;
    this.#instanceId = options.instanceId ?? newInstanceId();
    this.#health = new HealthTracker(this.#walIntervalMs, this.#manifestIntervalMs);
  }

  /** The instance id this worker takes the lease under, the same for every attempt. */
  get instanceId(): string {
    return this.#instanceId;
  }

  /** Current health and counters. */
  health(): BackupHealth {
    return this.#health.snapshot();
  }

  /** Test hook: allow `n` more requests that change the bucket, then fail each as if the process were killed just before it. */
  failAfterWrites(n: number): void {
    this.#writeBudget = n;
  }

  /** Test hook: the next step throws {@link WorkerPanicError}, which ends a started worker. */
  panicOnNextStep(): void {
    this.#panicNext = true;
  }

  /** Test hook: LIST requests made so far. */
  listRequests(): number {
    return this.#lists;
  }

  // ── The running worker ────────────────────────────────────────────────────

  /**
   * Run the worker: take the lease, step at once, then every WAL interval and
   * on each `snapshot` trigger, beside a supervisor that evaluates health
   * every WAL interval whatever the worker is doing. Call once.
   */
  start(): BackupHandle {
    if (this.#started) throw new BackupError('a BackupWorker can be started once');
    this.#started = true;
    let wake: (() => void) | null = null;
    // A trigger that arrives while a step runs makes the next wait end at once.
    let triggered = false;
    let shutdownRequested = false;
    let shutdownResolve: () => void = () => {};
    const shutdownSignal = new Promise<void>((resolve) => {
      shutdownResolve = resolve;
    });
    const trigger = (kind: 'snapshot' | 'shutdown'): void => {
      if (kind === 'shutdown' && !shutdownRequested) {
        shutdownRequested = true;
        shutdownResolve();
      }
      if (wake) wake();
      else triggered = true;
    };
    const sleep = (ms: number): Promise<void> =>
      new Promise<void>((resolve) => {
        if (triggered) {
          triggered = false;
          resolve();
          return;
        }
        const cancel = this.#clock.setTimer(ms, () => {
          wake = null;
          resolve();
        });
        wake = () => {
          cancel();
          wake = null;
          resolve();
        };
      });

    // The supervisor: health every interval, whatever the worker does.
    let supervising = true;
    let cancelSupervisor: () => void = () => {};
    const supervise = (): void => {
      cancelSupervisor = this.#clock.setTimer(this.#walIntervalMs, () => {
        if (!supervising) return;
        void this.#evaluate().finally(() => {
          if (supervising) supervise();
        });
      });
    };
    supervise();

    const done = this.#run(() => shutdownRequested, shutdownSignal, sleep).then(
      () => 'stopped',
      (error: unknown) => {
        const why = WorkerPanicError.isInstance(error)
          ? `backup worker panicked: ${error.message}`
          : `backup worker ended: ${messageOf(error)}`;
        this.#logger.error('backup.panicked', { reason: why });
        return why;
      },
    );
    const finished = done.then((why) => {
      supervising = false;
      cancelSupervisor();
      this.#health.stop(why);
    });
    return {
      health: () => this.#health.snapshot(),
      trigger,
      shutdown: async () => {
        trigger('shutdown');
        await finished;
        return this.#shutdownReport ?? this.#unknownReport();
      },
      done: finished,
    };
  }

  async #run(
    shutdownRequested: () => boolean,
    shutdownSignal: Promise<void>,
    sleep: (ms: number) => Promise<void>,
  ): Promise<void> {
    let delay = 0;
    let inFlight: Promise<unknown> | null = null;
    // Races `work` against a shutdown; `undefined` when the shutdown came first.
    const untilShutdown = async <T>(work: Promise<T>): Promise<{ value: T } | undefined> => {
      inFlight = work.catch(() => {});
      const outcome = await Promise.race([
        work.then((value) => ({ value })),
        shutdownSignal.then(() => undefined),
      ]);
      if (outcome !== undefined) inFlight = null;
      return outcome;
    };
    try {
      for (;;) {
        if (delay > 0) await sleep(delay);
        if (shutdownRequested()) break;
        if (!this.#holdsLease()) {
          const waited = await untilShutdown(this.#takeLease());
          if (waited === undefined) break;
          if (waited.value !== null) {
            delay = waited.value;
            continue;
          }
        }
        const stepped = await untilShutdown(this.step());
        if (stepped === undefined) break;
        delay = stepped.value;
        if (this.#refused) break;
      }
    } catch (error) {
      await this.#releaseLease();
      throw error;
    }
    if (this.#refused) {
      // The prefix is not ours: give the lease back so its owner is not kept
      // out, and idle, unhealthy, until shutdown.
      await this.#releaseLease();
      await shutdownSignal;
      return;
    }
    // Shutdown. A step blocked on an unresponsive bucket must not hold up
    // the shutdown: its requests are abandoned at once (their signal
    // aborted). The flush then gets the grace window, at whose end whatever
    // is still in flight is abandoned too.
    const graceEnds = new Promise<void>((resolve) => {
      this.#clock.setTimer(this.#shutdownGraceMs, () => {
        this.#graceOver = true;
        this.#runAbort.abort(
          new ShutdownAbandonedError('abandoned: the shutdown grace period ended'),
        );
        resolve();
      });
    });
    const pending = inFlight as Promise<unknown> | null;
    if (pending) {
      this.#runAbort.abort(new ShutdownAbandonedError('abandoned: the worker is shutting down'));
      // Its state changes must be over before the flush starts from them.
      await Promise.race([pending, graceEnds]);
      if (!this.#graceOver) this.#runAbort = new AbortController();
    }
    if (this.#holdsLease() && !this.#graceOver) {
      const flushed = await Promise.race([
        this.flush().then(() => true),
        graceEnds.then(() => false),
      ]);
      if (!flushed) {
        this.#health.errorCount += 1;
        this.#logger.warn('backup.flush_abandoned', { graceMs: this.#shutdownGraceMs });
      }
    }
    if (!this.#runAbort.signal.aborted)
      this.#runAbort.abort(new ShutdownAbandonedError('abandoned: the worker stopped'));
    this.#shutdownReport = await this.#reportShutdown();
    await this.#releaseLease();
  }

  /** The report when the count cannot be read: complete only if the lease was never held. */
  #unknownReport(): ShutdownReport {
    const heldLease = this.#tenures > 0;
    return {
      complete: !heldLease,
      unrestorableCommits: 0,
      restorableCommitSeq: this.#health.latestRestorePoint?.commitSeq ?? null,
      capturedCommitSeq: null,
      unrestorableSince: null,
      unrestorableUntil: null,
      heldLease,
    };
  }

  /** Compares what was captured with LATEST's restore point, and logs what is missing. */
  async #reportShutdown(): Promise<ShutdownReport> {
    const heldLease = this.#tenures > 0;
    if (!heldLease) return this.#unknownReport();
    let captured: number | null = this.#stopGoalCommits;
    if (captured === null) {
      try {
        captured = (await this.#source.durablePosition()).commitCount;
      } catch (error) {
        this.#logger.warn('backup.position_failed', { error: messageOf(error) });
      }
    }
    this.#noteUnrestorable(captured);
    const restorable = this.#health.latestRestorePoint?.commitSeq ?? null;
    if (captured === null) {
      this.#logger.error('backup.shutdown_unverified', {
        reason: 'the commit count could not be read: what this stop left unrestorable is not known',
        restorableCommitSeq: restorable,
      });
      return this.#unknownReport();
    }
    const missing = Math.max(0, captured - (restorable ?? 0));
    const since = this.#unrestorableSeen[0]?.at ?? null;
    const until = this.#unrestorableSeen.at(-1)?.at ?? null;
    const report: ShutdownReport = {
      complete: restorable !== null && missing === 0,
      unrestorableCommits: restorable === null ? captured : missing,
      restorableCommitSeq: restorable,
      capturedCommitSeq: captured,
      unrestorableSince: missing > 0 ? since : null,
      unrestorableUntil: missing > 0 ? until : null,
      heldLease,
    };
    if (!report.complete) {
      const iso = (ms: number | null) => (ms === null ? 'unknown' : new Date(ms).toISOString());
      this.#logger.error('backup.shutdown_incomplete', {
        unrestorableCommits: report.unrestorableCommits,
        restorableCommitSeq: restorable,
        capturedCommitSeq: captured,
        unrestorableSince: iso(report.unrestorableSince),
        unrestorableUntil: iso(report.unrestorableUntil),
        reason: `${report.unrestorableCommits} commits (${restorable === null ? 'every commit' : `after commit ${restorable}`}, up to commit ${captured}, first seen ${iso(report.unrestorableSince)} to ${iso(report.unrestorableUntil)}) are in no restore point: they are not restorable from this backup`,
      });
    }
    return report;
  }

  /** Records when commit counts past LATEST's restore point were first seen; forgets covered ones. */
  #noteUnrestorable(captured: number | null | undefined): void {
    const restorable = this.#health.latestRestorePoint?.commitSeq ?? -1;
    const seen = this.#unrestorableSeen;
    let covered = 0;
    while (covered < seen.length && seen[covered]!.commitCount <= restorable) covered += 1;
    if (covered > 0) seen.splice(0, covered);
    if (captured === null || captured === undefined || captured <= restorable) return;
    if (captured > (seen.at(-1)?.commitCount ?? -1))
      seen.push({ commitCount: captured, at: this.#clock.wallNow() });
  }

  async #evaluate(): Promise<void> {
    let position: DurablePosition | null = null;
    try {
      position = await this.#source.durablePosition();
    } catch (error) {
      // Health still runs: without a position, lag cannot grow, but every
      // other reason (failures, lease, lineage) is evaluated.
      this.#logger.warn('backup.position_failed', { error: messageOf(error) });
    }
    this.#health.observe(position, this.#clock.monotonicNow(), this.#clock.wallNow());
    this.#noteUnrestorable(position?.commitCount);
  }

  // ── The bucket lease ────────────────────────────────────────────────────

  #holdsLease(): boolean {
    return this.#lease !== null && !this.#lease.isLost() && !this.#leaseDropped;
  }

  /** Try to take the lease: `null` once held, otherwise how long to wait before trying again. */
  async #takeLease(): Promise<number | null> {
    if (this.#lease !== null) this.#forgetLease();
    const deadline = this.#deadline('taking the bucket lease', this.#operationTimeoutMs * 4);
    let wait: number | null;
    try {
      const lease = await BucketLease.acquireAs(this.#store, {
        prefix: this.#prefix,
        instanceId: this.#instanceId,
        ttlSeconds: this.#ttlSeconds,
        conditional: this.#conditional,
        clock: this.#clock,
        logger: this.#logger,
        watch: this.#watch,
        signal: AbortSignal.any([deadline.signal, this.#runAbort.signal]),
      });
      this.#hold(lease);
      wait = null;
    } catch (error) {
      this.#health.leaseHeld = false;
      if (ForeignActiveError.isInstance(error)) {
        const holder = error.holder;
        const name = `${holder.instanceId} on ${holder.host} pid ${holder.pid}`;
        if (this.#foreign !== holder.instanceId) {
          this.#logger.warn('backup.lease_held_elsewhere', {
            holder: holder.instanceId,
            host: holder.host,
          });
          this.#foreign = holder.instanceId;
        }
        this.#health.lease = `the backup bucket's lease is held by another instance (${name}); this instance uploads nothing while it is`;
        // Every third of a TTL, and at the moment the holder's lease may
        // expire: a successor of a holder that died takes over within a TTL
        // of its death.
        const untilExpiry = error.mayExpireAt - this.#clock.wallNow() + 10;
        wait = Math.max(50, Math.min(this.#leasePollMs(), untilExpiry));
      } else if (PreconditionsIgnoredError.isInstance(error)) {
        this.#logger.error('backup.not_started', { error: error.message });
        this.#health.lease = error.message;
        wait = MAX_BACKOFF_MS;
      } else {
        wait = this.#failed(
          new BackupError(`taking the bucket lease: ${messageOf(deadline.reason() ?? error)}`, {
            cause: error,
          }),
        );
      }
    } finally {
      deadline.cancel();
    }
    await this.#evaluate();
    return wait;
  }

  #leasePollMs(): number {
    return Math.floor((Math.max(1, this.#ttlSeconds) * 1000) / 3);
  }

  /** Hold `lease`: renew it, and forget a previous tenure's view of the bucket. */
  #hold(lease: BucketLease): void {
    if (this.#tenures > 0) this.#resetTenure();
    this.#tenures += 1;
    this.#foreign = null;
    this.#health.lease = null;
    this.#health.leaseHeld = true;
    this.#lease = lease;
    this.#leaseDropped = false;
    this.#leaseDrop = new AbortController();
    if (lease.exclusion === 'conditional')
      this.#logger.info('backup.lease_taken', {
        instanceId: lease.instanceId,
        exclusion: 'conditional',
      });
    else
      this.#logger.warn('backup.lease_taken', {
        instanceId: lease.instanceId,
        exclusion: 'best-effort',
        warning:
          'conditional writes are off: two instances started together may both upload and overwrite each other',
      });
    this.#scheduleRenew(lease, lease.renewIntervalMs());
  }

  #scheduleRenew(lease: BucketLease, waitMs: number): void {
    this.#renewTimer = this.#clock.setTimer(waitMs, () => {
      this.#renewTimer = null;
      if (this.#lease !== lease || this.#leaseDropped) return;
      this.#renewing = this.#renewOnce(lease).finally(() => {
        this.#renewing = null;
      });
    });
  }

  /** One renewal; schedules the next one unless the lease is lost. */
  async #renewOnce(lease: BucketLease): Promise<void> {
    const every = Math.max(1, lease.renewIntervalMs());
    // A sixth of a TTL (5 s at the default 30 s), not the operation
    // deadline: a renewal that hangs is given up and retried (after
    // RENEW_RETRY_MS) well before writes stop, two thirds of a TTL after the
    // last renewal was sent.
    const deadline = this.#deadline(
      'renewing the bucket lease',
      Math.min(this.#operationTimeoutMs, Math.max(1, (this.#ttlSeconds * 1000) / 6)),
    );
    const sentAt = this.#clock.monotonicNow();
    let why: string;
    try {
      await lease.renew({ signal: deadline.signal });
      this.#logger.debug?.('backup.lease_renewed', {
        tookMs: Math.round(this.#clock.monotonicNow() - sentAt),
      });
      if (this.#lease !== lease || this.#leaseDropped) return;
      this.#health.lease = null;
      this.#health.leaseHeld = true;
      this.#scheduleRenew(lease, every);
      return;
    } catch (error) {
      if (this.#lease !== lease || this.#leaseDropped) return;
      if (LeaseLostError.isInstance(error)) {
        this.#logger.warn('backup.lease_lost', { error: error.message });
        this.#health.leaseHeld = false;
        this.#health.lease = `${error.message}; this instance uploads nothing while another holds it`;
        return;
      }
      why = messageOf(deadline.reason() ?? error);
    } finally {
      deadline.cancel();
    }
    this.#health.errorCount += 1;
    this.#logger.warn('backup.lease_renew_failed', { error: why });
    if (!lease.mayWrite()) {
      this.#health.leaseHeld = false;
      this.#health.lease = `the bucket lease could not be renewed (${why}); uploads are stopped until it is`;
    }
    this.#scheduleRenew(lease, Math.min(RENEW_RETRY_MS, every));
  }

  /** Stop renewing and forget the lease handle (lost or dropped); the next attempt acquires afresh. */
  #forgetLease(): void {
    this.#renewTimer?.();
    this.#renewTimer = null;
    this.#lease = null;
    this.#leaseDropped = false;
    this.#health.leaseHeld = false;
  }

  /**
   * The bucket refused a write: another writer got there first. Drop the
   * lease; the worker starts over through it, and resume reads the bucket
   * afresh.
   */
  #conflict(what: string, key?: string, cause?: unknown): WriterConflictError {
    const why = `another writer is using this backup prefix: ${what}`;
    this.#logger.warn('backup.write_refused', { reason: why });
    if (this.#lease !== null) {
      this.#leaseDropped = true;
      this.#leaseDrop?.abort(new WriteFencedError(why));
      this.#renewTimer?.();
      this.#renewTimer = null;
      this.#health.leaseHeld = false;
      this.#health.lease = why;
    }
    return new WriterConflictError(why, { key, cause });
  }

  /** Forget everything known about the bucket: another writer may have changed it. */
  #resetTenure(): void {
    this.#resumed = false;
    this.#lineage = null;
    this.#parentLineage = null;
    this.#parentKeys.clear();
    this.#latestVersion = null;
    this.#latestTarget = null;
    this.#manifestVersions.clear();
    this.#allocated.clear();
    this.#retiredSegments.clear();
    this.#manifestCache.clear();
    this.#sideKeysWritten.clear();
    this.#nextGeneration = 0;
    this.#generations.clear();
    this.#current = null;
    this.#snapshot = null;
    this.#archives.clear();
    this.#baseArchives = [];
    this.#side.clear();
    this.#manifestDirty = false;
    this.#lastManifestAt = null;
    this.#health.shipped = null;
  }

  /**
   * Stop renewing and delete the lease if still held; an own record a failed
   * attempt left is removed too. Bounded by one operation deadline, even
   * against a bucket that ignores abort signals: the lease then expires by
   * itself.
   */
  async #releaseLease(): Promise<void> {
    this.#renewTimer?.();
    this.#renewTimer = null;
    this.#health.leaseHeld = false;
    const lease = this.#lease;
    const dropped = this.#leaseDropped;
    this.#lease = null;
    const deadline = this.#deadline('releasing the bucket lease', this.#operationTimeoutMs);
    const expired = new Promise<'expired'>((resolve) => {
      if (deadline.signal.aborted) resolve('expired');
      deadline.signal.addEventListener('abort', () => resolve('expired'), { once: true });
    });
    const release = async (): Promise<void> => {
      // A renewal in flight finishes (or fails) before the release starts.
      const renewing = this.#renewing;
      if (renewing) await renewing.catch(() => {});
      deadline.signal.throwIfAborted();
      if (lease !== null) {
        // A lease known lost (or dropped after a refusal) is not ours to delete.
        if (!lease.isLost() && !dropped) await lease.release({ signal: deadline.signal });
      } else if (this.#started) {
        // An acquisition that failed, timed out or was abandoned may have
        // landed: remove a record naming this instance, never another's.
        await releaseOwnRecord(this.#store, this.#prefix, this.#instanceId, {
          signal: deadline.signal,
        });
      }
    };
    try {
      const outcome = await Promise.race([release().then(() => 'released' as const), expired]);
      if (outcome === 'released') this.#logger.info('backup.lease_released', {});
      else throw deadline.reason();
    } catch (error) {
      this.#logger.warn('backup.lease_release_failed', {
        error: messageOf(deadline.reason() ?? error),
        note: 'it expires by itself',
      });
    } finally {
      deadline.cancel();
    }
  }

  // ── Steps ───────────────────────────────────────────────────────────────

  /**
   * One step with its outcome recorded in health: returns how long to wait
   * before the next (what is left of the WAL interval since the step began
   * after a success or deferral, so 0 after a step that overran it; the
   * back-off after a failure). Takes no lease. Rethrows only
   * {@link WorkerPanicError}.
   */
  async step(): Promise<number> {
    let delay: number;
    const startedAt = this.#clock.monotonicNow();
    try {
      await this.runOnce();
      this.#health.consecutiveFailures = 0;
      this.#backoffMs = FIRST_BACKOFF_MS;
      // Steps keep a cadence of one per interval: a step that took longer
      // (a backlog: it shipped what was durable when it began, in segments
      // of up to maxSegmentBytes) is followed at once by the next.
      delay = Math.max(0, this.#walIntervalMs - (this.#clock.monotonicNow() - startedAt));
    } catch (error) {
      if (WorkerPanicError.isInstance(error)) throw error;
      delay = this.#failed(error);
    }
    await this.#evaluate();
    return delay;
  }

  /** Count a failed step or lease attempt; return the back-off to wait. */
  #failed(error: unknown): number {
    this.#health.errorCount += 1;
    this.#health.consecutiveFailures += 1;
    const delay = this.#backoffMs;
    this.#backoffMs = Math.min(this.#backoffMs * 2, MAX_BACKOFF_MS);
    this.#logger.warn('backup.step_failed', {
      error: messageOf(error),
      consecutiveFailures: this.#health.consecutiveFailures,
      retryInMs: delay,
    });
    return delay;
  }

  /**
   * Ship everything durable when it is called and write a final manifest
   * that names it, retrying a failure twice (after 1 s, then 2 s). Used on
   * shutdown, under the grace period. A backlog takes several bounded steps,
   * each ending in a restore point, so what the grace allows is restorable
   * even when it does not allow everything.
   */
  async flush(): Promise<void> {
    // What is durable now, with the engine's latest commits captured.
    await this.#source.catchUp();
    await this.#source.observe();
    const goal = await this.#source.durablePosition();
    this.#stopGoalCommits = goal.commitCount;
    for (let attempt = 0; attempt < 3; ) {
      try {
        const before = this.#current?.inRestorePoint;
        await this.runOnce();
        await this.#writeManifest();
        await this.#evaluate();
        if (this.#restorable(goal) || this.#current === null) return;
        // Deferred (the engine was busy): try again shortly, until the
        // grace period ends.
        if (this.#current.inRestorePoint === before)
          await new Promise<void>((resolve) =>
            this.#clock.setTimer(Math.min(this.#walIntervalMs, 250), resolve),
          );
      } catch (error) {
        if (WorkerPanicError.isInstance(error) || this.#refused || this.#runAbort.signal.aborted)
          return;
        this.#health.errorCount += 1;
        this.#logger.warn('backup.flush_failed', { error: messageOf(error), attempt });
        if (attempt < 2) {
          const ms = FIRST_BACKOFF_MS * 2 ** attempt;
          await new Promise<void>((resolve) => this.#clock.setTimer(ms, resolve));
        }
        attempt += 1;
      }
    }
  }

  /**
   * True when the restore point LATEST names holds everything up to
   * `position`: its generation shipped that far, or a later generation
   * (whose snapshot holds it) has a restore point.
   */
  #restorable(position: DurablePosition): boolean {
    const generation = this.#current;
    if (generation === null) return false;
    if (!sameWalKey(generation.key, keyOf(position))) return !this.#manifestDirty;
    return generation.inRestorePoint >= position.durableLength;
  }

  #defer(why: string): void {
    this.#health.deferral = why;
  }

  /**
   * One step without lease or health bookkeeping: read the bucket's previous
   * state if not done yet; upload a new restore point when the engine
   * generation, snapshot or WAL file changed; ship the durable WAL not shipped
   * yet; write a manifest when one is due. Then the source's `afterStep`.
   * @throws LineageRefusedError (every call, once the prefix is refused);
   *   WriterConflictError; OperationTimeoutError; WriteFencedError;
   *   SimulatedCrashError; store and source errors.
   */
  async runOnce(): Promise<void> {
    if (this.#panicNext) {
      this.#panicNext = false;
      throw new WorkerPanicError();
    }
    if (this.#refused) throw this.#refused;
    let failure: unknown = null;
    try {
      await this.#stepInner();
    } catch (error) {
      failure = error;
    }
    if (this.#source.afterStep) {
      try {
        await this.#source.afterStep(this.#progress(), { signal: this.#runAbort.signal });
      } catch (error) {
        if (failure === null) failure = error;
        else this.#logger.warn('backup.after_step_failed', { error: messageOf(error) });
      }
    }
    if (failure !== null) throw failure;
  }

  #progress(): ShippedProgress | null {
    const g = this.#current;
    if (!g) return null;
    return {
      engineGeneration: g.key.engineGeneration,
      snapshot: g.key.snapshot,
      wal: g.key.wal,
      shippedLength: g.cursor,
      inRestorePoint: g.inRestorePoint,
      walGeneration: g.number,
    };
  }

  async #stepInner(): Promise<void> {
    if (!this.#resumed && !(await this.#resume())) {
      this.#defer("the store's commit count is not known yet");
      return;
    }
    let disk = await this.#source.observe();
    if (disk.intentPending) {
      this.#defer('a snapshot is in progress (the snapshot intent is not empty)');
      return;
    }
    let position = await this.#source.durablePosition();
    // The disk differs from the engine's position: another process
    // snapshotted, replaced or extended the WAL. Let the engine catch up —
    // the intent was empty just now — and keep the result only if the disk
    // held still across it.
    if (
      position.snapshot !== disk.snapshot ||
      position.wal !== disk.wal ||
      disk.walLength !== position.durableLength
    ) {
      await this.#source.catchUp();
      const after = await this.#source.observe();
      if (!unchangedBetween(disk, after)) {
        this.#defer("the store's files changed while catching up");
        return;
      }
      disk = after;
      position = await this.#source.durablePosition();
    }
    if (position.snapshotInProgress) {
      this.#defer('the engine is taking a snapshot');
      return;
    }
    if (
      position.snapshot !== disk.snapshot ||
      position.wal !== disk.wal ||
      disk.walLength < position.durableLength
    ) {
      this.#defer('the engine has not caught up with the files on disk');
      return;
    }
    this.#health.deferral = null;
    if (!sameWalKey(this.#current?.key, keyOf(position))) {
      await this.#uploadBase(position, disk);
      return;
    }
    await this.#shipSegments();
    if (this.#manifestDue()) await this.#writeManifest();
  }

  #manifestDue(): boolean {
    return (
      this.#manifestDirty &&
      (this.#lastManifestAt === null ||
        this.#clock.monotonicNow() - this.#lastManifestAt >= this.#manifestIntervalMs)
    );
  }

  // ── Resume and lineage ────────────────────────────────────────────────────

  /**
   * Read what a previous run left in the bucket — so no generation number is
   * reused and no archive the latest manifest names is uploaded again — and
   * check the prefix is this store's lineage. `false`: not decidable yet.
   */
  async #resume(): Promise<boolean> {
    const latest = await this.#latestManifest();
    const local = await this.#source.readLineage();
    const parent = await this.#source.readParent();
    // A store restored from exactly the restore point LATEST names continues
    // the prefix as a new lineage (a restore writes no lineage file: the
    // restored store gets its own at this, its first, backup).
    let adopt = false;
    if (
      latest !== null &&
      parent !== null &&
      parent.lineage === latest.lineage &&
      local !== latest.lineage
    ) {
      if (this.#latestTarget !== parent.manifestKey) {
        throw this.#refuse(
          `this store was restored from ${parent.manifestKey} of lineage ${parent.lineage}, but the backup prefix has moved on since (LATEST names ${this.#latestTarget ?? 'nothing'}): another instance has written to it. Nothing is uploaded or deleted. Point the worker at a new prefix`,
        );
      }
      adopt = true;
    }
    let lineage: string;
    if (adopt && local === null) {
      lineage = newInstanceId();
      await this.#source.createLineage(lineage);
      this.#logger.info('backup.new_lineage', { lineage, parent: parent?.lineage ?? '' });
    } else if (adopt && local !== null) {
      lineage = local;
    } else if (local !== null && latest !== null && local !== latest.lineage) {
      throw this.#refuse(
        `this backup prefix holds the backups of another store (lineage ${latest.lineage}), not this one (lineage ${local}); nothing is uploaded or deleted. Point the worker at a new prefix, or restore this store from that prefix first`,
      );
    } else if (local === null && latest !== null) {
      throw this.#refuse(
        `this backup prefix holds the backups of another store (lineage ${latest.lineage}), and this store has never been backed up; nothing is uploaded or deleted. Point the worker at a new prefix, or restore this store from that prefix first`,
      );
    } else if (local !== null && latest !== null) {
      const have = (await this.#source.durablePosition()).commitCount;
      if (have === null) return false;
      if (have < latest.commitSeq) {
        throw this.#refuse(
          `this store holds ${have} commits, fewer than the ${latest.commitSeq} of the newest restore point in the backup prefix: it was restored from an older backup, or rewound. Uploading would bury the newer history, so nothing is uploaded or deleted. Point the worker at a new prefix`,
        );
      }
      lineage = local;
    } else if (local !== null) {
      lineage = local;
    } else {
      lineage = newInstanceId();
      await this.#source.createLineage(lineage);
      this.#logger.info('backup.new_lineage', { lineage });
    }
    if (adopt)
      this.#logger.info('backup.adopting_prefix', { lineage, parent: parent?.lineage ?? '' });
    this.#parentLineage = parent?.lineage ?? null;

    const generations = new Set<number>();
    const wal = await this.#list(`${this.#prefix}/wal/`, '/');
    for (const common of wal.commonPrefixes) {
      const g = parseSegmentGenerationPrefix(this.#prefix, common);
      if (g !== undefined) generations.add(g);
    }
    const snapshots = await this.#list(`${this.#prefix}/snapshots/`, '/');
    for (const object of snapshots.objects) {
      const g = parseVersionedGeneration(this.#prefix, object.key);
      if (g !== undefined) generations.add(g);
    }
    const archives = await this.#list(`${this.#prefix}/archives/`, '/');
    for (const common of archives.commonPrefixes) {
      const name = common.slice(`${this.#prefix}/archives/`.length).replace(/\/$/, '');
      if (/^\d+$/.test(name)) generations.add(Number(name));
    }
    let highest = -1;
    for (const g of generations) highest = Math.max(highest, g);
    if (latest !== null) {
      highest = Math.max(highest, latest.walGeneration);
      // Another lineage's archives are never reused: a restore point names
      // only its own lineage's objects.
      if (latest.lineage === lineage) {
        for (const file of latest.files) {
          const n = parseArchiveName(file.name);
          if (n !== undefined)
            this.#archives.set(n, { length: file.size, entry: file, verified: false });
        }
      }
    }
    this.#generations = generations;
    this.#nextGeneration = highest + 1;
    this.#lineage = lineage;
    this.#resumed = true;
    return true;
  }

  /** Refuse the prefix for the life of this worker. */
  #refuse(why: string): LineageRefusedError {
    this.#logger.error('backup.prefix_refused', { reason: why });
    this.#health.lineage = why;
    this.#refused = new LineageRefusedError(why);
    return this.#refused;
  }

  #ownLineage(): string {
    return this.#lineage ?? '';
  }

  /** The manifest LATEST names, remembering LATEST's version and target. */
  async #latestManifest(): Promise<Manifest | null> {
    const latest = await this.#getCapped(latestKey(this.#prefix), MAX_LATEST_BYTES);
    if (latest === 'too-large')
      throw new BucketStateError(
        `LATEST does not name a manifest: it is larger than ${MAX_LATEST_BYTES} bytes`,
      );
    if (latest === null) {
      this.#latestVersion = null;
      this.#latestTarget = null;
      return null;
    }
    this.#latestVersion = latest.version;
    let target: string;
    try {
      target = parseLatest(latest.body, { prefix: this.#prefix });
    } catch (error) {
      throw new BucketStateError(`LATEST does not name a manifest: ${messageOf(error)}`, {
        cause: error,
      });
    }
    this.#latestTarget = target;
    this.#noteLatest(target);
    const manifest = await this.#getCapped(target, MAX_MANIFEST_BYTES);
    if (manifest === 'too-large')
      throw new BucketStateError(
        `LATEST names ${target}, which does not parse: larger than ${MAX_MANIFEST_BYTES} bytes`,
      );
    if (manifest === null)
      throw new BucketStateError(`LATEST names ${target}, which does not exist`);
    try {
      return parseManifest(manifest.body, { prefix: this.#prefix });
    } catch (error) {
      throw new BucketStateError(
        `LATEST names ${target}, which does not parse: ${messageOf(error)}`,
        {
          cause: error,
        },
      );
    }
  }

  // ── Restore points ────────────────────────────────────────────────────────

  /**
   * Start a generation beside the snapshot on disk: open the snapshot and
   * archives and read the chain files while the files hold still, upload them
   * under keys of their own, ship the generation's durable WAL from offset 0,
   * write the manifest.
   */
  async #uploadBase(position: DurablePosition, disk: FileObservation): Promise<void> {
    const opened = await this.#source.openRestorePoint();
    try {
      const after = await this.#source.observe();
      const positionAfter = await this.#source.durablePosition();
      if (
        !unchangedBetween(disk, after) ||
        (opened.snapshot?.identity ?? null) !== disk.snapshot ||
        !sameWalKey(keyOf(positionAfter), keyOf(position)) ||
        positionAfter.snapshotInProgress
      ) {
        this.#defer("the store's files changed while a restore point was read");
        return;
      }
      // Burn the number now: objects a failed attempt leaves belong to a
      // generation no manifest will ever name.
      const number = this.#nextGeneration;
      this.#nextGeneration += 1;
      this.#generations.add(number);
      this.#allocated.add(number);

      const present: number[] = [];
      for (const archive of opened.archives) {
        const known = this.#archives.get(archive.number);
        let reusable = false;
        if (known && known.length === archive.size) {
          if (known.verified) reusable = true;
          else {
            // Seeded from the bucket: the same number and length are not the
            // same bytes until the CRC says so.
            const crc = new Crc32();
            for await (const chunk of archive.read({ signal: this.#runAbort.signal }))
              crc.update(chunk);
            reusable = crc.hex() === known.entry.crc32;
          }
        }
        if (reusable) known!.verified = true;
        else {
          const entry = await this.#putFile(
            archive,
            archiveKey(this.#prefix, number, archive.number),
            true,
            0,
          );
          this.#archives.set(archive.number, { length: entry.size, entry, verified: true });
        }
        present.push(archive.number);
      }
      const chain: FileEntry[] = [];
      for (const file of opened.chainFiles) chain.push(await this.#putSide(file.name, file.bytes));
      const floor = opened.floor;
      let archiveFrames = 0;
      for (const n of present) archiveFrames += this.#archives.get(n)?.entry.frames ?? 0;
      let snapshot: FileEntry | null = null;
      if (opened.snapshot) {
        const key = snapshotKey(
          this.#prefix,
          number,
          floor + archiveFrames + opened.snapshotCommits,
        );
        snapshot = await this.#putFile(opened.snapshot, key, false, opened.snapshotCommits);
      }
      await this.#syncSideFiles();
      this.#snapshot = snapshot;
      this.#baseArchives = present;
      this.#current = {
        number,
        key: keyOf(position),
        cursor: 0,
        inRestorePoint: 0,
        floor,
        chain,
        segments: [],
      };
      this.#recordShipped();
      this.#manifestDirty = true;
    } finally {
      await opened.close();
    }
    await this.#shipSegments();
    await this.#writeManifest();
  }

  async #putSide(name: string, bytes: Uint8Array): Promise<FileEntry> {
    const crc32 = crc32Hex(bytes);
    const key = sideKey(this.#prefix, name, crc32, bytes.byteLength);
    // Content-addressed: a key this tenure wrote (and retention has not
    // deleted since) already holds exactly these bytes.
    if (!this.#sideKeysWritten.has(key)) {
      await this.#putImmutable(key, bytes, crc32);
      this.#sideKeysWritten.add(key);
    }
    return { name, key, size: bytes.byteLength, crc32, frames: 0, lineage: this.#ownLineage() };
  }

  /**
   * Upload each per-manifest side file whose content changed since it was
   * last uploaded; forget one that no longer exists locally.
   */
  async #syncSideFiles(): Promise<void> {
    for (const name of this.#source.sideFileNames) {
      const known = this.#side.get(name);
      const read = await this.#source.readSideFile(name, known?.identity ?? null);
      if (read === null) {
        if (this.#side.delete(name)) this.#manifestDirty = true;
        continue;
      }
      if (read.bytes === null) continue;
      const crc32 = crc32Hex(read.bytes);
      const key = sideKey(this.#prefix, name, crc32, read.bytes.byteLength);
      let entry: FileEntry;
      if (known && known.entry.key === key) entry = known.entry;
      else {
        this.#manifestDirty = true;
        entry = await this.#putSide(name, read.bytes);
      }
      this.#side.set(name, { identity: read.identity, entry });
    }
  }

  // ── WAL segments ──────────────────────────────────────────────────────────

  /**
   * Ship the durable WAL bytes of the current generation not shipped yet, in
   * segments of at most `maxSegmentBytes`. Each read is bracketed by two
   * observations and dropped if anything that pairs it with the snapshot
   * moved. The next segment is read while the current one uploads (reads
   * and uploads overlap; uploads stay one at a time and in order).
   *
   * Bounded: it ships up to the durable length seen when it starts, never
   * chasing what lands meanwhile, and stops early once a restore point is
   * due. Against an application that commits faster than the bucket takes
   * it, a step that chased the moving end never ended, so no restore point
   * was written and the source could never let go of what had shipped.
   * What is left is the next step's, which starts at once when this one
   * overran its interval (see {@link step}), with larger segments.
   */
  async #shipSegments(): Promise<void> {
    const generation = this.#current;
    if (!generation) return;
    const target = (await this.#source.durablePosition()).durableLength;
    let next = await this.#readSegment(generation, generation.cursor, target);
    while (next !== null) {
      const { range, crc32 } = next;
      const key = segmentKey(this.#prefix, generation.number, range.start, range.end);
      const upload = this.#putImmutable(key, range.bytes, crc32);
      const stopAfterThis = this.#manifestDue();
      const prefetch = stopAfterThis
        ? Promise.resolve(null)
        : this.#readSegment(generation, range.end, target);
      try {
        await upload;
      } catch (error) {
        // The read ahead is worthless without this segment; its own failure
        // is not the one to report.
        await prefetch.catch(() => {});
        throw error;
      }
      if (this.#current !== generation) return;
      generation.cursor = range.end;
      generation.segments.push({
        key,
        size: range.bytes.byteLength,
        crc32,
        frames: range.frames,
        lineage: this.#ownLineage(),
      });
      this.#recordShipped();
      this.#manifestDirty = true;
      next = await prefetch;
    }
  }

  /**
   * Read the complete frames from `cursor` up to `target` (the source may
   * return one frame past it when a single frame is larger), bracketed by
   * two observations; `null` when there is nothing to ship or the files
   * moved (the next step starts the new generation).
   */
  async #readSegment(
    generation: Generation,
    cursor: number,
    target: number,
  ): Promise<{ range: WalRange; crc32: string } | null> {
    const before = await this.#source.observe();
    const position = await this.#source.durablePosition();
    if (
      before.intentPending ||
      before.snapshot !== generation.key.snapshot ||
      before.wal !== generation.key.wal ||
      !sameWalKey(keyOf(position), generation.key)
    )
      return null;
    const until = Math.min(target, position.durableLength);
    if (until <= cursor) return null;
    const range = await this.#source.readWalRange(cursor, until, {
      maxBytes: this.#maxSegmentBytes,
      signal: this.#runAbort.signal,
    });
    const after = await this.#source.observe();
    if (
      !unchangedBetween(before, after) ||
      !sameWalKey(keyOf(await this.#source.durablePosition()), generation.key)
    )
      return null;
    if (range === null) return null;
    if (range.start !== cursor || range.end <= range.start)
      throw new BackupError(
        `the source returned WAL range ${range.start}-${range.end} for cursor ${cursor}`,
      );
    return {
      range,
      crc32: range.crc32 === undefined ? crc32Hex(range.bytes) : formatCrc32(range.crc32),
    };
  }

  #recordShipped(): void {
    const g = this.#current;
    if (g) this.#health.shipped = { key: g.key, cursor: g.cursor };
  }

  // ── Manifests and retention ───────────────────────────────────────────────

  /** Write a manifest for the current restore point, point LATEST at it, apply retention. */
  async #writeManifest(): Promise<void> {
    await this.#syncSideFiles();
    const generation = this.#current;
    if (!generation) return;
    const files: FileEntry[] = [];
    if (this.#snapshot) files.push(this.#snapshot);
    for (const n of this.#baseArchives) {
      const archive = this.#archives.get(n);
      if (archive) files.push(archive.entry);
    }
    files.push(...generation.chain);
    for (const { entry } of this.#side.values()) files.push(entry);
    const segments = [...generation.segments];
    const commitSeq = computeCommitSeq({ oldestCommitSeq: generation.floor, files, segments });
    const manifest: Manifest = {
      formatVersion: MANIFEST_FORMAT_VERSION,
      lineage: this.#ownLineage(),
      createdAt: new Date(this.#clock.wallNow()).toISOString(),
      commitSeq,
      oldestCommitSeq: generation.floor,
      walGeneration: generation.number,
      files,
      segments,
    };
    // Refuse rather than write a restore point that would not verify.
    verifyLineage(manifest);
    const key = manifestKey(this.#prefix, commitSeq);
    if (this.#parentKeys.has(key)) return;
    const written = await this.#putManifest(
      key,
      new TextEncoder().encode(serializeManifest(manifest)),
    );
    // The parent's restore point at this commit count is the same state;
    // the next commit's restore point is this lineage's first.
    if (!written) return;
    this.#manifestCache.set(key, { version: this.#manifestVersions.get(key)!, manifest });
    await this.#putLatest(key);
    generation.inRestorePoint = generation.cursor;
    this.#manifestDirty = false;
    this.#lastManifestAt = this.#clock.monotonicNow();
    if (this.#retain > 0) await this.#applyRetention(key);
  }

  /**
   * Write a manifest: replace-if-version against the version this tenure
   * wrote at `key`; otherwise create-if-absent, and over an existing one only
   * when it is this lineage's. `false` (nothing written) when `key` holds the
   * manifest of the lineage this store was restored from.
   */
  async #putManifest(key: string, bytes: Uint8Array): Promise<boolean> {
    if (this.#parentLineage !== null && !this.#manifestVersions.has(key)) {
      // A store without conditional writes would overwrite: look first.
      if ((await this.#manifestLineageAt(key))?.lineage === this.#parentLineage) {
        this.#logger.info('backup.parent_manifest_kept', { key });
        this.#parentKeys.add(key);
        return false;
      }
    }
    const known = this.#manifestVersions.get(key);
    let version: ObjectVersion;
    try {
      version = await this.#putConditional(key, bytes, known ? { ifMatch: known } : 'create');
    } catch (error) {
      if (AlreadyExistsError.isInstance(error)) {
        const existing = await this.#manifestLineageAt(key);
        if (existing && existing.lineage === this.#parentLineage) {
          this.#logger.info('backup.parent_manifest_kept', { key });
          this.#parentKeys.add(key);
          return false;
        }
        if (!existing || existing.lineage !== this.#ownLineage())
          throw this.#conflict(`${key} is another lineage's manifest`, key, error);
        try {
          version = await this.#putConditional(key, bytes, { ifMatch: existing.version });
        } catch (retryError) {
          if (this.#isRefusal(retryError))
            throw this.#conflict(`${key} changed since this worker read it`, key, retryError);
          throw retryError;
        }
      } else if (this.#isRefusal(error)) {
        throw this.#conflict(`${key} changed since this worker wrote it`, key, error);
      } else throw error;
    }
    this.#manifestVersions.set(key, version);
    return true;
  }

  #isRefusal(error: unknown): boolean {
    return (
      PreconditionFailedError.isInstance(error) ||
      AlreadyExistsError.isInstance(error) ||
      ConflictError.isInstance(error)
    );
  }

  async #manifestLineageAt(
    key: string,
  ): Promise<{ lineage: string | null; version: ObjectVersion } | null> {
    const existing = await this.#getCapped(key, MAX_MANIFEST_BYTES);
    if (existing === null) return null;
    // An oversized object is nobody's restore point: treated as another writer's (never overwritten).
    if (existing === 'too-large') return { lineage: null, version: { etag: 'unknown: oversized' } };
    try {
      return {
        lineage: parseManifest(existing.body, { prefix: this.#prefix }).lineage,
        version: existing.version,
      };
    } catch {
      // An unparseable object is nobody's restore point; it is treated as
      // another writer's (never overwritten).
      return { lineage: null, version: existing.version };
    }
  }

  /** Health's view of the restore point LATEST names. */
  #noteLatest(target: string): void {
    const commitSeq = parseManifestKey(this.#prefix, target);
    this.#health.latestRestorePoint =
      commitSeq === undefined ? null : { manifestKey: target, commitSeq };
  }

  /** Point LATEST at `target`, replace-if-version against the version last written or read. */
  async #putLatest(target: string): Promise<void> {
    const key = latestKey(this.#prefix);
    // LATEST already names this manifest: rewriting the same bytes costs a
    // request and, on services whose versions are content hashes (S3 ETags),
    // would leave two writes with one version, which replace-if-version
    // cannot tell apart. A change by another writer is still caught at the
    // next LATEST write, which names a different manifest.
    if (this.#latestTarget === target && this.#latestVersion) return;
    try {
      this.#latestVersion = await this.#putConditional(
        key,
        new TextEncoder().encode(serializeLatest(target)),
        this.#latestVersion ? { ifMatch: this.#latestVersion } : 'create',
      );
    } catch (error) {
      if (this.#isRefusal(error) || NotFoundError.isInstance(error))
        throw this.#conflict('LATEST changed since this worker last wrote or read it', key, error);
      throw error;
    }
    this.#latestTarget = target;
    this.#noteLatest(target);
  }

  /**
   * Keep the newest `retain` manifests of this lineage, then delete what only
   * the dropped ones named.
   *
   * - Only manifests that parse and name this lineage are counted or deleted.
   *   The manifest just written and LATEST's target are always kept.
   * - Snapshots and archives are deleted when no kept manifest names them and
   *   their generation is this lineage's (named by one of its manifests or
   *   allocated by this tenure). Side files when a dropped manifest named them
   *   and no kept one does.
   * - Segments: a generation of this lineage older than every kept manifest's
   *   (and not the current one) has its own prefix listed once, and its
   *   unnamed segments deleted. `wal/` is never listed whole.
   * - Never an object another lineage's manifest names; never LATEST.
   * - Conservative on doubt: a manifest that cannot be read protects
   *   everything but the surplus manifests (it is neither counted nor used).
   */
  async #applyRetention(justWritten: string): Promise<void> {
    const listed = await this.#list(`${this.#prefix}/manifest/`);
    const keys = listed.objects.map((o) => o.key).filter((k) => k.endsWith('.json'));
    keys.sort();
    const ours = this.#ownLineage();
    const mine: { key: string; manifest: Manifest }[] = [];
    const foreign = new Set<string>();
    let doubt = false;
    const versions = new Map(listed.objects.map((o) => [o.key, o.version]));
    for (const key of keys) {
      const manifest = await this.#readManifestCached(key, versions.get(key));
      if (manifest === undefined) continue;
      if (manifest === null) {
        doubt = true;
        continue;
      }
      if (manifest.lineage === ours) mine.push({ key, manifest });
      else {
        for (const f of manifest.files) foreign.add(f.key);
        for (const s of manifest.segments) foreign.add(s.key);
      }
    }
    this.#health.restorePoints = mine.length;
    if (mine.length <= this.#retain) return;
    const newestStart = mine.length - this.#retain;
    const kept: { key: string; manifest: Manifest }[] = [];
    const dropped: { key: string; manifest: Manifest }[] = [];
    mine.forEach((entry, index) => {
      if (index >= newestStart || entry.key === justWritten || entry.key === this.#latestTarget)
        kept.push(entry);
      else dropped.push(entry);
    });
    this.#health.restorePoints = kept.length;
    if (dropped.length === 0) return;
    const owned = new Set<number>(this.#allocated);
    for (const { manifest } of [...kept, ...dropped]) owned.add(manifest.walGeneration);
    for (const { key } of dropped) {
      await this.#delete(key);
      this.#manifestCache.delete(key);
    }
    if (doubt) {
      this.#logger.warn('backup.retention_conservative', {
        reason:
          'a manifest under the prefix could not be read; only surplus manifests were deleted',
      });
      return;
    }
    const referenced = new Set<string>();
    let oldestKept = Number.POSITIVE_INFINITY;
    for (const { manifest } of kept) {
      oldestKept = Math.min(oldestKept, manifest.walGeneration);
      for (const f of manifest.files) referenced.add(f.key);
      for (const s of manifest.segments) referenced.add(s.key);
    }
    const doomed: string[] = [];
    for (const top of ['snapshots', 'archives']) {
      const all = await this.#list(`${this.#prefix}/${top}/`);
      for (const object of all.objects) {
        const g = parseVersionedGeneration(this.#prefix, object.key);
        if (g !== undefined && owned.has(g) && !referenced.has(object.key)) doomed.push(object.key);
      }
    }
    const sidePrefix = `${this.#prefix}/side/`;
    // Only names this source writes: a manifest claiming this lineage is
    // still bucket content, and names it lists beyond these are not ours.
    const ownSideNames = new Set([
      ...this.#source.sideFileNames,
      ...(this.#source.chainFileNames ?? []),
    ]);
    const side = new Set<string>();
    for (const { manifest } of dropped)
      for (const f of manifest.files)
        if (f.key.startsWith(sidePrefix) && ownSideNames.has(f.name) && !referenced.has(f.key))
          side.add(f.key);
    doomed.push(...side);
    const current = this.#current?.number;
    const retiring = [...owned]
      .filter((g) => g < oldestKept && g !== current && !this.#retiredSegments.has(g))
      .sort((a, b) => a - b);
    for (const g of retiring) {
      const listedSegments = await this.#list(segmentGenerationPrefix(this.#prefix, g));
      for (const object of listedSegments.objects) {
        const parsed = parseSegmentKey(this.#prefix, object.key);
        if (parsed && parsed.generation === g && !referenced.has(object.key))
          doomed.push(object.key);
      }
    }
    for (const key of doomed) {
      if (foreign.has(key)) continue;
      await this.#delete(key);
      this.#sideKeysWritten.delete(key);
    }
    // Retired for good: its prefix is listed once, not at every retention.
    for (const g of retiring) {
      this.#generations.delete(g);
      this.#retiredSegments.add(g);
    }
    for (const [n, archive] of this.#archives)
      if (!referenced.has(archive.entry.key)) this.#archives.delete(n);
  }

  /**
   * A manifest under the prefix, parsed: from the cache when the listed
   * version is the one cached (a manifest is read once per version, not at
   * every retention), else read. `null`: it does not parse; `undefined`: gone.
   */
  async #readManifestCached(
    key: string,
    listedVersion: ObjectVersion | undefined,
  ): Promise<Manifest | null | undefined> {
    const cached = this.#manifestCache.get(key);
    if (cached && listedVersion && sameVersion(cached.version, listedVersion))
      return cached.manifest;
    const object = await this.#getCapped(key, MAX_MANIFEST_BYTES);
    // An oversized object under manifest/ reads as unparseable: it is never
    // counted, and retention turns conservative.
    if (object === 'too-large') return null;
    if (object === null) {
      this.#manifestCache.delete(key);
      return undefined;
    }
    let manifest: Manifest | null;
    try {
      manifest = parseManifest(object.body, { prefix: this.#prefix });
    } catch {
      manifest = null;
    }
    this.#manifestCache.set(key, { version: object.version, manifest });
    return manifest;
  }

  // ── Requests, each under the operation deadline ──────────────────────────

  /**
   * A deadline on the injected clock: its signal aborts with an
   * {@link OperationTimeoutError} after `ms`. Cancel it when the request ends.
   */
  #deadline(
    operation: string,
    ms: number = this.#operationTimeoutMs,
  ): { signal: AbortSignal; cancel: () => void; reason: () => unknown; rearm: () => void } {
    const controller = new AbortController();
    let cancelTimer = this.#clock.setTimer(ms, () =>
      controller.abort(new OperationTimeoutError(operation, ms)),
    );
    return {
      signal: controller.signal,
      cancel: () => cancelTimer(),
      reason: () => (controller.signal.aborted ? controller.signal.reason : undefined),
      rearm: () => {
        if (controller.signal.aborted) return;
        cancelTimer();
        cancelTimer = this.#clock.setTimer(ms, () =>
          controller.abort(new OperationTimeoutError(operation, ms)),
        );
      },
    };
  }

  /** The signals a request that changes the bucket runs under. */
  #writeSignals(deadline: AbortSignal): AbortSignal {
    const signals = [deadline, this.#runAbort.signal];
    const lease = this.#lease;
    if (lease !== null) {
      if (this.#leaseDropped || lease.isLost())
        throw new WriteFencedError(
          'the bucket lease was lost; this worker no longer writes to the bucket',
        );
      if (!lease.mayWrite())
        throw new WriteFencedError(
          'the bucket lease was not renewed in time; writes are stopped until it is',
        );
      signals.push(lease.signal);
      if (this.#leaseDrop) signals.push(this.#leaseDrop.signal);
    }
    return AbortSignal.any(signals);
  }

  /** Spend one request of the test hook's budget. */
  #spendWrite(): void {
    if (this.#writeBudget === null) return;
    if (this.#writeBudget <= 0) throw new SimulatedCrashError();
    this.#writeBudget -= 1;
  }

  /** Runs `request` under the operation deadline (and, for writes, the fence); rethrows an abort as its reason. */
  async #request<T>(
    operation: string,
    write: boolean,
    request: (signal: AbortSignal, rearm: () => void) => Promise<T>,
  ): Promise<T> {
    const deadline = this.#deadline(operation);
    try {
      const signal = write
        ? this.#writeSignals(deadline.signal)
        : AbortSignal.any([deadline.signal, this.#runAbort.signal]);
      try {
        return await request(signal, deadline.rearm);
      } catch (error) {
        if (signal.aborted) {
          const reason: unknown = signal.reason;
          if (BackupError.isInstance(reason)) throw reason;
          throw new WriteFencedError(`${operation} was aborted: ${messageOf(reason)}`, {
            cause: error,
          });
        }
        throw error;
      }
    } finally {
      deadline.cancel();
    }
  }

  /** A PUT with `mode`, spending the budget; the conditional modes fall back to overwrite where the store cannot do them or conditional writes are off. */
  async #putConditional(
    key: string,
    body: Uint8Array,
    mode: 'create' | { ifMatch: ObjectVersion },
  ): Promise<ObjectVersion> {
    const effective = this.#conditional ? mode : 'overwrite';
    this.#spendWrite();
    try {
      return (
        await this.#request(`PUT ${key}`, true, (signal) =>
          this.#store.put(key, body, { mode: effective, signal }),
        )
      ).version;
    } catch (error) {
      if (!NotImplementedError.isInstance(error)) throw error;
      this.#spendWrite();
      return (
        await this.#request(`PUT ${key}`, true, (signal) =>
          this.#store.put(key, body, { mode: 'overwrite', signal }),
        )
      ).version;
    }
  }

  /** An immutable object, create-if-absent; one already there is accepted only with the same CRC. */
  async #putImmutable(key: string, body: Uint8Array, crc32: string): Promise<void> {
    try {
      await this.#putConditional(key, body, 'create');
    } catch (error) {
      if (!AlreadyExistsError.isInstance(error) && !ConflictError.isInstance(error)) throw error;
      const existing = await this.#get(key);
      if (existing !== null && crc32Hex(existing.body) === crc32) return;
      throw this.#conflict(`${key} already exists with other content`, key, error);
    }
  }

  /**
   * Stream a snapshot or archive to `key` in bounded memory; return its
   * entry. The key carries a generation this worker allocated, so one already
   * there is another writer's: checked absent first, and created
   * conditionally at completion where the store can. The deadline applies to
   * progress: it is re-armed at every chunk.
   */
  async #putFile(
    file: OpenedFile,
    key: string,
    countFrames: boolean,
    frames: number,
  ): Promise<FileEntry> {
    if (
      (await this.#request(`HEAD ${key}`, false, (signal) => this.#store.head(key, { signal }))) !==
      null
    )
      throw this.#conflict(`${key} already exists`, key);
    this.#spendWrite();
    const crc = new Crc32();
    const counter = countFrames ? this.#source.frameCounter() : null;
    let size = 0;
    const mode =
      this.#conditional && this.#store.capabilities.multipartCreate ? 'create' : 'overwrite';
    try {
      await this.#request(`upload ${key}`, true, (signal, rearm) => {
        async function* body(): AsyncIterable<Uint8Array> {
          for await (const chunk of file.read({ signal })) {
            crc.update(chunk);
            counter?.push(chunk);
            size += chunk.byteLength;
            rearm();
            yield chunk;
          }
        }
        return this.#store.upload(key, body(), {
          mode,
          signal,
          ...(this.#partSize === undefined ? {} : { partSize: this.#partSize }),
        });
      });
    } catch (error) {
      if (AlreadyExistsError.isInstance(error) || ConflictError.isInstance(error))
        throw this.#conflict(`${key} appeared during the upload`, key, error);
      throw error;
    }
    return {
      name: file.name,
      key,
      size,
      crc32: crc.hex(),
      frames: counter ? counter.frames : frames,
      lineage: this.#ownLineage(),
    };
  }

  async #get(key: string): Promise<{ body: Uint8Array; version: ObjectVersion } | null> {
    return this.#request(`GET ${key}`, false, (signal) => this.#store.get(key, { signal }));
  }

  /**
   * Reads an object of the bucket that this worker does not trust to be
   * small (LATEST, manifests): at most `limit` bytes are read; `'too-large'`
   * past that.
   */
  async #getCapped(
    key: string,
    limit: number,
  ): Promise<{ body: Uint8Array; version: ObjectVersion } | null | 'too-large'> {
    const found = await this.#request(`GET ${key}`, false, (signal) =>
      getCapped(this.#store, key, limit, { signal }),
    );
    return found !== null && isTooLarge(found) ? 'too-large' : found;
  }

  async #delete(key: string): Promise<void> {
    this.#spendWrite();
    await this.#request(`DELETE ${key}`, true, (signal) => this.#store.delete(key, { signal }));
  }

  async #list(prefix: string, delimiter?: string) {
    this.#lists += 1;
    return this.#request(`LIST ${prefix}`, false, (signal) =>
      this.#store.list(prefix, delimiter === undefined ? { signal } : { delimiter, signal }),
    );
  }
}
