/**
 * What a stop could not make restorable: the commits captured but in no
 * restore point `LATEST` names, and when they were first seen. The worker
 * notes the captured commit count at every health evaluation; a shutdown turns
 * it into a {@link ShutdownReport} and logs an incomplete one. Complete only
 * when the stop knows nothing committed was left out ({@link ShutdownShortfall};
 * docs/decisions/2026-12-05-honest-exit-from-every-state.md). Times are when a
 * count was first seen, not when it was committed. A source never opened
 * (`openSource`, no lease) is not looked at: its owner knows its files.
 */
import type { DurablePosition, EngineFiles } from '@x/engine';
import type { Clock } from '@x/lease';
import type { HealthTracker } from './health.ts';
import type { BackupLogger, ShutdownReport, ShutdownShortfall } from './worker-options.ts';

/** What the stop itself knows, beside the counts. */
export interface StopFacts {
  /** Whether this worker held the lease at any time. */
  readonly heldLease: boolean;
  /** The grace period ended before the final flush finished (or could start) under the lease. */
  readonly flushAbandoned: boolean;
  /** The last step or lease failure, for the log (`null`: none). */
  readonly lastError: string | null;
}

/** Bytes of the engine's files, for a log line. */
function sizes(engine: EngineFiles | null | undefined): string {
  if (!engine) return 'sizes unknown';
  const size = (bytes: number | null) => (bytes === null ? 'unknown' : `${bytes} bytes`);
  return `database ${size(engine.databaseBytes)}, WAL ${size(engine.walBytes)}`;
}

export class UnrestorableCommits {
  readonly #clock: Clock;
  readonly #health: HealthTracker;
  /**
   * Commit counts newer than LATEST's restore point, with the wall time each
   * was first seen, oldest first; pruned as restore points cover them.
   */
  readonly #seen: { commitCount: number; at: number }[] = [];

  constructor(clock: Clock, health: HealthTracker) {
    this.#clock = clock;
    this.#health = health;
  }

