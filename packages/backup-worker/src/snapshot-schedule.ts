/**
 * When a generation has run long enough to start a new one with a fresh
 * snapshot (a scheduled snapshot): after `intervalMs` of wall time, or once
 * the WAL it shipped outgrows `logFactor` times the database. A new
 * generation lets retention's window drop the old one and bounds what a
 * restore of the latest state reads (one snapshot plus the log since it).
 *
 * The size rule waits for at least {@link SNAPSHOT_LOG_FLOOR_BYTES} of log,
 * whatever the factor: for a small database a few kilobytes of log would
 * otherwise outgrow it every second or two, and each new generation costs
 * requests (a snapshot upload, its checks, a restore point) that save a
 * restore only a few kilobytes of reading.
 *
 * Pure: the worker asks after a step that left nothing unshipped and
 * nothing outside a restore point, so the old generation ends restorable to
 * its last commit and no point-in-time history is lost at the switch.
 */

/**
 * The least log a generation's restore point names before the size rule may
 * start a new one: 1 MiB. Small enough that the factor governs from a
 * database of 420 KiB up (at the default factor of 2.5); below that, a restore
 * reads at most about a mebibyte of log, and a new generation (a snapshot
 * upload, its checks, a restore point) comes at most once per mebibyte the
 * compacted log holds.
 */
export const SNAPSHOT_LOG_FLOOR_BYTES = 1024 * 1024;

export interface SnapshotScheduleInput {
  /** Wall-clock ms the current generation started (in this worker). */
  readonly startedAt: number;
  readonly now: number;
  /** 0 disables the time rule. */
  readonly intervalMs: number;
  /**
   * Stored bytes of the log the current generation's restore point names
   * (compacted objects count for what they hold, not for what they
   * replaced): what a restore of the latest state reads besides the snapshot.
   */
  readonly shippedBytes: number;
  /** The database file's size as the engine reports it; `null`: unknown (the size rule does not apply). */
  readonly databaseBytes: number | null;
  /** 0 disables the size rule. */
  readonly logFactor: number;
}

/** Why a new generation is due, or `null` when it is not. */
export function snapshotDue(input: SnapshotScheduleInput): string | null {
  const age = input.now - input.startedAt;
  if (input.intervalMs > 0 && age >= input.intervalMs)
    return `the generation is ${Math.round(age / 1000)}s old (snapshotInterval ${Math.round(input.intervalMs / 1000)}s)`;
  if (
    input.logFactor > 0 &&
    input.databaseBytes !== null &&
    input.databaseBytes > 0 &&
    input.shippedBytes > input.logFactor * input.databaseBytes &&
    input.shippedBytes >= SNAPSHOT_LOG_FLOOR_BYTES
  )
    return `the generation's log holds ${input.shippedBytes} stored bytes, more than ${input.logFactor} × the ${input.databaseBytes}-byte database`;
  return null;
}

/**
 * Steps a due snapshot waits for the capture to be caught up at a step's
 * end before it switches anyway, once everything shipped is in a restore
 * point (see the worker's scheduled snapshots). One: each step of the wait
 * writes a restore point at once, and each such point keeps the fine
 * segments it names for the retention window (at 100 updates/s on a 2 MiB
 * database, three steps cost about 0.7 × the database per switch).
 */
export const SNAPSHOT_FORCE_AFTER_STEPS = 1;

/**
 * Largest backlog (durable log bytes not shipped yet) at which a due
 * snapshot switches without a caught-up capture: past it the application
 * outruns the shipping, and the switch (reading the WAL's frames into the
 * new snapshot, pinning the reader while the image is read) would cost the
 * capture more than it can spare; the snapshot then waits for the backlog
 * to shrink.
 */
export const SNAPSHOT_FORCE_MAX_BACKLOG_BYTES = 4 * 1024 * 1024;

/**
 * Youngest generation a due snapshot replaces without a caught-up capture:
 * under a load that never lets the capture catch up, scheduled snapshots
 * come at most this often (each reads the WAL's frames and the database
 * while the application writes, and the WAL grows meanwhile). 10 s: under
 * a load that rewrites the database every few seconds, the log a restore
 * reads grows by about the database's size per level-1 window (30 s by
 * default), so a longer wait let it pass the size rule's bound by half as
 * much again (a restore read 5.3 × the database at 500 updates/s on 2 MiB
 * with 30 s).
 */
export const SNAPSHOT_FORCE_MIN_AGE_MS = 10_000;
