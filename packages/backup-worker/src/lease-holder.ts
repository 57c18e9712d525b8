/**
 * How a started worker holds the prefix's lease through `@x/lease`'s keeper:
 * its events become health and logs, its signal the request layer's fence; a
 * refused write drops it, and the end releases it under one operation
 * deadline (a bucket that ignores aborts leaves the record to expire). A
 * renewal gets a sixth of a TTL, so one that hangs is retried well before
 * writes stop.
 */
import {
  type Clock,
  ForeignActiveError,
  holdLease,
  type LeaseEvent,
  type LeaseKeeper,
  LeaseLostError,
  LeaseWatch,
  PreconditionsIgnoredError,
  releaseOwnRecord,
} from '@x/lease';
import type { ObjectStore } from '@x/store';
import { BackupError, messageOf } from './errors.ts';
import { type HealthTracker, MAX_BACKOFF_MS } from './health.ts';
import type { Requests } from './requests.ts';
import type { WorkerCallbacks } from './worker-callbacks.ts';
import type { BackupLogger } from './worker-options.ts';

export interface LeaseHolderOptions {
  readonly store: ObjectStore;
  readonly prefix: string;
  readonly instanceId: string;
  /** What an acquisition does with a record naming `instanceId` (`@x/lease`'s `ownRecord`; default `'continue'`). */
  readonly ownRecord?: 'continue' | 'reclaim';
  readonly ttlSeconds: number;
  readonly conditional: boolean;
  readonly operationTimeoutMs: number;
  readonly clock: Clock;
  readonly logger: BackupLogger;
  readonly health: HealthTracker;
  readonly requests: Requests;
  readonly callbacks: Pick<WorkerCallbacks, 'runSignal' | 'started' | 'leaseFailed' | 'newTenure'>;
}

export class LeaseHolder {
  readonly #options: LeaseHolderOptions;
  #keeper: LeaseKeeper | null = null;
  #tenures = 0;
  #foreign: string | null = null;
  #keptOutBy: string | null = null;
  readonly #watch = new LeaseWatch();

  constructor(options: LeaseHolderOptions) {
    this.#options = options;
  }

  /** Tenures so far (0: the lease was never held). */
  get tenures(): number {
    return this.#tenures;
  }

  /**
   * The instance whose active lease kept the most recent attempt to take it
   * out, or that took the lease over from this instance's tenure since
   * (`null`: that attempt took it, failed otherwise, or none was made).
   */
  get keptOutBy(): string | null {
    return this.#keptOutBy;
  }

  /** The generation of the lease this tenure holds or last held; `null` before the first. */
  get generation(): number | null {
    return this.#keeper?.generation ?? null;
  }

  /** Held, not lost, not dropped. */
  holds(): boolean {
    const keeper = this.#keeper;
    return keeper !== null && !keeper.isLost() && !keeper.isDropped();
  }

  /**
   * The fence for a write (for the request layer): `null` without a lease
   * handle (a worker driven by `runOnce`).
   * @throws BackupError `WRITE_FENCED` — the lease was lost or dropped, or not renewed in time.
   */
  writeFence(): AbortSignal | null {
    const keeper = this.#keeper;
    if (keeper === null) return null;
    if (keeper.isDropped() || keeper.isLost())
      throw new BackupError(
        'the bucket lease was lost; this worker no longer writes to the bucket',
        { code: 'WRITE_FENCED' },
      );
    if (!keeper.mayWrite())
      throw new BackupError(
        'the bucket lease was not renewed in time; writes are stopped until it is',
        { code: 'WRITE_FENCED' },
      );
    return keeper.signal;
  }

