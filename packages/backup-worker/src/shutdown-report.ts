/**
 * What a stop could not make restorable: the commits captured but in no
 * restore point `LATEST` names, and when they were first seen. The worker
 * notes the captured commit count at every health evaluation; a shutdown
 * turns it into a {@link ShutdownReport} and logs an incomplete one.
 *
 * Limits: times are when a count was first *seen* (at an evaluation, every
 * WAL interval), not when the application committed.
 */
import type { Clock } from '@x/lease';
import type { HealthTracker } from './health.ts';
import type { BackupLogger, ShutdownReport } from './worker-options.ts';

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

  /** The report when the count cannot be read: complete only if the lease was never held. */
  unknown(heldLease: boolean): ShutdownReport {
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
    return { ...this.unknown(false), heldLease, leaseHeldBy: holder };
  }

  /**
   * Compares `captured` (what the stop set out to make restorable) with
   * LATEST's restore point, and logs what is missing.
   */
  report(heldLease: boolean, captured: number | null, logger: BackupLogger): ShutdownReport {
    if (!heldLease) return this.unknown(false);
    this.note(captured);
    const restorable = this.#health.latestRestorePoint?.commitSeq ?? null;
    if (captured === null) {
      logger.error('backup.shutdown_unverified', {
        reason: 'the commit count could not be read: what this stop left unrestorable is not known',
        restorableCommitSeq: restorable,
      });
      return this.unknown(true);
    }
    const missing = Math.max(0, captured - (restorable ?? 0));
    const since = this.#seen[0]?.at ?? null;
    const until = this.#seen.at(-1)?.at ?? null;
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
      logger.error('backup.shutdown_incomplete', {
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
}
