/**
 * When a generation has run long enough to start a new one with a fresh
 * snapshot (a scheduled snapshot): after `intervalMs` of wall time, or once
 * the WAL it shipped outgrows `logFactor` times the database. A new
 * generation lets retention's window drop the old one and bounds what a
 * restore of the latest state reads (one snapshot plus the log since it).
 *
 * Pure: the worker asks after a step that left nothing unshipped and
 * nothing outside a restore point, so the old generation ends restorable to
 * its last commit and no point-in-time history is lost at the switch.
 */

export interface SnapshotScheduleInput {
  /** Wall-clock ms the current generation started (in this worker). */
  readonly startedAt: number;
  readonly now: number;
  /** 0 disables the time rule. */
  readonly intervalMs: number;
  /** WAL bytes the current generation shipped. */
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
    input.shippedBytes > input.logFactor * input.databaseBytes
  )
    return `the generation shipped ${input.shippedBytes} bytes of WAL, more than ${input.logFactor} × the ${input.databaseBytes}-byte database`;
  return null;
}
