/**
 * The backup worker: runs its parts (tenure.ts, requests.ts, lease-holder.ts,
 * shipper.ts, manifest-writer.ts, shutdown-report.ts) as a loop of steps,
 * with resume, lineage, flush and health. It sees the engine only through a
 * {@link BackupSource}; the bucket stays restorable by the order of its
 * writes. All rules: package README (Guarantees and limits).
 */
import type { BackupSource, DurablePosition } from '@x/engine';
import { type Clock, DEFAULT_TTL_S, newInstanceId, systemClock } from '@x/lease';
import {
  type Manifest,
  parseArchiveKey,
  parseArchiveName,
  parseSegmentGenerationPrefix,
  parseVersionedGeneration,
} from '@x/manifest';
import { LogCompaction } from './compaction.ts';
import { compactionLevelsProblem } from './compaction-plan.ts';
import type { WorkerContext } from './context.ts';
import { encryptionOptionsProblem, invalidEncryption } from './encryption-options.ts';
import { BackupError, messageOf, ShutdownAbandonedError, WorkerPanicError } from './errors.ts';
import { continueGeneration } from './generation-continuation.ts';
import {
  type BackupHealth,
  FIRST_BACKOFF_MS,
  HealthTracker,
  keyOf,
  MAX_BACKOFF_MS,
  sameWalKey,
} from './health.ts';
import { LatestUnusableError } from './latest-repair.ts';
import { LeaseHolder } from './lease-holder.ts';
import { decideLineage } from './lineage-decision.ts';
import { ManifestWriter } from './manifest-writer.ts';
import { ObjectKeys } from './object-keys.ts';
import { Requests } from './requests.ts';
import { retentionPolicy } from './retention-plan.ts';
import { Shipper } from './shipper.ts';
import { UnrestorableCommits } from './shutdown-report.ts';
import { decideSnapshot } from './snapshot-schedule.ts';
import { SourceSlot } from './source-slot.ts';
import { chainBytes, Tenure } from './tenure.ts';
import { Triggers } from './triggers.ts';
import { unchangedBetween } from './unchanged-between.ts';
import type { WorkerCallbacks } from './worker-callbacks.ts';
import {
  type BackupHandle,
  type BackupLogger,
  type BackupWorkerOptions,
  DEFAULT_COMPACTION_LEVELS_MS,
  DEFAULT_MANIFEST_INTERVAL_MS,
  DEFAULT_MAX_SEGMENT_BYTES,
  DEFAULT_OPERATION_TIMEOUT_MS,
  DEFAULT_SHUTDOWN_GRACE_MS,
  DEFAULT_SNAPSHOT_INTERVAL_MS,
  DEFAULT_SNAPSHOT_LOG_FACTOR,
  DEFAULT_WAL_INTERVAL_MS,
  type ShutdownReport,
  silentLogger,
  type WorkerHooks,
} from './worker-options.ts';

export class BackupWorker {
  readonly #prefix: string;
  readonly #source: SourceSlot;
  readonly #clock: Clock;
  readonly #logger: BackupLogger;
  readonly #walIntervalMs: number;
  readonly #shutdownGraceMs: number;
  readonly #snapshotIntervalMs: number;
  readonly #snapshotLogFactor: number;
  readonly #instanceId: string;
  readonly #hooks: WorkerHooks | undefined;
  readonly #health: HealthTracker;
  readonly #requests: Requests;
  readonly #lease: LeaseHolder;
  readonly #writer: ManifestWriter;
  readonly #shipper: Shipper;
  readonly #compaction: LogCompaction;
  readonly #context: WorkerContext;
  readonly #unrestorable: UnrestorableCommits;

