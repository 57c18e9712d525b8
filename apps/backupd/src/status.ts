/** What the daemon knows about each replica, as /healthz, /metrics and the status page show it. */
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
  /** This lineage's restore points after the last retention pass; absent before one ran. */
  readonly restorePoints?: number;
  readonly requests: Readonly<Record<Operation, OperationCounters>>;
}

export interface StatusSource {
  /** A fresh snapshot of every replica's status. */
  statuses(): readonly ReplicaStatus[];
  readonly version: string;
  readonly startedAt: number;
}
