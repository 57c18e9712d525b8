/**
 * The bucket lease: an advisory single-writer lease on a prefix, held in
 * `{prefix}/LEASE` and fenced by its holder's own clocks. On a store whose
 * conditional writes hold (probed at acquire), every record write is
 * conditional: of instances starting together exactly one gets the lease, and
 * a holder taken over learns it at its next renewal. The holder writes only
 * until 2/3 TTL after its last renewal was sent, by both its clocks; others
 * take over a full TTL after it, absorbing a skew of 1/3 TTL. Release writes a
 * released record, so the generation never goes back. What is not guaranteed:
 * package README. Here: the held lease's protocol; acquire-plan.ts decides an
 * acquire, acquire-probe.ts probes, lease-writes.ts has the shared writes.
 */

import { hostname } from 'node:os';
import {
  type CallOptions,
  ConflictError,
  NotImplementedError,
  type ObjectStore,
  type ObjectVersion,
  PreconditionFailedError,
  type PutMode,
} from '@x/store';
import { planAcquire } from './acquire-plan.ts';
import {
  forgetPreconditionProbe,
  preconditionsProven,
  probeOrFailClosed,
} from './acquire-probe.ts';
import type { Clock } from './clock.ts';
import {
  describeHolder,
  FencedError,
  LeaseLostError,
  LeaseRecordError,
  PreconditionsIgnoredError,
  WriteDeadlineError,
} from './errors.ts';
import { refuseUnknownOptions } from './known-options.ts';
import {
  type AcquireOptions,
  type AcquireSettings,
  type Exclusion,
  type LeaseLogger,
  validateAcquireOptions,
} from './lease-options.ts';
import {
  describeMode,
  hasVersion,
  isRefusal,
  type SendTime,
  sendTime,
  writeReleasedRecord,
} from './lease-writes.ts';
import {
  type LeaseRecord,
  newNonce,
  readLease,
  serializeLeaseRecord,
  type VersionedLeaseRecord,
} from './record.ts';

export { hasVersion, releaseOwnRecord } from './lease-writes.ts';

type LeaseState = 'held' | 'lost' | 'releasing' | 'released';

/** How many read-decide-write rounds an acquire makes before giving up on a busy record. */
const MAX_ACQUIRE_ROUNDS = 5;

function twoThirdsOfTtlMs(ttlSeconds: number): number {
  return Math.floor((ttlSeconds * 2000) / 3);
}

/** @internal What `acquireAs` hands the constructor. */
interface BucketLeaseInit {
  readonly store: ObjectStore;
  readonly settings: AcquireSettings;
  readonly exclusion: Exclusion;
  readonly record: LeaseRecord;
  readonly version: ObjectVersion | undefined;
  readonly sent: SendTime;
}

const constructionToken = Symbol('BucketLease.construct');

/** A held lease on `{prefix}/LEASE`. Obtain one with {@link BucketLease.acquireAs}. */
export class BucketLease {
  readonly prefix: string;
  readonly instanceId: string;
  readonly exclusion: Exclusion;
  /** `{prefix}/LEASE`. */
  readonly key: string;

  readonly #store: ObjectStore;
  readonly #clock: Clock;
  readonly #logger: LeaseLogger;
  readonly #ttlSeconds: number;
  #record: LeaseRecord;
  #version: ObjectVersion | undefined;
  #grant: SendTime;
  #state: LeaseState = 'held';
  #lostError: LeaseLostError | FencedError | undefined;
  /** Writes sent but not answered (timeouts): a later refusal may be one of these having landed. */
  readonly #pending = new Map<string, { record: LeaseRecord; sent: SendTime }>();
  #queue: Promise<unknown> = Promise.resolve();
  #fence = new AbortController();
  #cancelFenceTimer: (() => void) | undefined;