  /** Try to take the lease: `null` once held, otherwise how long to wait before trying again. */
  async take(): Promise<number | null> {
    const o = this.#options;
    // A previous handle is lost or dropped (its keeper has stopped): forget it.
    this.#keeper = null;
    this.#keptOutBy = null;
    o.health.leaseHeld = false;
    const deadline = o.requests.deadline('taking the bucket lease', o.operationTimeoutMs * 4);
    // A TTL that is not a number is refused by the acquisition itself.
    const renewTimeoutMs = Math.min(o.operationTimeoutMs, Math.max(1, (o.ttlSeconds * 1000) / 6));
    try {
      let held: LeaseKeeper | null = null;
      const keeper = await holdLease(o.store, {
        prefix: o.prefix,
        instanceId: o.instanceId,
        ownRecord: o.ownRecord ?? 'continue',
        ttlSeconds: o.ttlSeconds,
        conditional: o.conditional,
        clock: o.clock,
        logger: o.logger,
        watch: this.#watch,
        signal: AbortSignal.any([deadline.signal, o.callbacks.runSignal()]),
        // A sixth of a TTL (5 s at the default 30 s), not the operation
        // deadline: a renewal that hangs is given up and retried (after
        // RENEW_RETRY_MS) well before writes stop.
        ...(renewTimeoutMs > 0 ? { renewTimeoutMs } : {}),
        renewRetry: 'steady',
        onEvent: (event) => {
          if (held !== null && this.#keeper === held) this.#onEvent(event);
        },
      });
      held = keeper;
      this.#hold(keeper);
      return null;
    } catch (error) {
      o.health.leaseHeld = false;
      if (ForeignActiveError.isInstance(error)) {
        const holder = error.holder;
        const name = `${holder.instanceId} on ${holder.host} pid ${holder.pid}`;
        this.#keptOutBy = holder.instanceId;
        if (this.#foreign !== holder.instanceId) {
          o.logger.warn('backup.lease_held_elsewhere', {
            holder: holder.instanceId,
            host: holder.host,
          });
          this.#foreign = holder.instanceId;
        }
        o.health.lease = `the backup bucket's lease is held by another instance (${name}); this instance uploads nothing while it is`;
        // Every third of a TTL, and at the moment the holder's lease may
        // expire: a successor of a holder that died takes over within a TTL
        // of its death.
        const untilExpiry = error.mayExpireAt - o.clock.wallNow() + 10;
        const pollMs = Math.floor((Math.max(1, o.ttlSeconds) * 1000) / 3);
        return Math.max(50, Math.min(pollMs, untilExpiry));
      }
      if (PreconditionsIgnoredError.isInstance(error)) {
        o.logger.error('backup.not_started', { error: error.message });
        o.health.lease = error.message;
        o.health.preconditionsIgnored = error.message;
        return MAX_BACKOFF_MS;
      }
      return o.callbacks.leaseFailed(
        new BackupError(`taking the bucket lease: ${messageOf(deadline.reason() ?? error)}`, {
          cause: error,
        }),
      );
    } finally {
      deadline.cancel();
    }
  }

  /**
   * The bucket refused a write: another writer got there first. Drop the
   * lease (its fence aborts at once); the worker starts over through it,
   * and resume reads the bucket afresh.
   */
  conflict(what: string, key?: string, cause?: unknown): BackupError {
    const { logger, health } = this.#options;
    const why = `another writer is using this backup prefix: ${what}`;
    logger.warn('backup.write_refused', { reason: why });
    if (this.#keeper !== null) {
      this.#keeper.drop(new BackupError(why, { code: 'WRITE_FENCED' }));
      health.leaseHeld = false;
      health.lease = why;
    }
    return new BackupError(why, { code: 'WRITER_CONFLICT', key, cause });
  }

  /**
   * Stop renewing and release the lease if still held (a lost or dropped
   * one is left alone); an own record a failed attempt left is removed too.
   * Bounded by one operation deadline, even against a bucket that ignores
   * abort signals: the lease then expires by itself.
   */
  async release(): Promise<void> {
    const o = this.#options;
    o.health.leaseHeld = false;
    const keeper = this.#keeper;
    this.#keeper = null;
    const deadline = o.requests.deadline('releasing the bucket lease', o.operationTimeoutMs);
    const expired = new Promise<'expired'>((resolve) => {
      if (deadline.signal.aborted) resolve('expired');
      deadline.signal.addEventListener('abort', () => resolve('expired'), { once: true });
    });
    // Without a keeper this instance holds no lease: it says nothing about
    // a release unless one of its acquisitions had landed after all.
    const held = keeper !== null;
    const release = async (): Promise<boolean> => {
      // The keeper waits for a renewal in flight, and leaves a lost or
      // dropped lease alone: it is not ours to release.
      if (keeper !== null) {
        await keeper.release({ signal: deadline.signal });
        return true;
      }
      if (!o.callbacks.started()) return false;
      // An acquisition that failed, timed out or was abandoned may have
      // landed: remove a record naming this instance, never another's.
      return releaseOwnRecord(o.store, o.prefix, o.instanceId, { signal: deadline.signal });
    };
    try {
      const outcome = await Promise.race([release(), expired]);
      if (outcome === 'expired') throw deadline.reason();
      if (outcome) o.logger.info('backup.lease_released', {});
    } catch (error) {
      const why = messageOf(deadline.reason() ?? error);
      if (held)
        o.logger.warn('backup.lease_release_failed', { error: why, note: 'it expires by itself' });
      else o.logger.debug?.('backup.lease_release_skipped', { error: why });
    } finally {
      deadline.cancel();
    }
  }

  /** Hold `keeper`'s lease, and forget a previous tenure's view of the bucket. */
  #hold(keeper: LeaseKeeper): void {
    const { health, logger } = this.#options;
    if (this.#tenures > 0) this.#options.callbacks.newTenure();
    this.#tenures += 1;
    this.#foreign = null;
    health.lease = null;
    health.preconditionsIgnored = null;
    health.leaseHeld = true;
    this.#keeper = keeper;
    const lease = keeper.lease;
    if (lease.exclusion === 'conditional')
      logger.info('backup.lease_taken', {
        instanceId: lease.instanceId,
        exclusion: 'conditional',
      });
    else
      logger.warn('backup.lease_taken', {
        instanceId: lease.instanceId,
        exclusion: 'best-effort',
        warning:
          'conditional writes are off: two instances started together may both upload and overwrite each other',
      });
  }

  /** The current keeper's renewals, as health and logs. */
  #onEvent(event: LeaseEvent): void {
    const { health, logger } = this.#options;
    if (event.type === 'renewed') {
      logger.debug?.('backup.lease_renewed', { tookMs: event.tookMs });
      health.lease = null;
      health.leaseHeld = true;
    } else if (event.type === 'renewal-failed') {
      const why = messageOf(event.error);
      health.errorCount += 1;
      logger.warn('backup.lease_renew_failed', { error: why });
      if (event.writesStopped) {
        health.leaseHeld = false;
        health.lease = `the bucket lease could not be renewed (${why}); uploads are stopped until it is`;
      }
    } else if (event.type === 'lost') {
      logger.warn('backup.lease_lost', { error: event.error.message });
      // Taken over: the successor is what keeps this instance out now, as if
      // an attempt to take the lease back had met it (a stop hands over to it).
      const holder = LeaseLostError.isInstance(event.error) ? event.error.holder : undefined;
      if (
        holder !== undefined &&
        !holder.released &&
        holder.instanceId !== this.#options.instanceId
      )
        this.#keptOutBy = holder.instanceId;
      health.leaseHeld = false;
      health.lease = `${event.error.message}; this instance uploads nothing while another holds it`;
    }
  }
}
