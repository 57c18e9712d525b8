/**
 * The graceful stop and the exit code it leaves: every worker flushes,
 * writes its final restore point and releases its lease (daemon.ts), the
 * listener closes, and each replica that could not make everything it
 * captured restorable is logged as one `stopped-incomplete` event.
 */
import type { ReplicaShutdown } from '../daemon.ts';
import { EXIT_FAILED, EXIT_INCOMPLETE, EXIT_OK } from '../exit-codes.ts';
import { errorFields, type Logger } from '../logger.ts';
import type { Replication } from './start.ts';

/**
 * The application's own failure is reported as it is; a clean exit (or no
 * application) that left commits unrestorable is not a success.
 */
export function shutdownExitCode(reports: readonly ReplicaShutdown[], code: number): number {
  const incomplete = reports.some((entry) => !entry.report.complete);
  return incomplete && code === EXIT_OK ? EXIT_INCOMPLETE : code;
}

/** The `stopped-incomplete` event's fields for one replica. */
export function stoppedIncompleteEvent(entry: ReplicaShutdown): Record<string, unknown> {
  const { report } = entry;
  const instant = (time: number | null) => (time === null ? null : new Date(time).toISOString());
  return {
    event: 'stopped-incomplete',
    database: entry.database,
    replica: entry.replica,
    unrestorableCommits: report.unrestorableCommits,
    restorableCommitSeq: report.restorableCommitSeq,
    capturedCommitSeq: report.capturedCommitSeq,
    unrestorableSince: instant(report.unrestorableSince),
    unrestorableUntil: instant(report.unrestorableUntil),
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
  logger.info({ event: 'shutting-down' });
  try {
    const reports = await replication.daemon.shutdown();
    await replication.server?.close();
    for (const entry of reports)
      if (!entry.report.complete) logger.error(stoppedIncompleteEvent(entry));
    logger.info({ event: 'stopped' });
    return shutdownExitCode(reports, code);
  } catch (error) {
    logger.error({ event: 'shutdown-failed', ...errorFields(error) });
    return EXIT_FAILED;
  }
}