  /** @internal Use {@link BucketLease.acquireAs}. */
  constructor(token: symbol, init: BucketLeaseInit) {
    if (token !== constructionToken)
      throw new TypeError('BucketLease is created by BucketLease.acquireAs');
    this.#store = init.store;
    this.#clock = init.settings.clock;
    this.#logger = init.settings.logger;
    this.#ttlSeconds = init.settings.ttlSeconds;
    this.prefix = init.settings.prefix;
    this.instanceId = init.settings.instanceId;
    this.key = init.settings.key;
    this.exclusion = init.exclusion;
    this.#record = init.record;
    this.#version = init.version;
    this.#grant = init.sent;
    this.#armFence();
  }

  /**
   * Takes the lease for `options.instanceId`, or continues it when the
   * record already names that id (a write whose answer was lost).
   *
   * @throws LeaseOptionsError — bad options; nothing sent.
   * @throws ForeignActiveError — another instance holds it (or its suspect record is still being watched).
   * @throws FencedError — the published term is ahead of `options.term`.
   * @throws PreconditionsIgnoredError — the store ignored a conditional write (probe) or cannot send one; nothing is held.
   * @throws LeaseRecordError — the record is not valid; it is never overwritten automatically.
   * @throws StoreError — transport failures (retry with the same instance id).
   */
  static async acquireAs(store: ObjectStore, options: AcquireOptions): Promise<BucketLease> {
    const settings = validateAcquireOptions(options);
    const { clock, logger, key } = settings;
    const callOptions: CallOptions = settings.signal ? { signal: settings.signal } : {};
    let lastRefusal: unknown;
    for (let round = 0; round < MAX_ACQUIRE_ROUNDS; round++) {
      settings.signal?.throwIfAborted();
      const current = await readLease(store, settings.prefix, callOptions);
      const plan = planAcquire(current, settings);
      const sent = sendTime(clock);
      let record: LeaseRecord = {
        instanceId: settings.instanceId,
        acquiredAt: plan.acquiredAt ?? sent.wallMs,
        renewedAt: sent.wallMs,
        ttlSeconds: settings.ttlSeconds,
        generation: plan.generation,
        ...(plan.term === undefined ? {} : { term: plan.term }),
        host: hostname(),
        pid: process.pid,
        nonce: newNonce(),
      };
      const mode: PutMode = settings.conditional ? plan.mode : 'overwrite';
      let version: ObjectVersion | undefined;
      let probed = false;
      try {
        ({ version } = await store.put(key, serializeLeaseRecord(record), {
          ...callOptions,
          mode,
        }));
      } catch (error) {
        if (settings.conditional && isRefusal(error)) {
          // Someone wrote between our read and our write: the next round re-reads and names the winner.
          lastRefusal = error;
          continue;
        }
        if (NotImplementedError.isInstance(error))
          throw new PreconditionsIgnoredError(
            store.description,
            [`${describeMode(mode)} is not implemented by the store`],
            { cause: error },
          );
        throw error;
      }

      if (!settings.conditional) {
        // Read back: a writer that raced us and wrote later wins; we report it instead of holding.
        const back = await readLease(store, settings.prefix, callOptions);
        if (!back || back.record.nonce !== record.nonce) {
          lastRefusal = new PreconditionFailedError(key, {
            detail: 'another write landed after ours',
          });
          continue;
        }
        version = back.version;
        logger.warn('lease.best_effort', {
          key,
          store: store.description,
          instanceId: settings.instanceId,
          notProtected:
            'conditional writes are off: two instances that start together may both acquire this lease and both write; a takeover is noticed only at the next renewal',
        });
      } else if (!preconditionsProven(store)) {
        // The probe may leave a newer version of our record (a store that ignored a precondition).
        probed = true;
        ({ record, version } = await probeOrFailClosed(
          store,
          settings,
          record,
          version,
          callOptions,
        ));
      }

      if (plan.kind === 'suspect-takeover') settings.watch.reset();
      logger.info('lease.acquired', {
        key,
        instanceId: settings.instanceId,
        generation: record.generation,
        exclusion: settings.conditional ? 'conditional' : 'best-effort',
        ...(settings.conditional ? { preconditionProbe: probed ? 'run' : 'remembered' } : {}),
        how: plan.kind,
        ...(plan.previous ? { previousHolder: plan.previous.instanceId } : {}),
      });
      const lease = new BucketLease(constructionToken, {
        store,
        settings,
        exclusion: settings.conditional ? 'conditional' : 'best-effort',
        record,
        version,
        sent,
      });
      return lease;
    }
    // The record kept changing under us; report the last refusal (a StoreError: retry later).
    throw lastRefusal;
  }

