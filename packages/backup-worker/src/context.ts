/**
 * What the worker's parts share during a step: the source, the request
 * layer, health, and the current tenure. Built once by the worker; `tenure`
 * is read live (a new tenure replaces it).
 */
import type { BackupSource } from '@x/engine';
import type { Clock } from '@x/lease';
import type { HealthTracker } from './health.ts';
import type { ObjectKeys } from './object-keys.ts';
import type { Requests } from './requests.ts';
import type { Tenure } from './tenure.ts';
import type { WorkerCallbacks } from './worker-callbacks.ts';
import type { BackupLogger } from './worker-options.ts';

export interface WorkerContext {
  readonly prefix: string;
  readonly source: BackupSource;
  readonly clock: Clock;
  readonly logger: BackupLogger;
  readonly health: HealthTracker;
  readonly requests: Requests;
  /** The keys objects are sealed to and opened with (none: in clear). */
  readonly keys: ObjectKeys;
  /** The current tenure's state. */
  readonly tenure: Tenure;
  /** The generation of the lease held (the fencing token stamped on restore points); `null` without one. */
  readonly leaseGeneration: number | null;
  readonly callbacks: WorkerCallbacks;
}