  /** What this worker knows about the bucket; a new lease tenure replaces it. */
  #tenure = new Tenure();
  #backoffMs = FIRST_BACKOFF_MS;
  #refused: BackupError | null = null;
  /** Aborted when a shutdown abandons what is in flight. */
  #runAbort = new AbortController();
  #graceOver = false;
  #started = false;
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
    const keys = objectKeysOf(options);
    const store = options.store;
    this.#prefix = options.prefix;
    this.#source = new SourceSlot(options.source, options.openSource);
    this.#clock = options.clock ?? systemClock;
    this.#logger = options.logger ?? silentLogger;
    this.#walIntervalMs = options.walIntervalMs ?? DEFAULT_WAL_INTERVAL_MS;
    const manifestIntervalMs = options.manifestIntervalMs ?? DEFAULT_MANIFEST_INTERVAL_MS;
    const conditional = options.conditional ?? true;
    const operationTimeoutMs = options.operationTimeoutMs ?? DEFAULT_OPERATION_TIMEOUT_MS;
    this.#shutdownGraceMs = options.shutdownGraceMs ?? DEFAULT_SHUTDOWN_GRACE_MS;
    this.#snapshotIntervalMs = options.snapshotIntervalMs ?? DEFAULT_SNAPSHOT_INTERVAL_MS;
    this.#snapshotLogFactor = options.snapshotLogFactor ?? DEFAULT_SNAPSHOT_LOG_FACTOR;
    this.#instanceId = options.instanceId ?? newInstanceId();
    this.#hooks = options.hooks;
    this.#health = new HealthTracker(this.#walIntervalMs, manifestIntervalMs);
    this.#unrestorable = new UnrestorableCommits(this.#clock, this.#health);
    const callbacks = this.#callbacks();
    this.#requests = new Requests({
      store,
      clock: this.#clock,
      operationTimeoutMs,
      conditional,
      partSize: options.partSize,
      hooks: options.hooks,
      callbacks,
    });
    this.#lease = new LeaseHolder({
      store,
      prefix: this.#prefix,
      instanceId: this.#instanceId,
      ...(options.leaseOwnRecord ? { ownRecord: options.leaseOwnRecord } : {}),
      ttlSeconds: options.leaseTtlSeconds ?? DEFAULT_TTL_S,
      conditional,
      operationTimeoutMs,
      clock: this.#clock,
      logger: this.#logger,
      health: this.#health,
      requests: this.#requests,
      callbacks,
    });
    const ctx = this.#sharedContext(callbacks, keys);
    this.#context = ctx;
    const retention = retentionPolicy(options);
    this.#writer = new ManifestWriter(ctx, retention);
    this.#shipper = new Shipper(ctx, this.#writer, {
      maxSegmentBytes: options.maxSegmentBytes ?? DEFAULT_MAX_SEGMENT_BYTES,
      manifestIntervalMs,
    });
    const levelsMs = options.compactionLevels ?? DEFAULT_COMPACTION_LEVELS_MS;
    const levelsProblem = compactionLevelsProblem(levelsMs);
    if (levelsProblem !== undefined)
      throw new BackupError(`invalid compactionLevels: ${levelsProblem}`);
    this.#compaction = new LogCompaction(ctx, {
      levelsMs,
      exactWindowMs: retention.exactWindowMs,
    });
  }

  /** What the worker's parts call back into it for. */
  #callbacks(): WorkerCallbacks {
    return {
      runSignal: () => this.#runAbort.signal,
      writeFence: () => this.#lease.writeFence(),
      conflict: (what, key, cause) => this.#lease.conflict(what, key, cause),
      started: () => this.#started,
      leaseFailed: (error) =>
        this.#abandonedByStop() ? this.#abandoned(error) : this.#failed(error),
      newTenure: () => {
        // Forget everything known about the bucket: another writer may have changed it.
        this.#tenure = new Tenure();
        this.#health.shipped = null;
      },
      defer: (why) => this.#defer(why),
      segmentStored: (key, bytes) => this.#compaction.remember(key, bytes),
    };
  }

  /** What the parts share during a step; `source`, `tenure` and the lease generation read live. */
  #sharedContext(callbacks: WorkerCallbacks, keys: ObjectKeys): WorkerContext {
    const worker = this;
    return {
      prefix: this.#prefix,
      keys,
      get source() {
        return worker.#source.required;
      },
      clock: this.#clock,
      logger: this.#logger,
      health: this.#health,
      requests: this.#requests,
      get tenure() {
        return worker.#tenure;
      },
      get leaseGeneration() {
        return worker.#lease.generation;
      },
      callbacks,
    };
  }

  /** The instance id this worker takes the lease under, the same for every attempt. */
  get instanceId(): string {
    return this.#instanceId;
  }

  /** Current health and counters. */
  health(): BackupHealth {
    return this.#health.snapshot();
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
    const triggers = new Triggers(this.#clock);

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

    const done = this.#run(triggers).then(
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
      trigger: (kind) => triggers.trigger(kind),
      shutdown: async () => {
        triggers.trigger('shutdown');
        await finished;
        const heldLease = this.#lease.tenures > 0;
        if (this.#shutdownReport !== null) return this.#shutdownReport;
        if (this.#refused !== null)
          return this.#unrestorable.refused(
            heldLease,
            this.#refused.reason ?? this.#refused.message,
          );
        return this.#unrestorable.unknown(heldLease, this.#health.lastError);
      },
      done: finished,
    };
  }

  /** The run loop: take the lease, step, wait; until a shutdown, a refusal or a panic. */
  async #run(triggers: Triggers): Promise<void> {
    const { shutdownSignal } = triggers;
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
        if (delay > 0) await triggers.sleep(delay);
        if (triggers.shutdownRequested) break;
        if (!this.#lease.holds()) {
          // A source opened for the last tenure goes with its lease.
          await this.#source.closeOpened(this.#logger);
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
      await this.#lease.release();
      await this.#source.closeOpened(this.#logger);
      throw error;
    }
    if (this.#refused) {
      // The prefix is not ours: give the lease back so its owner is not kept
      // out, and idle, unhealthy, until shutdown.
      await this.#lease.release();
      await this.#source.closeOpened(this.#logger);
      await shutdownSignal;
      return;
    }
    // Assigned by `untilShutdown` (a closure): not narrowed here.
    await this.#stop(inFlight as Promise<unknown> | null);
  }

  /**
   * Shutdown. A step blocked on an unresponsive bucket must not hold up the
   * shutdown: its requests are abandoned at once (their signal aborted).
   * The flush then gets the grace window, at whose end whatever is still in
   * flight is abandoned too. Then the report, then the release.
   */
  async #stop(pending: Promise<unknown> | null): Promise<void> {
    const graceEnds = new Promise<void>((resolve) => {
      this.#clock.setTimer(this.#shutdownGraceMs, () => {
        this.#graceOver = true;
        this.#runAbort.abort(
          new ShutdownAbandonedError('abandoned: the shutdown grace period ended'),
        );
        resolve();
      });
    });
    // No compaction from here on; one in flight ends at once (its request aborted).
    this.#compaction.stop();
    if (pending) {
      this.#runAbort.abort(new ShutdownAbandonedError('abandoned: the worker is shutting down'));
      // Its state changes must be over before the flush starts from them.
      await Promise.race([pending, graceEnds]);
      if (!this.#graceOver) this.#runAbort = new AbortController();
    }
    await Promise.race([this.#compaction.settle(), graceEnds]);
    // A stop without the lease still makes what is captured restorable when
    // the lease is free: one attempt, inside the grace period. That covers a
    // stop before the lease was ever held (an application that created its
    // database and exited at once, a first boot) and one after it was lost
    // to an instance that has since released it. A lease this worker still
    // thought it held may turn out lost during the flush (a renewal finds a
    // successor's record): then one more attempt. A standby (the lease held
    // elsewhere) does not flush: the holder backs the database up.
    let flushed = false;
    for (let attempt = 0; attempt < 2 && !this.#refused && !this.#graceOver; attempt += 1) {
      if (!this.#lease.holds()) await Promise.race([this.#lease.take(), graceEnds]);
      if (!this.#lease.holds() || this.#graceOver) break;
      flushed = await Promise.race([this.flush().then(() => true), graceEnds.then(() => false)]);
      if (this.#lease.holds()) break;
    }
    // Abandoned: the grace period ended, after a tenure, before a flush
    // finished (or could start). The capture may not have reached what is
    // on disk, so the counts alone cannot make this stop complete.
    const flushAbandoned = !flushed && this.#graceOver && this.#lease.tenures > 0;
    if (flushAbandoned) {
      this.#health.errorCount += 1;
      this.#logger.warn('backup.flush_abandoned', { graceMs: this.#shutdownGraceMs });
    }
    if (!this.#runAbort.signal.aborted)
      this.#runAbort.abort(new ShutdownAbandonedError('abandoned: the worker stopped'));
    this.#shutdownReport = await this.#reportShutdown(flushAbandoned);
    await this.#lease.release();
    await this.#source.closeOpened(this.#logger);
  }

  async #reportShutdown(flushAbandoned: boolean): Promise<ShutdownReport> {
    const heldLease = this.#lease.tenures > 0;
    const holder = this.#lease.holds() ? null : this.#lease.keptOutBy;
    if (holder !== null) return this.#unrestorable.handedOver(heldLease, holder, this.#logger);
    const lastError = this.#health.lastError;
    // Never held, and no holder seen: nothing of this run is in the bucket.
    if (!heldLease)
      return this.#unrestorable.neverHeld(await this.#position(), lastError, this.#logger);
    const captured = this.#stopGoalCommits ?? (await this.#position())?.commitCount ?? null;
    const facts = { heldLease, flushAbandoned, lastError };
    return this.#unrestorable.report(facts, captured, this.#logger);
  }

  /**
   * The open source's position; `null` with none open (it opens with the
   * lease) or when it cannot be read (logged: health still runs, and without
   * a position lag cannot grow, but every other reason is evaluated).
   */
  async #position(): Promise<DurablePosition | null> {
    const source = this.#source.current;
    try {
      return source === null ? null : await source.durablePosition();
    } catch (error) {
      this.#logger.warn('backup.position_failed', { error: messageOf(error) });
      return null;
    }
  }

  async #evaluate(): Promise<void> {
    const position = await this.#position();
    this.#health.observe(position, this.#clock.monotonicNow(), this.#clock.wallNow());
    this.#unrestorable.note(position?.commitCount);
  }

  /** Try to take the lease: `null` once held, otherwise how long to wait before trying again. */
  async #takeLease(): Promise<number | null> {
    const wait = await this.#lease.take();
    await this.#evaluate();
    return wait;
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
      // A planned stop cut the step short: the flush that follows ships it.
      if (this.#abandonedByStop()) return this.#abandoned(error);
      delay = this.#failed(error);
    }
    await this.#evaluate();
    return delay;
  }

  /**
   * Whether the step ended because the worker is stopping: its requests were
   * aborted on purpose, so whatever it threw is that abort, not a failure.
   */
  #abandonedByStop(): boolean {
    const signal = this.#runAbort.signal;
    return signal.aborted && ShutdownAbandonedError.isInstance(signal.reason);
  }

  /** A step or lease attempt the stop cut short: no failure, nothing to wait for. */
  #abandoned(error: unknown): number {
    this.#logger.info('backup.step_abandoned', { reason: messageOf(error) });
    return 0;
  }

  /** Count a failed step or lease attempt; return the back-off to wait. */
  #failed(error: unknown): number {
    this.#health.errorCount += 1;
    this.#health.consecutiveFailures += 1;
    this.#health.lastError = messageOf(error);
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
    const source = await this.#source.ensureOpen({ signal: this.#runAbort.signal });
    // A stop before the tenure's first step: that step decides whether this
    // run continues the bucket's generation, which sets the commit count the
    // goal is counted in. A failure here is retried below.
    if (this.#tenure.current === null) {
      try {
        await this.runOnce();
      } catch (error) {
        if (WorkerPanicError.isInstance(error)) throw error;
      }
    }
    await source.catchUp();
    await source.observe();
    const goal = await source.durablePosition();
    this.#stopGoalCommits = goal.commitCount;
    for (let attempt = 0; attempt < 3; ) {
      try {
        const before = this.#tenure.current?.inRestorePoint;
        await this.runOnce();
        await this.#shipper.writeManifest();
        await this.#evaluate();
        if (this.#restorable(goal) || this.#tenure.current === null) {
          // The source learns that the final restore point holds all it
          // shipped (a SQLite source records it for its next start).
          await source.afterStep?.(this.#shipper.progress(), { signal: this.#runAbort.signal });
          return;
        }
        // Deferred (the engine was busy): try again shortly, until the
        // grace period ends.
        if (this.#tenure.current.inRestorePoint === before)
          await new Promise<void>((resolve) =>
            this.#clock.setTimer(Math.min(this.#walIntervalMs, 250), resolve),
          );
      } catch (error) {
        // A lost lease is not retried here: the stop decides what follows.
        if (
          WorkerPanicError.isInstance(error) ||
          this.#refused ||
          this.#runAbort.signal.aborted ||
          !this.#lease.holds()
        )
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
    const generation = this.#tenure.current;
    if (generation === null) return false;
    if (!sameWalKey(generation.key, keyOf(position))) return !this.#tenure.manifestDirty;
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
   * @throws BackupError (`LINEAGE_REFUSED` at every call once the prefix is
   *   refused; `WRITER_CONFLICT`, `OPERATION_TIMEOUT`, `WRITE_FENCED`);
   *   SimulatedCrashError and WorkerPanicError (test hooks); store and
   *   source errors.
   */
  async runOnce(): Promise<void> {
    this.#hooks?.beforeStep?.();
    if (this.#refused) throw this.#refused;
    const source = await this.#source.ensureOpen({ signal: this.#runAbort.signal });
    let failure: unknown = null;
    try {
      await this.#stepInner();
      await this.#scheduleSnapshot(source);
    } catch (error) {
      failure = error;
    }
    if (source.afterStep) {
      try {
        await source.afterStep(this.#shipper.progress(), { signal: this.#runAbort.signal });
      } catch (error) {
        if (failure === null) failure = error;
        else this.#logger.warn('backup.after_step_failed', { error: messageOf(error) });
      }
    }
    if (failure !== null) throw failure;
  }

  /**
   * A scheduled snapshot: once `decideSnapshot` says the current generation
   * is due and may switch, ask the source for a new generation; the next
   * step ships its snapshot.
   */
  async #scheduleSnapshot(source: BackupSource): Promise<void> {
    const tenure = this.#tenure;
    const generation = tenure.current;
    if (!source.startGeneration || generation === null || this.#refused) {
      tenure.snapshotWait = { ...tenure.snapshotWait, awaitsCompaction: false };
      return;
    }
    const position = await source.durablePosition();
    const decision = decideSnapshot(tenure.snapshotWait, {
      generation: generation.number,
      startedAt: generation.startedAt,
      now: this.#clock.wallNow(),
      intervalMs: this.#snapshotIntervalMs,
      shippedBytes: chainBytes(generation),
      databaseBytes: position.engine?.databaseBytes ?? null,
      logFactor: this.#snapshotLogFactor,
      sameWal: sameWalKey(generation.key, keyOf(position)),
      inRestorePoint: generation.inRestorePoint === generation.cursor,
      backlogBytes: position.durableLength - generation.cursor,
      compactionUnnamed: this.#compaction.busy || tenure.manifestDirty,
    });
    tenure.snapshotWait = decision.wait;
    if (!decision.start) return;
    this.#logger.info('backup.snapshot_scheduled', {
      walGeneration: generation.number,
      reason: decision.reason,
      ...(decision.backlogBytes === 0 ? {} : { uncaughtBytes: decision.backlogBytes }),
    });
    await source.startGeneration({ signal: this.#runAbort.signal });
  }

  async #stepInner(): Promise<void> {
    if (!this.#tenure.resumed && !(await this.#resume())) {
      this.#defer("the store's commit count is not known yet");
      return;
    }
    let disk = await this.#source.required.observe();
    if (disk.intentPending === true) {
      this.#defer('a snapshot is in progress (the snapshot intent is not empty)');
      return;
    }
    let position = await this.#source.required.durablePosition();
    // The disk differs from the engine's position: another process
    // snapshotted, replaced or extended the WAL. Let the engine catch up —
    // the intent was empty just now — and keep the result only if the disk
    // held still across it.
    if (
      position.snapshot !== disk.snapshot ||
      position.wal !== disk.wal ||
      disk.walLength !== position.durableLength
    ) {
      await this.#source.required.catchUp();
      const after = await this.#source.required.observe();
      if (!unchangedBetween(disk, after)) {
        this.#defer("the store's files changed while catching up");
        return;
      }
      disk = after;
      position = await this.#source.required.durablePosition();
    }
    if (position.snapshotInProgress === true) {
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
    // A compaction that finished since the last step: its object replaces
    // its run in the chain (the next restore point names it).
    const compacted = this.#compaction.applyFinished();
    if (
      this.#tenure.current === null &&
      !this.#tenure.continuationOffered &&
      this.#source.required.continueGeneration !== undefined
    ) {
      // Once per tenure: a restart whose database is exactly the newest
      // restore point's state continues its generation (no new snapshot).
      this.#tenure.continuationOffered = true;
      if (
        await continueGeneration(this.#context, this.#tenure.latestManifest, this.#runAbort.signal)
      )
        position = await this.#source.required.durablePosition();
    }
    if (!sameWalKey(this.#tenure.current?.key, keyOf(position))) {
      await this.#shipper.uploadBase(position, disk);
      return;
    }
    await this.#shipper.shipSegments();
    // None while a scheduled snapshot's switch waits for the one in flight.
    if (!this.#tenure.snapshotWait.awaitsCompaction)
      this.#compaction.startDue(position.engine?.databaseBytes ?? null);
    // A due snapshot waits for a restore point of everything shipped, and a
    // merge the bytes rule made keeps a database-sized run alive until one
    // names it: write it now rather than at the interval.
    if (
      this.#shipper.manifestDue() ||
      (this.#tenure.manifestDirty &&
        (this.#tenure.snapshotWait.dueSteps > 0 || compacted === 'bytes'))
    )
      await this.#shipper.writeManifest();
  }

  // ── Resume and lineage ────────────────────────────────────────────────────

  /**
   * Read what a previous run left in the bucket — so no generation number is
   * reused and no archive the latest manifest names is uploaded again — and
   * check the prefix is this store's lineage. `false`: not decidable yet.
   */
  async #resume(): Promise<boolean> {
    // No restore point to resume from (LATEST unusable, nothing to heal it with): permanent.
    const latest = await this.#writer.readLatest().catch((error: unknown) => {
      throw LatestUnusableError.isInstance(error)
        ? this.#refuse(error.message, 'prefix-unusable')
        : error;
    });
    const local = await this.#source.required.readLineage();
    const parent = await this.#source.required.readParent();
    const facts = { latest, latestTarget: this.#tenure.latestTarget, local, parent };
    let decision = decideLineage(facts);
    if (decision.kind === 'needs-commit-count')
      decision = decideLineage({
        ...facts,
        commitCount: (await this.#source.required.durablePosition()).commitCount,
      });
    let lineage: string;
    switch (decision.kind) {
      case 'refuse':
        throw this.#refuse(decision.reason);
      case 'needs-commit-count':
      case 'undecidable':
        return false;
      case 'continue':
        lineage = decision.lineage;
        break;
      case 'create':
        // Another replica of this store may have created the lineage since
        // it was read: createLineage keeps the first one recorded, so this
        // prefix takes what is recorded, not the id proposed here.
        await this.#source.required.createLineage(newInstanceId());
        lineage = await this.#recordedLineage();
        this.#logger.info(
          'backup.new_lineage',
          decision.adopt ? { lineage, parent: parent?.lineage ?? '' } : { lineage },
        );
        break;
    }
    if (decision.adopt)
      this.#logger.info('backup.adopting_prefix', { lineage, parent: parent?.lineage ?? '' });
    this.#tenure.parentLineage = parent?.lineage ?? null;
    this.#tenure.latestManifest = latest;
    await this.#scanBucket(latest, lineage);
    this.#tenure.lineage = lineage;
    this.#tenure.resumed = true;
    return true;
  }

  /** The lineage the source holds right after creating one. */
  async #recordedLineage(): Promise<string> {
    const recorded = await this.#source.required.readLineage();
    if (recorded === null)
      throw this.#refuse('the source recorded no lineage right after creating one');
    return recorded;
  }

  /**
   * Learn the generation numbers in use (so none is reused) and the
   * archives LATEST's restore point names (so they are not uploaded again).
   * Three LISTs, with a delimiter: `wal/` is never listed whole.
   */
  async #scanBucket(latest: Manifest | null, lineage: string): Promise<void> {
    const prefix = this.#prefix;
    const list = (folder: string) => this.#requests.list(`${prefix}/${folder}/`, '/');
    const generations = new Set<number>();
    const add = (g: number | undefined): void => {
      if (g !== undefined) generations.add(g);
    };
    for (const common of (await list('wal')).commonPrefixes)
      add(parseSegmentGenerationPrefix(prefix, common));
    for (const object of (await list('snapshots')).objects)
      add(parseVersionedGeneration(prefix, object.key));
    for (const common of (await list('archives')).commonPrefixes) {
      const name = common.slice(`${prefix}/archives/`.length).replace(/\/$/, '');
      if (/^\d+$/.test(name)) add(Number(name));
    }
    let highest = -1;
    for (const g of generations) highest = Math.max(highest, g);
    if (latest !== null) {
      highest = Math.max(highest, latest.walGeneration);
      // Another lineage's archives are never reused: a restore point names
      // only its own lineage's objects.
      if (latest.lineage === lineage)
        for (const file of latest.files) {
          const n = parseArchiveName(file.name);
          // A sealed archive's stored size is not the file's: known once opened.
          const raw = parseArchiveKey(prefix, file.key)?.layout === 'raw';
          if (n !== undefined)
            this.#tenure.archives.set(n, {
              length: raw ? file.size : null,
              entry: file,
              verified: false,
            });
        }
    }
    this.#tenure.generations = generations;
    this.#tenure.nextGeneration = highest + 1;
  }

  /** Refuse the prefix for the life of this worker. */
  #refuse(why: string, kind: 'lineage' | 'prefix-unusable' = 'lineage'): BackupError {
    this.#logger.error('backup.prefix_refused', { reason: why });
    this.#health.lineage = why;
    this.#health.lineageRefusalKind = kind;
    this.#refused = new BackupError(why, { code: 'LINEAGE_REFUSED', reason: why });
    return this.#refused;
  }
}

/** The keys of the worker's objects, from a checked `encryption` option. */
function objectKeysOf(options: BackupWorkerOptions): ObjectKeys {
  const { encryption } = options;
  if (encryption === undefined) return new ObjectKeys(undefined);
  const problem = encryptionOptionsProblem(encryption);
  if (problem !== undefined) throw invalidEncryption(problem);
  return new ObjectKeys(encryption);
}
