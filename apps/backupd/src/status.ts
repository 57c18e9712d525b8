/** What the daemon knows about each replica, as /healthz, /livez, /readyz, /metrics and the status page show it. */

import type { PermanentRefusal } from '@x/backup-worker';
import type { EngineFiles } from '@x/engine';
import type { Operation, OperationCounters } from './instrumented-store.ts';

export interface ReplicaStatus {
  /** The database file or store directory. */
  readonly database: string;
  /** The replica location, as displayed (no credentials can be in it). */
  readonly replica: string;
  readonly healthy: boolean;
  /** Why it is unhealthy; absent while healthy. */
  readonly reason?: string;
  readonly lagSeconds: number;
  /** Durable WAL bytes of the current generation not shipped yet. */
  readonly unshippedBytes: number;
  /** Captured commits newer than the latest restore point (not restorable yet). */
  readonly unrestorableCommits: number;
  /** Unix seconds of the last moment everything durable was shipped; 0 before the first. */
  readonly lastSuccessSeconds: number;
  readonly errors: number;
  readonly leaseHeld: boolean;
  /** Who holds the lease when it is someone else, as the lease record names them. */
  readonly leaseHolder?: string;
  readonly latestRestorePoint?: {
    readonly commitSeq: number;
    readonly key: string;
    readonly createdAt?: string;
  };
  /** The oldest restore point the last retention pass kept: the restorable window starts at its `restorableFrom`. */
  readonly oldestRestorePoint?: {
    readonly commitSeq: number;
    readonly restorableFrom: number;
    readonly createdAt: string;
  };
  /** The error of the last failed step while failures continue; absent otherwise. */
  readonly lastError?: string;
  /** This lineage's restore points after the last retention pass; absent before one ran. */
  readonly restorePoints?: number;
  /** A refusal no retry can clear (see the worker's `BackupHealth.refusal`); absent otherwise. */
  readonly refusal?: PermanentRefusal;
  /** The engine's files (database and WAL size, checkpoints) at the last evaluation; absent when unknown. */
  readonly engine?: EngineFiles;
  /** Absent for one database of a directory: its requests count in the directory's row. */
  readonly requests?: Readonly<Record<Operation, OperationCounters>>;
  /**
   * Whether the worker has ended for good (shut down, or panicked): it will
   * not ship again in this process. Absent when the source does not say;
   * `/livez` then goes by the worker's stop reason (see http-server.ts).
   */
  readonly stopped?: boolean;
  /**
   * Unix seconds (fractions allowed) of the supervisor's last health
   * evaluation. Absent when the source does not report it; `/livez` then
   * cannot tell a stuck supervisor.
   */
  readonly evaluatedSeconds?: number;
  /**
   * Present for `backupd follow` (then `lagSeconds` is how long since the
   * follower last knew its target up to date): the state readers of the
   * target see, and how far behind the bucket it is.
   */
  readonly follow?: {
    readonly appliedCommitSeq: number;
    readonly commitsBehind: number;
    readonly statesApplied: number;
  };
  /**
   * Present for a directory (`replicate --dir`): this row sums its
   * databases, and these count them by state.
   */
  readonly directory?: DirectorySummary;
  /** How often the supervisor evaluates health (the WAL interval), in seconds; absent: 1. */
  readonly evaluationIntervalSeconds?: number;
}

/** A directory's databases counted by state, and its wakes and incomplete sleeps since start. */
export interface DirectorySummary {
  readonly databases: number;
  readonly awake: number;
  readonly asleep: number;
  readonly starting: number;
  readonly inUse: number;
  readonly refused: number;
  readonly wakes: number;
  readonly incompleteSleeps: number;
}

/** One database of a directory (`replicate --dir`), as `/databases` and the status page list it. */
export interface DirectoryDatabaseRow {
  /** Relative to the directory. */
  readonly database: string;
  /** The directory. */
  readonly directory: string;
  /** Its backup's URL, as displayed. */
  readonly url: string;
  /** `awake` (a worker runs), `waking`, `stopping`, `asleep`, `in-use` (another replicate holds it), `refused`. */
  readonly state: string;
  /** While awake: the worker's lag and what waits to be shipped. */
  readonly lagSeconds: number | null;
  readonly unshippedBytes: number | null;
  /** While awake: the restore point `LATEST` names, as the worker knows it. */
  readonly latestCommitSeq: number | null;
  /** Why it is in use or refused. */
  readonly problem: string | null;
  /** When its files last changed, as backupd saw it (RFC 3339). */
  readonly changedAt: string;
}

/** What `/databases` and the status page's search ask for. */
export interface DatabaseQuery {
  /** A part of the relative path, case-insensitive; empty: every database. */
  readonly search: string;
  readonly limit: number;
}

export interface StatusSource {
  /** A fresh snapshot of every replica's status. */
  statuses(): readonly ReplicaStatus[];
  /**
   * The databases of the directories (`replicate --dir`): the awake ones
   * first, worst lag first, then the others by name. Absent without a directory.
   */
  databases?(query: DatabaseQuery): readonly DirectoryDatabaseRow[];
  /** Each awake database of the directories as a row of its own (`/metrics?per-database=1`). */
  perDatabase?(): readonly ReplicaStatus[];
  readonly version: string;
  readonly startedAt: number;
}
