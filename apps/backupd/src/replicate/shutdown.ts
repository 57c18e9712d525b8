/**
 * The graceful stop and the exit code it leaves: every worker flushes,
 * writes its final restore point and releases its lease (daemon.ts), the
 * listener closes, and each replica that could not make everything
 * committed restorable is logged as one `backupd.stopped_incomplete` event that
 * says how much, and why.
 *
 * A replica whose worker never held the lease never opened its database
 * (it opens with the lease): its report says only that. Here the database
 * file is looked at: provably empty, nothing was left out (exit 0);
 * anything else was not backed up by this run (exit 4), whoever knows
 * what an earlier run put in the bucket.
 */
import type { ReplicaShutdown } from '../daemon.ts';
import { EXIT_FAILED, EXIT_INCOMPLETE, EXIT_OK } from '../exit-codes.ts';
import { errorFields, type Logger } from '../logger.ts';
import { type DatabaseOnDisk, databaseOnDisk, describeOnDisk } from './database-on-disk.ts';
import type { Replication } from './start.ts';

/**
 * The application's own failure is reported as it is; a clean exit (or no
 * application) that left committed data unbacked is not a success.
 */
export function shutdownExitCode(reports: readonly ReplicaShutdown[], code: number): number {
  const incomplete = reports.some((entry) => !entry.report.complete);
  return incomplete && code === EXIT_OK ? EXIT_INCOMPLETE : code;
}

/** A replica's report, and its database on disk when the worker never opened it. */
export interface ReviewedShutdown extends ReplicaShutdown {
  readonly disk?: DatabaseOnDisk;
}

/**
 * Completes what a worker that never opened its source could not know:
 * its database file, read here. Provably empty is complete (nothing was
 * committed to lose); anything else stays incomplete.
 */
export function reviewShutdown(
  entry: ReplicaShutdown,
  inspect: (path: string) => DatabaseOnDisk = databaseOnDisk,
): ReviewedShutdown {
  const { report } = entry;
  if (
    report.complete ||
    report.shortfall !== 'never-held-lease' ||
    report.capturedCommitSeq !== null
  )
    return entry;
  const disk = inspect(entry.database);
  if (disk.state !== 'empty') return { ...entry, disk };
  return { ...entry, disk, report: { ...report, complete: true, shortfall: undefined } };
}

/** One sentence: how much was left unbacked, and why. */
function incompleteReason(entry: ReviewedShutdown): string {
  const { report, disk } = entry;
  const commits = `${report.unrestorableCommits} commits`;
  const upTo =
    report.capturedCommitSeq === null ? '' : `, up to commit ${report.capturedCommitSeq}`;
  const after =
    report.restorableCommitSeq === null
      ? 'no restore point holds any of them'
      : `the newest restore point holds commit ${report.restorableCommitSeq}`;
  const sizes = report.engine
    ? `; on disk: database ${report.engine.databaseBytes ?? 'unknown'} bytes, WAL ${report.engine.walBytes ?? 'unknown'} bytes`
    : '';
  const lastError = report.lastError ? ` (last error: ${report.lastError})` : '';
  switch (report.shortfall) {
    case 'never-held-lease':
      return `this replica never held the bucket's lease${lastError}, so nothing reached the bucket in this run: ${
        disk
          ? `${describeOnDisk(disk)}, none of it backed up by this run`
          : `the ${commits} the database holds are in no restore point this run wrote`
      }`;
    case 'flush-abandoned':
      return `the shutdown grace period ended before the final flush finished: at least ${commits}${upTo} are not restorable (${after}); commits not captured yet are not counted${sizes}`;
    case 'refused':
      return `the backup of this database was refused (${report.lastError ?? 'no reason given'}), so this run backed up nothing of it after the refusal`;
    case 'count-unknown':
      return `the commit count could not be read, so what this stop left unrestorable is not known (${after})${lastError}`;
    default:
      return `${commits}${upTo} are not restorable from this backup (${after})`;
  }
}

/** The `backupd.stopped_incomplete` event's fields for one replica. */
export function stoppedIncompleteEvent(entry: ReviewedShutdown): Record<string, unknown> {
  const { report, disk } = entry;
  const instant = (time: number | null) => (time === null ? null : new Date(time).toISOString());
  return {
    event: 'backupd.stopped_incomplete',
    database: entry.database,
    replica: entry.replica,
    shortfall: report.shortfall ?? 'unrestorable-commits',
    heldLease: report.heldLease,
    unrestorableCommits: report.unrestorableCommits,
    restorableCommitSeq: report.restorableCommitSeq,
    capturedCommitSeq: report.capturedCommitSeq,
    unrestorableSince: instant(report.unrestorableSince),
    unrestorableUntil: instant(report.unrestorableUntil),
    ...(disk
      ? {
          databaseBytes: disk.databaseBytes,
          walBytes: disk.walBytes,
          walFrames: disk.walFrames,
        }
      : report.engine
        ? { databaseBytes: report.engine.databaseBytes, walBytes: report.engine.walBytes }
        : {}),
    ...(report.lastError ? { lastError: report.lastError } : {}),
    reason: incompleteReason(entry),
  };
}

/**
 * Stops `replication` and resolves with the exit code for `code` (what
 * the application or the signal asked for). Never rejects: a failed
 * shutdown is logged and exits 1.
 */
export async function stopReplication(
  replication: Replication,
  logger: Logger,
  code: number,
): Promise<number> {
  logger.info({ event: 'backupd.shutting_down' });
  try {
    const reports = (await replication.daemon.shutdown()).map((entry) => reviewShutdown(entry));
    await replication.server?.close();
    for (const entry of reports) {
      if (!entry.report.complete) logger.error(stoppedIncompleteEvent(entry));
      else if (entry.disk)
        logger.info({
          event: 'backupd.stopped_nothing_to_back_up',
          database: entry.database,
          replica: entry.replica,
          note: `this replica never held the bucket's lease, and ${describeOnDisk(entry.disk)}: nothing is committed in it, so nothing was left unbacked`,
        });
    }
    logger.info({ event: 'backupd.stopped' });
    return shutdownExitCode(reports, code);
  } catch (error) {
    logger.error({ event: 'backupd.shutdown_failed', ...errorFields(error) });
    return EXIT_FAILED;
  }
}
