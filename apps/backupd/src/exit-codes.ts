/**
 * Exit codes, documented in the README:
 * - 0: success (for `verify`: every restore point verified; for `check`: the service gives real exclusion);
 * - 1: the operation failed, or `verify`/`check` found a problem;
 * - 2: usage or configuration error (nothing was done);
 * - 3: refused to overwrite (restore target exists; use --force or --if-missing);
 * - 4: `replicate` stopped gracefully but left committed data unbacked, or
 *   could not confirm it did not: captured commits in no restore point, a
 *   flush the grace period abandoned, a replica that never held the lease
 *   while its database holds anything (`backupd.stopped_incomplete` says how much
 *   and why). A standby beside a holder, and a database with nothing
 *   committed, exit 0;
 * - 5: `replicate` stopped on a refusal no retry can clear: the service
 *   ignores preconditions (no exclusion between writers), or the prefix
 *   belongs to another database (lineage). Without `--exec` only: while it
 *   supervises an application, replicate stays up, unhealthy with the reason;
 * - 6: `replicate` refused to start: another `replicate` of the same database
 *   holds its local lock (the message names its pid, host, start and URLs);
 *   or `restore` refused a target that a running `replicate` backs up
 *   (`--force` included);
 * - 130: stopped by a second SIGINT/SIGTERM before the graceful shutdown finished.
 * `replicate --exec` exits with the child's code instead.
 */
export const EXIT_OK = 0;
export const EXIT_FAILED = 1;
export const EXIT_USAGE = 2;
export const EXIT_REFUSED = 3;
export const EXIT_INCOMPLETE = 4;
export const EXIT_PERMANENT_REFUSAL = 5;
export const EXIT_DATABASE_IN_USE = 6;
export const EXIT_INTERRUPTED = 130;
