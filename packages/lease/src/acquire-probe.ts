/**
 * The probe every conditional acquire runs after taking the lease: a
 * create-if-absent and a replace-if-version on a made-up version must both
 * be refused, and of a few concurrent replace-if-version writes against the
 * current version exactly one may succeed. A store that accepts more (or
 * cannot send one) ignores preconditions: the lease is given up and the
 * acquire fails closed with `PreconditionsIgnoredError`.
 */

import {
  AlreadyExistsError,
  type CallOptions,
  NotImplementedError,
  type ObjectStore,
  type ObjectVersion,
  PreconditionFailedError,
  type PutMode,
} from '@x/store';
import { PreconditionsIgnoredError } from './errors.ts';
import type { AcquireSettings } from './lease-options.ts';
import { hasVersion, writeReleasedRecord } from './lease-writes.ts';
import { type LeaseRecord, newNonce, serializeLeaseRecord } from './record.ts';

function makeMadeUpVersion(version: ObjectVersion): ObjectVersion {
  const random = newNonce();
  const madeUp: { etag?: string; generation?: string } = {};
  if (version.etag !== undefined) madeUp.etag = `"${random}${random.slice(0, 8)}"`;
  if (version.generation !== undefined) {
    // A generation is a decimal number on GCS; shift it far enough that it cannot be current.
    const current = /^\d+$/.test(version.generation) ? BigInt(version.generation) : 0n;
    madeUp.generation = String(
      current + 987_654_321n + BigInt(Number.parseInt(random.slice(0, 6), 16)),
    );
  }
  return madeUp;
}

/**
 * Stores whose probe passed in this process: later acquires on the same
 * store object skip it. Forgotten when a probe fails and when a lease on
 * the store is lost (`forgetPreconditionProbe`), so the next acquire
 * probes again.
 */
const honoured = new WeakSet<ObjectStore>();

/** Whether `store` passed the probe in this process since it was last forgotten. */
export function preconditionsProven(store: ObjectStore): boolean {
  return honoured.has(store);
}

/** The next acquire on `store` probes again. */
export function forgetPreconditionProbe(store: ObjectStore): void {
  honoured.delete(store);
}

/** Concurrent writers of the acquire's race (one round per probe). */
export const ACQUIRE_RACE_WRITERS = 4;

type RaceOutcome =
  | { kind: 'ok'; record: LeaseRecord; version: ObjectVersion | undefined }
  | { kind: 'not-atomic'; problem: string }
  | { kind: 'failed'; error: unknown };

/**
 * Writes the held record {@link ACQUIRE_RACE_WRITERS} times at once, each
 * with replace-if-version on the same current version: exactly one may
 * succeed. A service that checks the version and then writes lets several
 * through, and two holders could then both renew.
 */
async function raceOneVersion(
  store: ObjectStore,
  key: string,
  record: LeaseRecord,
  version: ObjectVersion,
  options: CallOptions,
): Promise<RaceOutcome> {
  const records = Array.from({ length: ACQUIRE_RACE_WRITERS }, () => ({
    ...record,
    nonce: newNonce(),
  }));
  const settled = await Promise.allSettled(
    records.map((raced) =>
      store.put(key, serializeLeaseRecord(raced), { ...options, mode: { ifMatch: version } }),
    ),
  );
  const won = settled.flatMap((result, index) =>
    result.status === 'fulfilled'
      ? [{ record: records[index]!, version: result.value.version }]
      : [],
  );
  if (won.length > 1)
    return {
      kind: 'not-atomic',
      problem: `replace-if-version (If-Match) is not atomic: ${won.length} of ${ACQUIRE_RACE_WRITERS} concurrent writes against one version succeeded`,
    };
  const winner = won[0];
  if (winner !== undefined) return { kind: 'ok', record: winner.record, version: winner.version };
  const first = settled.find((result) => result.status === 'rejected');
  return { kind: 'failed', error: (first as PromiseRejectedResult).reason };
}

/**
 * After taking the lease, writes it once with create-if-absent and once with
 * replace-if-version on a made-up version. Both must be refused. Otherwise
 * the lease is released and the acquire fails closed.
 */
export async function probeOrFailClosed(
  store: ObjectStore,
  settings: AcquireSettings,
  record: LeaseRecord,
  version: ObjectVersion | undefined,
  options: CallOptions,
): Promise<{ record: LeaseRecord; version: ObjectVersion | undefined }> {
  const { key } = settings;
  const ignored: string[] = [];
  let latestRecord = record;
  let latestVersion = version;
  let failure: unknown;

  if (!hasVersion(version)) {
    ignored.push('the store returned no version for a write, so replace-if-version cannot be sent');
  } else {
    const attempt = async (mode: PutMode, refusedBy: (error: unknown) => boolean, what: string) => {
      const probeRecord: LeaseRecord = { ...latestRecord, nonce: newNonce() };
      try {
        const result = await store.put(key, serializeLeaseRecord(probeRecord), {
          ...options,
          mode,
        });
        ignored.push(`${what} was accepted`);
        latestRecord = probeRecord;
        if (hasVersion(result?.version)) latestVersion = result.version;
      } catch (error) {
        if (refusedBy(error)) return;
        if (NotImplementedError.isInstance(error)) {
          ignored.push(`${what} is not implemented by the store`);
          return;
        }
        failure ??= error;
      }
    };
    await attempt(
      'create',
      (error) => AlreadyExistsError.isInstance(error) || PreconditionFailedError.isInstance(error),
      'a create-if-absent write (If-None-Match: *) over the existing lease',
    );
    await attempt(
      { ifMatch: makeMadeUpVersion(version) },
      (error) => PreconditionFailedError.isInstance(error),
      'a replace-if-version write (If-Match) naming a made-up version',
    );
    if (ignored.length === 0 && failure === undefined && hasVersion(latestVersion)) {
      const raced = await raceOneVersion(store, key, latestRecord, latestVersion, options);
      if (raced.kind === 'ok') ({ record: latestRecord, version: latestVersion } = raced);
      else if (raced.kind === 'not-atomic') ignored.push(raced.problem);
      else failure = raced.error;
    }
  }

  if (ignored.length === 0 && failure === undefined) {
    honoured.add(store);
    return { record: latestRecord, version: latestVersion };
  }
  honoured.delete(store);
  // Fail closed: give the record up (best effort), then report.
  try {
    await writeReleasedRecord(
      store,
      key,
      (found) => found.instanceId === settings.instanceId && found.generation === record.generation,
      { record: latestRecord, version: latestVersion },
      ignored.length === 0,
      settings.clock,
      options,
    );
  } catch (releaseError) {
    // The record expires after its TTL anyway; the caller learns of the original problem.
    settings.logger.warn('lease.release_failed', {
      key,
      instanceId: settings.instanceId,
      error: String(releaseError),
    });
  }
  if (ignored.length > 0) {
    settings.logger.warn('lease.preconditions_ignored', {
      key,
      store: store.description,
      ignored,
      switch: 'conditional: false',
    });
    throw new PreconditionsIgnoredError(store.description, ignored);
  }
  throw failure;
}
