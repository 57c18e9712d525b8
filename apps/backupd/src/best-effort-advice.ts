/** How to run on a service without exclusion anyway, naming both places the setting lives. */
export const BEST_EFFORT_ADVICE =
  'set the lease best-effort (BACKUPD_CONDITIONAL=off, or conditional: false in the config file) to run with no exclusion: two instances may then both write';
