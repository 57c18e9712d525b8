/**
 * backupd's exit codes. What each means for each command is the README's
 * table, "Signals and exit codes"; keep the two in step. `replicate --exec`
 * exits with the application's code instead (4 when it exited 0 but the stop
 * left committed data unbacked).
 */

/** Success (`verify`: every restore point verified; `check`: real exclusion). */
export const EXIT_OK = 0;
/** The operation failed, or `verify`/`check` found a problem. */
export const EXIT_FAILED = 1;
/** A usage or configuration error: nothing was done. */
export const EXIT_USAGE = 2;
/** `restore` refused to overwrite its target (use --force or --if-missing). */
export const EXIT_REFUSED = 3;
/** `replicate` stopped leaving committed data unbacked, or could not confirm it did not. */
export const EXIT_INCOMPLETE = 4;
/** `replicate` stopped on a refusal no retry clears (with --exec it stays up, unhealthy). */
export const EXIT_PERMANENT_REFUSAL = 5;
/** A `replicate` holds the database's lock: a second one, or a `restore` over it, is refused. */
export const EXIT_DATABASE_IN_USE = 6;
/** A second SIGINT/SIGTERM came before the graceful shutdown finished. */
export const EXIT_INTERRUPTED = 130;
