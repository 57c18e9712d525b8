/**
 * When a generation has run long enough for a new one with a fresh snapshot:
 * after `intervalMs` of wall time, or once the log it shipped outgrows
 * `logFactor` × the database and is at least {@link SNAPSHOT_LOG_FLOOR_BYTES}
 * (for a small database, a few kilobytes of log would otherwise buy a snapshot
 * upload and a restore point every second or two). A new generation bounds
 * what a restore of the latest state reads and lets retention drop the old
 * one. When a due generation switches: `decideSnapshot`, below, and
 * docs/decisions/2026-12-06-scheduled-snapshot-switch.md.
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

/** Steps a due snapshot waits for a caught-up capture before it switches anyway. */
export const SNAPSHOT_FORCE_AFTER_STEPS = 1;

/** Largest unshipped backlog at which a due snapshot switches without a caught-up capture. */
export const SNAPSHOT_FORCE_MAX_BACKLOG_BYTES = 4 * 1024 * 1024;

/** Youngest generation a due snapshot replaces without a caught-up capture. */
export const SNAPSHOT_FORCE_MIN_AGE_MS = 10_000;

/**
 * What a worker remembers between steps about a due snapshot; kept in the
 * tenure, so a new tenure starts with none.
 */
export interface SnapshotWait {
  /** The generation found due, and why: it stays due until replaced. */
  readonly dueFor: { readonly generation: number; readonly reason: string } | null;
  /** Consecutive steps it was due without the capture caught up. */
  readonly dueSteps: number;
  /** A switch was due but for a compaction in flight: start no other meanwhile. */
  readonly awaitsCompaction: boolean;
}

export const NO_SNAPSHOT_WAIT: SnapshotWait = {
  dueFor: null,
  dueSteps: 0,
  awaitsCompaction: false,
};

/** What a step's end knows about the current generation. */
export interface SnapshotFacts extends SnapshotScheduleInput {
  /** Its number in the bucket. */
  readonly generation: number;
  /** The engine still writes the generation's WAL (else the next step ships a new base anyway). */
  readonly sameWal: boolean;
  /** Everything shipped is in the restore point LATEST names. */
  readonly inRestorePoint: boolean;
  /** Durable log bytes not shipped yet. */
  readonly backlogBytes: number;
  /** A compaction is in flight, or applied and in no restore point yet. */
  readonly compactionUnnamed: boolean;
}

export type SnapshotDecision =
  | { readonly start: false; readonly wait: SnapshotWait }
  | {
      readonly start: true;
      readonly wait: SnapshotWait;
      readonly reason: string;
      /** Durable bytes not shipped at the switch (0: caught up); they go into the new snapshot. */
      readonly backlogBytes: number;
    };

/**
 * Whether to start a new generation now, and what to remember until the
 * next step. Rationale: docs/decisions/2026-12-06-scheduled-snapshot-switch.md.
 */
export function decideSnapshot(wait: SnapshotWait, facts: SnapshotFacts): SnapshotDecision {
  const latched = wait.dueFor?.generation === facts.generation ? wait.dueFor.reason : null;
  const reason = latched ?? snapshotDue(facts);
  const dueFor = reason === null ? null : { generation: facts.generation, reason };
  const hold = (dueSteps: number, awaitsCompaction = false): SnapshotDecision => ({
    start: false,
    wait: { dueFor, dueSteps, awaitsCompaction },
  });
  if (reason === null || !facts.sameWal) return hold(0);
  let dueSteps = wait.dueSteps;
  if (!(facts.inRestorePoint && facts.backlogBytes === 0)) {
    const forcible =
      facts.backlogBytes <= SNAPSHOT_FORCE_MAX_BACKLOG_BYTES &&
      facts.now - facts.startedAt >= SNAPSHOT_FORCE_MIN_AGE_MS;
    if (!forcible) return hold(0);
    dueSteps += 1;
    if (!facts.inRestorePoint || dueSteps <= SNAPSHOT_FORCE_AFTER_STEPS) return hold(dueSteps);
  }
  if (facts.compactionUnnamed) return hold(Math.max(1, dueSteps), true);
  return {
    start: true,
    wait: { dueFor, dueSteps: 0, awaitsCompaction: false },
    reason,
    backlogBytes: facts.backlogBytes,
  };
}