  /** The record as last written by us. */
  get record(): LeaseRecord {
    return this.#record;
  }

  /** Our fencing token: stamp it on what you write. */
  get generation(): number {
    return this.#record.generation;
  }

  /** The cadence a keeper renews at: TTL/3, in ms. */
  renewIntervalMs(): number {
    return Math.floor((this.#ttlSeconds * 1000) / 3);
  }

  /** True once the lease was taken over, vanished, or fenced by term. Final. */
  isLost(): boolean {
    return this.#state === 'lost';
  }

  /** The clock readings taken just before the last successful write of the record was sent. */
  lastWriteSentAt(): { monotonicMs: number; wallMs: number } {
    return { ...this.#grant };
  }

  /**
   * The instant the right to write ends: two thirds of a TTL after the send
   * time of the last successful write of the record, on each clock.
   * `mayWrite()` is also false once the lease is lost or being released.
   */
  writeDeadline(): { monotonicMs: number; wallMs: number } {
    const span = twoThirdsOfTtlMs(this.#ttlSeconds);
    return { monotonicMs: this.#grant.monotonicMs + span, wallMs: this.#grant.wallMs + span };
  }

  /**
   * True while this holder may start a write: held, and both clocks are
   * before `writeDeadline()`. A wall clock that jumps forward ends the right
   * early; one that jumps back never extends it (the monotonic bound holds).
   */
  mayWrite(): boolean {
    const allowed = this.#mayWriteNow();
    if (!allowed && !this.#fence.signal.aborted) this.#abortFence();
    return allowed;
  }

  /**
   * The fence: an `AbortSignal` that aborts when this holder must stop
   * writing — the lease was lost (reason `LeaseLostError`/`FencedError`), is
   * being released, or its write deadline passed (reason
   * `WriteDeadlineError`). Pass it (combined with a timeout) to every write.
   *
   * Read it for each write: after the deadline passed, a renewal that
   * succeeds (nobody took over meanwhile) opens a *new* signal, while the
   * aborted one stays aborted. Once the lease is lost or released, every
   * signal returned is aborted. The monotonic deadline is enforced by a
   * timer; a forward wall-clock jump is noticed at the next `mayWrite()` or
   * read of `signal`.
   */
  get signal(): AbortSignal {
    if (!this.#fence.signal.aborted && !this.#mayWriteNow()) this.#abortFence();
    return this.#fence.signal;
  }

  /**
   * Renews the record with replace-if-version; the new grant is anchored at
   * the moment this request is sent.
   * @throws FencedError — `currentTerm` is ahead of our term; refused before any request, and the lease is lost.
   * @throws LeaseLostError — the record was taken over, released or deleted (final), or the lease was already lost or released.
   * @throws StoreError / abort reasons — transient: the lease is still ours unless a later renewal says otherwise.
   */
  renew(options: { signal?: AbortSignal; currentTerm?: number } = {}): Promise<void> {
    try {
      refuseUnknownOptions(options, ['signal', 'currentTerm'], 'BucketLease.renew');
    } catch (error) {
      return Promise.reject(error);
    }
    return this.#exclusive(async () => {
      this.#assertRenewable(options.currentTerm);
      const callOptions: CallOptions = options.signal ? { signal: options.signal } : {};
      const sent = sendTime(this.#clock);
      const next: LeaseRecord = { ...this.#record, renewedAt: sent.wallMs, nonce: newNonce() };
      this.#pending.set(next.nonce, { record: next, sent });

      if (this.exclusion === 'best-effort') {
        const current = await this.#readForOwnership(callOptions);
        if (!current || !this.#isOurs(current.record)) {
          this.#lose(
            current?.record,
            current ? 'another instance wrote the record' : 'the record was deleted',
          );
          throw this.#lostError;
        }
        const written = await this.#store.put(this.key, serializeLeaseRecord(next), {
          ...callOptions,
          mode: 'overwrite',
        });
        this.#accept(next, written.version, sent);
        return;
      }

      let written: { version: ObjectVersion };
      try {
        written = await this.#store.put(this.key, serializeLeaseRecord(next), {
          ...callOptions,
          mode: { ifMatch: this.#version ?? {} },
        });
      } catch (error) {
        if (!isRefusal(error) || ConflictError.isInstance(error)) throw error;
        const current = await this.#readForOwnership(callOptions);
        const landed =
          current && this.#isOurs(current.record)
            ? this.#pending.get(current.record.nonce)
            : undefined;
        if (current && landed) {
          // A write of ours whose answer was lost landed: adopt it, anchored at its own send time.
          this.#accept(current.record, current.version, landed.sent);
          return;
        }
        this.#lose(
          current?.record,
          current
            ? current.record.released
              ? 'the record was released'
              : 'another instance took it over'
            : 'the record was deleted',
          error,
        );
        throw this.#lostError;
      }
      if (!hasVersion(written.version)) {
        // Without a version the next renewal cannot be conditional: learn it by reading back.
        const back = await this.#readForOwnership(callOptions);
        if (!back || back.record.nonce !== next.nonce) {
          this.#lose(back?.record, 'the record changed right after our renewal');
          throw this.#lostError;
        }
        this.#accept(next, back.version, sent);
        return;
      }
      this.#accept(next, written.version, sent);
    });
  }

  /**
   * Gives the lease up: writing stops at once (the fence aborts), then the
   * record is replaced by a released one (replace-if-version; read, check,
   * write in best-effort mode). Waits for a renewal in flight first. Never
   * touches a record that is no longer ours; does nothing when the lease was
   * already lost or released. A transport failure leaves the lease unwritable
   * and rejects; call `release` again, or let the record expire.
   */
  release(options: { signal?: AbortSignal } = {}): Promise<void> {
    try {
      refuseUnknownOptions(options, ['signal'], 'BucketLease.release');
    } catch (error) {
      return Promise.reject(error);
    }
    if (this.#state === 'held') {
      this.#state = 'releasing';
      this.#abortFence();
    }
    return this.#exclusive(async () => {
      if (this.#state !== 'releasing') return;
      const callOptions: CallOptions = options.signal ? { signal: options.signal } : {};
      const result = await writeReleasedRecord(
        this.#store,
        this.key,
        (record) => this.#isOurs(record),
        { record: this.#record, version: this.#version },
        this.exclusion === 'conditional',
        this.#clock,
        callOptions,
      );
      if (result.outcome === 'not-ours') {
        this.#lose(result.holder, 'found taken over at release; the record was left alone');
        return;
      }
      if (result.outcome === 'released') this.#record = result.record;
      this.#state = 'released';
      this.#cancelFenceTimer?.();
      this.#logger.info('lease.released', {
        key: this.key,
        instanceId: this.instanceId,
        generation: this.#record.generation,
        ...(result.outcome === 'missing' ? { note: 'the record was already gone' } : {}),
      });
    });
  }

