/**
 * The lease record's writes, shared by acquire, renew and release: when a
 * write was sent (a grant is anchored there), whether the store named a
 * version, which errors are a refusal of a conditional write, and writing
 * the *released* record (release keeps the record, so the generation never
 * goes backwards). Also `releaseOwnRecord`, the clean-up after a failed
 * acquire.
 */

import {
  AlreadyExistsError,
  type CallOptions,
  ConflictError,
  NotImplementedError,
  type ObjectStore,
  type ObjectVersion,
  PreconditionFailedError,
  type PutMode,
} from '@x/store';
import { type Clock, systemClock } from './clock.ts';
import { refuseUnknownOptions } from './known-options.ts';
import {
  type LeaseRecord,
  leaseKey,
  newNonce,
  readLease,
  serializeLeaseRecord,
  type VersionedLeaseRecord,
} from './record.ts';

/** The two clock readings taken just before a write was sent; a grant is anchored there. */
export interface SendTime {
  readonly monotonicMs: number;
  readonly wallMs: number;
}

export function sendTime(clock: Clock): SendTime {
  return { monotonicMs: clock.monotonicNow(), wallMs: clock.wallNow() };
}

/** @internal True when the store named a version (an ETag or a generation). */
export function hasVersion(version: ObjectVersion | undefined): version is ObjectVersion {
  return (
    typeof version === 'object' &&
    version !== null &&
    (version.etag !== undefined || version.generation !== undefined)
  );
}

/** A conditional write that the store refused because the object was not as expected. */
export function isRefusal(error: unknown): boolean {
  return (
    AlreadyExistsError.isInstance(error) ||
    PreconditionFailedError.isInstance(error) ||
    ConflictError.isInstance(error)
  );
}

export function describeMode(mode: PutMode): string {
  if (mode === 'create') return 'create-if-absent (If-None-Match: *)';
  if (mode === 'overwrite') return 'unconditional write';
  return 'replace-if-version (If-Match)';
}

/** Accepts an own-record predicate for the shared release step. */
export type OwnershipCheck = (record: LeaseRecord) => boolean;

export type ReleaseOutcome =
  | { readonly outcome: 'released'; readonly record: LeaseRecord }
  | { readonly outcome: 'missing' }
  | { readonly outcome: 'not-ours'; readonly holder: LeaseRecord };

/**
 * Replaces our record with a released one. Conditional: replace-if-version
 * (re-read once when refused, in case a write of ours whose answer was lost
 * landed). Best-effort or without a known version: read, check it is ours,
 * then write — another instance's write between the read and ours is
 * overwritten (the documented window).
 */
export async function writeReleasedRecord(
  store: ObjectStore,
  key: string,
  ours: OwnershipCheck,
  known: { record: LeaseRecord; version: ObjectVersion | undefined } | undefined,
  conditional: boolean,
  clock: Clock,
  options: CallOptions,
): Promise<ReleaseOutcome> {
  let current: { record: LeaseRecord; version: ObjectVersion | undefined } | undefined =
    conditional && known && hasVersion(known.version) ? known : undefined;
  for (let round = 0; round < 3; round++) {
    if (!current) {
      const prefix = key.slice(0, -'/LEASE'.length);
      const read: VersionedLeaseRecord | null = await readLease(store, prefix, options);
      if (!read) return { outcome: 'missing' };
      if (read.record.released || !ours(read.record))
        return { outcome: 'not-ours', holder: read.record };
      current = read;
    }
    const released: LeaseRecord = {
      ...current.record,
      renewedAt: clock.wallNow(),
      nonce: newNonce(),
      released: true,
    };
    const mode: PutMode =
      conditional && hasVersion(current.version) ? { ifMatch: current.version } : 'overwrite';
    try {
      await store.put(key, serializeLeaseRecord(released), { ...options, mode });
      return { outcome: 'released', record: released };
    } catch (error) {
      if (NotImplementedError.isInstance(error) && mode !== 'overwrite') {
        // The store cannot write conditionally: fall back to read-check-write (documented window).
        conditional = false;
        current = undefined;
        continue;
      }
      if (!isRefusal(error)) throw error;
      current = undefined;
    }
  }
  const read = await readLease(store, key.slice(0, -'/LEASE'.length), options);
  if (!read) return { outcome: 'missing' };
  return { outcome: 'not-ours', holder: read.record };
}

/**
 * Removes a record we may have left behind after a failed or cancelled
 * acquire (a write whose answer never came): if `{prefix}/LEASE` names
 * `instanceId` and is not released, it is replaced by a released record
 * (generation kept, so it never goes backwards). Call it only when no
 * `BucketLease` of this instance holds the prefix.
 * @returns true when a record of ours was released, false when there was none.
 * @throws LeaseRecordError when the record is invalid; StoreError from the store.
 */
export async function releaseOwnRecord(
  store: ObjectStore,
  prefix: string,
  instanceId: string,
  options: CallOptions & { clock?: Clock } = {},
): Promise<boolean> {
  refuseUnknownOptions(options, ['signal', 'clock'], 'releaseOwnRecord');
  const key = leaseKey(prefix);
  const clock = options.clock ?? systemClock;
  const callOptions: CallOptions = options.signal ? { signal: options.signal } : {};
  const result = await writeReleasedRecord(
    store,
    key,
    (record) => record.instanceId === instanceId,
    undefined,
    true,
    clock,
    callOptions,
  );
  return result.outcome === 'released';
}
