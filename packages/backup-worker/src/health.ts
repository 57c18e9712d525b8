/**
 * Health: lag, counters and a reason, computed from the engine's durable
 * position and what has shipped.
 *
 * Unhealthy, always with a reason, when (first match wins): the worker has
 * stopped (for good), it refused the prefix (lineage), a lease keeps it out,
 * {@link UNHEALTHY_AFTER_FAILURES} consecutive steps failed, durable data
 * waited unshipped longer than `max(30 s, 10 × WAL interval)`, or captured
 * commits waited for a restore point longer than that limit plus two
 * restore-point intervals (the worker is behind the application: it says so,
 * with how far).
 */

/** Consecutive failed steps after which the worker reports itself unhealthy. */
export const UNHEALTHY_AFTER_FAILURES = 3;
/** First retry delay after a failure; doubles per failure up to {@link MAX_BACKOFF_MS}. */
export const FIRST_BACKOFF_MS = 1_000;
/** Longest retry delay. */
export const MAX_BACKOFF_MS = 60_000;
/** The shortest lag that makes the worker unhealthy. */
export const MIN_UNHEALTHY_LAG_MS = 30_000;

/** A snapshot of the worker's health and counters. */
export interface BackupHealth {
  readonly healthy: boolean;
  /** Why it is unhealthy; once stopped, why it stopped (`"stopped"`, or the panic). `null` while healthy. */
  readonly reason: string | null;
  /** Failed steps, lease attempts and renewals since start. */
  readonly errorCount: number;
  /** Wall-clock ms of the last evaluation that found everything durable shipped; `null` before the first. */
  readonly lastSuccessAt: number | null;
  /** Seconds the oldest durable, unshipped WAL byte has waited (whole seconds); 0 when all is shipped. */
  readonly lagSeconds: number;
  /** Whether this worker holds the bucket lease right now. */
  readonly leaseHeld: boolean;
  /** Durable WAL bytes of the current generation not shipped yet (0 before a position is known). */
  readonly unshippedBytes: number;
  /**
   * Durable commits newer than the restore point LATEST names: captured, not
   * yet restorable. 0 while either count is unknown.
   */
  readonly unrestorableCommits: number;
  /**
   * The restore point LATEST names, as this worker last wrote or read (and
   * checked) it, with the manifest's `createdAt` when known; `null` before it
   * knows one.
   */
  readonly latestRestorePoint: LatestRestorePoint | null;
  /**
   * The oldest restore point of this lineage kept by the last retention pass:
   * with the latest, the restorable window (commits `restorableFrom` to the
   * latest's `commitSeq`); `null` before a pass ran.
   */
  readonly oldestRestorePoint: OldestRestorePoint | null;
  /** The error of the last failed step or lease attempt while failures continue; `null` after a success. */
  readonly lastError: string | null;
  /** Wall-clock ms of the last evaluation (the supervisor's, every WAL interval); `null` before the first. */
  readonly evaluatedAt: number | null;
  /** This lineage's restore points after the last retention pass; `null` before one ran (or with `retain: 0`). */
  readonly restorePoints: number | null;
  /**
   * A refusal that no retry of this worker can clear, while it stands: the
   * prefix belongs to another lineage (permanent for this worker), or the
   * service ignores preconditions (the worker re-probes every
   * `MAX_BACKOFF_MS`, and clears this once a probe passes). A process that
   * judges by exit code should stop on it; `null` otherwise.
   */
  readonly refusal: PermanentRefusal | null;
  /** The engine's files at the last evaluation (database and WAL size, checkpoints); `null` when the engine does not say or no source is open. */
  readonly engine: EngineFiles | null;
}

export interface LatestRestorePoint {
  readonly manifestKey: string;
  readonly commitSeq: number;
  /** The manifest's `createdAt` (RFC 3339). */
  readonly createdAt?: string;
}

export interface OldestRestorePoint {
  readonly commitSeq: number;
  /** The first commit it can restore to. */
  readonly restorableFrom: number;
  readonly createdAt: string;
}