  /** Records when commit counts past LATEST's restore point were first seen; forgets covered ones. */
  note(captured: number | null | undefined): void {
    const restorable = this.#health.latestRestorePoint?.commitSeq ?? -1;
    const seen = this.#seen;
    let covered = 0;
    while (covered < seen.length && seen[covered]!.commitCount <= restorable) covered += 1;
    if (covered > 0) seen.splice(0, covered);
    if (captured === null || captured === undefined || captured <= restorable) return;
    if (captured > (seen.at(-1)?.commitCount ?? -1))
      seen.push({ commitCount: captured, at: this.#clock.wallNow() });
  }

  /**
   * The report when the count cannot be read (or the run ended without a
   * stop: a refusal, a panic): never complete, since what was left out is
   * not known.
   */
  unknown(heldLease: boolean, lastError: string | null = null): ShutdownReport {
    return {
      ...this.#nothingLeft(heldLease),
      complete: false,
      shortfall: heldLease ? 'count-unknown' : 'never-held-lease',
      lastError,
    };
  }

  /** The report of a run that refused its prefix for good (`why`): nothing reached it after the refusal. */
  refused(heldLease: boolean, why: string): ShutdownReport {
    return {
      ...this.#nothingLeft(heldLease),
      complete: false,
      shortfall: 'refused',
      lastError: why,
    };
  }

  /** A complete report's fields: nothing counted as left out. */
  #nothingLeft(heldLease: boolean): ShutdownReport {
    return {
      complete: true,
      unrestorableCommits: 0,
      restorableCommitSeq: this.#health.latestRestorePoint?.commitSeq ?? null,
      capturedCommitSeq: null,
      unrestorableSince: null,
      unrestorableUntil: null,
      heldLease,
    };
  }

  /**
   * The report when another instance held the lease at the stop: it backs
   * the same database up (the lineage check refuses any other), so what
   * this worker captured is that instance's to make restorable. Complete;
   * a worker that held the lease before says it handed over.
   *
   * Limit: the holder's own stop is what makes those commits restorable;
   * this worker does not wait for it.
   */
  handedOver(heldLease: boolean, holder: string, logger: BackupLogger): ShutdownReport {
    if (heldLease)
      logger.info('backup.shutdown_handed_over', {
        holder,
        restorableCommitSeq: this.#health.latestRestorePoint?.commitSeq ?? null,
        reason: `the lease is held by ${holder}, which backs this database up: what this instance captured is that instance's to make restorable`,
      });
    return { ...this.#nothingLeft(heldLease), leaseHeldBy: holder };
  }

  /**
   * The report of a stop that never held the lease, and no other instance
   * did either as far as it could tell (the bucket unreachable, the lease
   * write failing): nothing of this run reached the bucket. Complete only
   * when the open source holds nothing at all; `position` is `null` when no
   * source was open (it opens with the lease), and then the count is unknown.
   */
  neverHeld(
    position: DurablePosition | null,
    lastError: string | null,
    logger: BackupLogger,
  ): ShutdownReport {
    const empty =
      position !== null &&
      position.commitCount === 0 &&
      position.durableLength === 0 &&
      position.snapshot === null;
    if (empty) return { ...this.#nothingLeft(false), capturedCommitSeq: 0 };
    const captured = position?.commitCount ?? null;
    const report: ShutdownReport = {
      ...this.unknown(false, lastError),
      unrestorableCommits: captured ?? 0,
      capturedCommitSeq: captured,
      engine: position?.engine ?? null,
    };
    const never = `this instance never held the bucket's lease${lastError === null ? '' : ` (last error: ${lastError})`}: nothing reached the bucket in this run`;
    // Unread, the source may hold nothing: its owner, who knows its files, decides.
    if (captured === null)
      logger.warn('backup.shutdown_never_held', {
        lastError,
        reason: `${never}; what the source holds was not read (it opens with the lease)`,
      });
    else
      logger.error('backup.shutdown_incomplete', {
        shortfall: report.shortfall,
        unrestorableCommits: captured,
        capturedCommitSeq: captured,
        lastError,
        reason: `${never}; the ${captured} commits the source holds (${sizes(position?.engine)}) are in no restore point this run wrote`,
      });
    return report;
  }

  /**
   * Compares `captured` (what the stop set out to make restorable) with
   * LATEST's restore point, and logs what is missing. A held lease only: a
   * stop that never held it reports through {@link neverHeld}.
   */
  report(facts: StopFacts, captured: number | null, logger: BackupLogger): ShutdownReport {
    const { heldLease, flushAbandoned, lastError } = facts;
    if (!heldLease) return this.unknown(false, lastError);
    this.note(captured);
    const restorable = this.#health.latestRestorePoint?.commitSeq ?? null;
    const engine = this.#health.snapshot().engine;
    if (captured === null) {
      logger.error('backup.shutdown_unverified', {
        reason: 'the commit count could not be read: what this stop left unrestorable is not known',
        restorableCommitSeq: restorable,
        flushAbandoned,
      });
      return { ...this.unknown(true, lastError), engine };
    }
    const missing = Math.max(0, captured - (restorable ?? 0));
    const since = this.#seen[0]?.at ?? null;
    const until = this.#seen.at(-1)?.at ?? null;
    const counted = restorable !== null && missing === 0;
    // An abandoned flush never caught the capture up: commits on disk it
    // had not reached are in no count, so it is never complete.
    const shortfall: ShutdownShortfall | undefined = flushAbandoned
      ? 'flush-abandoned'
      : counted
        ? undefined
        : 'unrestorable-commits';
    const report: ShutdownReport = {
      complete: shortfall === undefined,
      unrestorableCommits: restorable === null ? captured : missing,
      restorableCommitSeq: restorable,
      capturedCommitSeq: captured,
      unrestorableSince: missing > 0 ? since : null,
      unrestorableUntil: missing > 0 ? until : null,
      heldLease,
      ...(shortfall === undefined ? {} : { shortfall, engine, lastError }),
    };
    if (!report.complete) {
      const iso = (ms: number | null) => (ms === null ? 'unknown' : new Date(ms).toISOString());
      const commits = `${report.unrestorableCommits} commits (${restorable === null ? 'every commit' : `after commit ${restorable}`}, up to commit ${captured}, first seen ${iso(report.unrestorableSince)} to ${iso(report.unrestorableUntil)}) are in no restore point: they are not restorable from this backup`;
      logger.error('backup.shutdown_incomplete', {
        shortfall,
        unrestorableCommits: report.unrestorableCommits,
        restorableCommitSeq: restorable,
        capturedCommitSeq: captured,
        unrestorableSince: iso(report.unrestorableSince),
        unrestorableUntil: iso(report.unrestorableUntil),
        reason:
          shortfall === 'flush-abandoned'
            ? `the shutdown grace period ended before the final flush finished: at least ${commits}; commits not captured yet are not counted (${sizes(engine)} on disk)`
            : commits,
      });
    }
    return report;
  }
}