  // --- internals ---

  #exclusive<T>(work: () => Promise<T>): Promise<T> {
    const run = this.#queue.then(work, work);
    // The queue only orders calls; each caller sees its own outcome.
    this.#queue = run.catch(() => undefined);
    return run;
  }

  #assertRenewable(currentTerm: number | undefined): void {
    if (this.#state === 'lost') throw this.#lostError;
    if (this.#state !== 'held')
      throw new LeaseLostError(this.key, undefined, 'the lease was released by its holder');
    const ourTerm = this.#record.term ?? 0;
    if (currentTerm !== undefined && currentTerm > ourTerm) {
      const fenced = new FencedError(
        this.key,
        this.#record.term,
        currentTerm,
        "the cluster's current",
      );
      this.#lose(undefined, fenced.message, undefined, fenced);
      throw fenced;
    }
  }

  #isOurs(record: LeaseRecord): boolean {
    return (
      record.instanceId === this.instanceId &&
      record.generation === this.#record.generation &&
      !record.released &&
      (record.nonce === this.#record.nonce || this.#pending.has(record.nonce))
    );
  }

  async #readForOwnership(options: CallOptions): Promise<VersionedLeaseRecord | null | undefined> {
    try {
      return await readLease(this.#store, this.prefix, options);
    } catch (error) {
      // An invalid record is not ours: someone replaced it.
      if (LeaseRecordError.isInstance(error)) {
        this.#lose(
          undefined,
          `the record was replaced by an invalid one (${error.problem})`,
          error,
        );
        throw this.#lostError;
      }
      throw error;
    }
  }

  #accept(record: LeaseRecord, version: ObjectVersion | undefined, sent: SendTime): void {
    this.#pending.clear();
    // A late answer never shortens a newer grant: keep whichever write was sent last.
    if (sent.monotonicMs >= this.#grant.monotonicMs) {
      this.#record = record;
      this.#version = version;
      this.#grant = sent;
    }
    if (this.#state === 'held') this.#armFence();
  }

  #mayWriteNow(): boolean {
    if (this.#state !== 'held') return false;
    const deadline = this.writeDeadline();
    return (
      this.#clock.monotonicNow() < deadline.monotonicMs && this.#clock.wallNow() < deadline.wallMs
    );
  }

  #armFence(): void {
    this.#cancelFenceTimer?.();
    this.#cancelFenceTimer = undefined;
    if (!this.#mayWriteNow()) {
      this.#abortFence();
      return;
    }
    if (this.#fence.signal.aborted) this.#fence = new AbortController();
    const deadline = this.writeDeadline();
    const remaining = Math.min(
      deadline.monotonicMs - this.#clock.monotonicNow(),
      deadline.wallMs - this.#clock.wallNow(),
    );
    this.#cancelFenceTimer = this.#clock.setTimer(remaining, () => {
      this.#cancelFenceTimer = undefined;
      // The wall clock may have gone back since arming: re-check, re-arm if still allowed.
      if (this.#mayWriteNow()) this.#armFence();
      else this.#abortFence();
    });
  }

  #abortFence(): void {
    if (this.#fence.signal.aborted) return;
    let reason: unknown;
    if (this.#state === 'lost') reason = this.#lostError;
    else if (this.#state === 'held') reason = new WriteDeadlineError(this.key);
    else reason = new DOMException(`lease ${this.key} is being released`, 'AbortError');
    this.#fence.abort(reason);
  }

  #lose(
    holder: LeaseRecord | undefined,
    detail: string,
    cause?: unknown,
    error?: FencedError,
  ): void {
    if (this.#state === 'lost') return;
    this.#state = 'lost';
    // A takeover may be a store that stopped honouring a precondition.
    forgetPreconditionProbe(this.#store);
    this.#lostError =
      error ?? new LeaseLostError(this.key, holder, detail, cause === undefined ? {} : { cause });
    this.#cancelFenceTimer?.();
    this.#cancelFenceTimer = undefined;
    this.#abortFence();
    this.#logger.warn('lease.lost', {
      key: this.key,
      instanceId: this.instanceId,
      generation: this.#record.generation,
      reason: detail,
      ...(holder ? { holder: describeHolder(holder) } : {}),
    });
  }
}