/** See {@link BackupHealth.refusal}. */
export interface PermanentRefusal {
  /**
   * `lineage`: the prefix holds another database's backup; `prefix-unusable`:
   * no restore point in it reads and passes the checks (LATEST cannot be
   * repaired); `preconditions-ignored`: the service gives no exclusion.
   */
  readonly kind: 'lineage' | 'prefix-unusable' | 'preconditions-ignored';
  /** The same text as the health reason. */
  readonly reason: string;
}

/** The WAL a generation ships: engine generation plus snapshot and WAL identities. */
export interface WalKey {
  readonly engineGeneration: string;
  readonly snapshot: string | null;
  readonly wal: string | null;
}

/** The identity of the WAL a position is on. */
export function keyOf(position: WalKey): WalKey {
  return {
    engineGeneration: position.engineGeneration,
    snapshot: position.snapshot,
    wal: position.wal,
  };
}

export function sameWalKey(a: WalKey | null | undefined, b: WalKey | null | undefined): boolean {
  if (!a || !b) return false;
  return a.engineGeneration === b.engineGeneration && a.snapshot === b.snapshot && a.wal === b.wal;
}

/** The position fields health reads. */
export interface PositionForHealth extends WalKey {
  readonly durableLength: number;
  /** The engine's commit count, when it knows one. */
  readonly commitCount?: number | null;
  readonly engine?: EngineFiles;
}

function mebibytes(bytes: number): string {
  return `${(bytes / (1024 * 1024)).toFixed(1)} MiB`;
}

/** Shared by the worker and its supervisor; every method is synchronous (no interleaving). */
export class HealthTracker {
  readonly #limitMs: number;
  shipped: { key: WalKey; cursor: number } | null = null;
  consecutiveFailures = 0;
  /** Why the last step did nothing, when it deferred. */
  deferral: string | null = null;
  /** Why a lease keeps this worker from uploading, while it does. */
  lease: string | null = null;
  /** Why the worker refused the prefix; permanent. */
  lineage: string | null = null;
  /** What kind of refusal {@link lineage} is. */
  lineageRefusalKind: 'lineage' | 'prefix-unusable' = 'lineage';
  /** Why the last lease attempt failed closed: the service ignores preconditions. Cleared when a lease is taken. */
  preconditionsIgnored: string | null = null;
  stopped: string | null = null;
  errorCount = 0;
  leaseHeld = false;
  #seen: { length: number; at: number }[] = [];
  #seenKey: WalKey | null = null;
  #baseDueSince: number | null = null;
  #lastSuccessAt: number | null = null;
  #lagSeconds = 0;
  #reason: string | null = null;
  #engine: EngineFiles | null = null;

  readonly #restorePointLimitMs: number;
  #unshippedBytes = 0;
  #unrestorableCommits = 0;
  /** When commits newer than the latest restore point were first seen (monotonic ms), while there are some. */
  #unrestorableSince: number | null = null;

  constructor(walIntervalMs: number, restorePointIntervalMs: number) {
    this.#limitMs = Math.max(MIN_UNHEALTHY_LAG_MS, 10 * walIntervalMs);
    this.#restorePointLimitMs = this.#limitMs + 2 * restorePointIntervalMs;
  }

  /**
   * Re-evaluate at monotonic `now` (and wall `wallNow`) against `position`.
   * The lag runs from the first evaluation that saw a durable length beyond
   * what shipped (evaluations run every interval, so at most one interval
   * after the fsync), or, while a new restore point is due, from when that
   * was first seen.
   */
  observe(position: PositionForHealth | null, now: number, wallNow: number): void {
    this.#engine = position?.engine ?? null;
    this.#evaluatedAt = wallNow;
    let lagMs = 0;
    this.#unshippedBytes = 0;
    // Success means everything durable of the WAL being shipped is in the
    // bucket; a restore point that is due (nothing shipped yet) is not.
    let caughtUp = false;
    if (position) {
      const shipped = this.shipped;
      if (shipped && sameWalKey(shipped.key, position)) {
        this.#baseDueSince = null;
        if (!sameWalKey(this.#seenKey, position)) {
          this.#seen = [];
          this.#seenKey = keyOf(position);
        }
        const last = this.#seen.at(-1)?.length ?? shipped.cursor;
        if (position.durableLength > last)
          this.#seen.push({ length: position.durableLength, at: now });
        while (this.#seen.length > 0 && this.#seen[0]!.length <= shipped.cursor) this.#seen.shift();
        const first = this.#seen[0];
        lagMs = first ? Math.max(0, now - first.at) : 0;
        caughtUp = first === undefined;
        this.#unshippedBytes = Math.max(0, position.durableLength - shipped.cursor);
      } else {
        this.#baseDueSince ??= now;
        lagMs = Math.max(0, now - this.#baseDueSince);
        this.#unshippedBytes = position.durableLength;
      }
      const restorable = this.latestRestorePoint?.commitSeq;
      const captured = position.commitCount;
      this.#unrestorableCommits =
        restorable === undefined || captured === null || captured === undefined
          ? 0
          : Math.max(0, captured - restorable);
      if (this.#unrestorableCommits === 0) this.#unrestorableSince = null;
      else this.#unrestorableSince ??= now;
    }
    const unrestorableMs = this.#unrestorableSince === null ? 0 : now - this.#unrestorableSince;
    if (caughtUp) this.#lastSuccessAt = wallNow;
    this.#lagSeconds = Math.floor(lagMs / 1000);
    let reason: string | null = null;
    if (this.stopped !== null) reason = this.stopped;
    else if (this.lineage !== null) reason = this.lineage;
    else if (this.lease !== null) reason = this.lease;
    else if (this.consecutiveFailures >= UNHEALTHY_AFTER_FAILURES)
      reason = `${this.consecutiveFailures} consecutive failed backup steps${this.lastError ? ` (last: ${this.lastError})` : ''}`;
    else if (lagMs > this.#limitMs)
      reason =
        this.deferral === null
          ? `durable data unshipped for ${this.#lagSeconds}s (${mebibytes(this.#unshippedBytes)} behind): backupd is not keeping up with the database's commits`
          : `durable data unshipped for ${this.#lagSeconds}s: ${this.deferral}`;
    else if (unrestorableMs > this.#restorePointLimitMs)
      reason = `${this.#unrestorableCommits} commits captured ${Math.floor(unrestorableMs / 1000)}s ago or later are in no restore point yet: backupd is behind the database's commits`;
    this.#reason = reason;
  }

  /** The worker is gone, for `why`: unhealthy from now on. */
  stop(why: string): void {
    this.stopped = why;
    this.leaseHeld = false;
    this.#reason = why;
  }

  /** Set by the worker whenever LATEST is written or read. */
  latestRestorePoint: LatestRestorePoint | null = null;
  oldestRestorePoint: OldestRestorePoint | null = null;
  /** Set by a failed step or lease attempt, cleared by a success. */
  lastError: string | null = null;
  #evaluatedAt: number | null = null;
  /** Set by the worker after each retention pass. */
  restorePoints: number | null = null;

  snapshot(): BackupHealth {
    return {
      latestRestorePoint: this.latestRestorePoint,
      oldestRestorePoint: this.oldestRestorePoint,
      lastError: this.consecutiveFailures > 0 ? this.lastError : null,
      evaluatedAt: this.#evaluatedAt,
      restorePoints: this.restorePoints,
      healthy: this.#reason === null,
      reason: this.#reason,
      errorCount: this.errorCount,
      lastSuccessAt: this.#lastSuccessAt,
      lagSeconds: this.#lagSeconds,
      leaseHeld: this.leaseHeld,
      unshippedBytes: this.#unshippedBytes,
      unrestorableCommits: this.#unrestorableCommits,
      refusal: this.#refusal(),
      engine: this.#engine,
    };
  }

  #refusal(): PermanentRefusal | null {
    if (this.lineage !== null) return { kind: this.lineageRefusalKind, reason: this.lineage };
    if (this.preconditionsIgnored !== null)
      return { kind: 'preconditions-ignored', reason: this.preconditionsIgnored };
    return null;
  }
}

import type { EngineFiles } from '@x/engine';
