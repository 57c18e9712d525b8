/**
 * What an acquire does with the record it read — create, continue our own,
 * take over an expired or released one, take over a suspect one only after
 * watching it unchanged for a TTL, reclaim our own record when told it was
 * left by a dead run of ours (`ownRecord: 'reclaim'`), or refuse (`ForeignActiveError`,
 * `FencedError`). Pure decision: it writes nothing.
 */

import type { PutMode } from '@x/store';
import { describeHolder, FencedError, ForeignActiveError } from './errors.ts';
import type { AcquireSettings } from './lease-options.ts';
import { type LeaseRecord, MAX_SANE_TTL_S, type VersionedLeaseRecord } from './record.ts';

/** Why a foreign record is suspect, or undefined. */
export function suspectReason(record: LeaseRecord, wallNow: number): string | undefined {
  if (record.ttlSeconds > MAX_SANE_TTL_S)
    return `TTL of ${record.ttlSeconds} s exceeds MAX_SANE_TTL_S (${MAX_SANE_TTL_S} s)`;
  const ahead = record.renewedAt - wallNow;
  if (ahead > record.ttlSeconds * 1000)
    return `renewed ${ahead} ms in the future by our clock, more than its own TTL of ${record.ttlSeconds} s`;
  return undefined;
}

export interface AcquirePlan {
  readonly kind:
    | 'create'
    | 'continue'
    | 'reclaim'
    | 'takeover'
    | 'after-release'
    | 'suspect-takeover';
  readonly mode: PutMode;
  readonly generation: number;
  readonly acquiredAt: number | undefined;
  readonly term: number | undefined;
  readonly previous: LeaseRecord | undefined;
}

/**
 * Decides what an acquire does with the record it read.
 * @throws FencedError, ForeignActiveError.
 */
export function planAcquire(
  current: VersionedLeaseRecord | null,
  settings: AcquireSettings,
): AcquirePlan {
  if (!current)
    return {
      kind: 'create',
      mode: 'create',
      generation: 1,
      acquiredAt: undefined,
      term: settings.term,
      previous: undefined,
    };
  const { record, version } = current;
  const { key, clock } = settings;
  // A term once published is a high-water mark: it outlives expiry and release.
  if (record.term !== undefined && record.term > (settings.term ?? 0))
    throw new FencedError(key, settings.term, record.term, 'the published lease');
  const term = settings.term ?? record.term;
  const takeover = (kind: AcquirePlan['kind']): AcquirePlan => ({
    kind,
    mode: { ifMatch: version },
    generation: record.generation + 1,
    acquiredAt: undefined,
    term,
    previous: record,
  });
  if (record.instanceId === settings.instanceId && !record.released) {
    settings.watch.reset();
    // A dead earlier run of ours (the caller proved it): a new tenure at
    // once, fenced like any takeover. Checked before the suspect and expiry
    // rules, which are about records of other instances.
    if (settings.ownRecord === 'reclaim') return takeover('reclaim');
    return {
      kind: 'continue',
      mode: { ifMatch: version },
      generation: record.generation,
      acquiredAt: record.acquiredAt,
      term,
      previous: undefined,
    };
  }
  if (record.released) {
    settings.watch.reset();
    return takeover('after-release');
  }
  const wallNow = clock.wallNow();
  const reason = suspectReason(record, wallNow);
  if (reason) {
    const watchedMs = settings.watch.observe(key, version, clock.monotonicNow());
    const neededMs = settings.ttlSeconds * 1000;
    if (watchedMs >= neededMs) {
      settings.logger.warn('lease.suspect_takeover', {
        key,
        instanceId: settings.instanceId,
        holder: describeHolder(record),
        reason,
        unchangedForMs: watchedMs,
      });
      return takeover('suspect-takeover');
    }
    settings.logger.warn('lease.suspect_record', {
      key,
      holder: describeHolder(record),
      reason,
      unchangedForMs: watchedMs,
      takeoverAfterMs: neededMs - watchedMs,
    });
    throw new ForeignActiveError(
      key,
      record,
      wallNow + (neededMs - watchedMs),
      `suspect record: ${reason}; it is taken over once seen unchanged for ${settings.ttlSeconds} s`,
    );
  }
  settings.watch.reset();
  const ttlMs = record.ttlSeconds * 1000;
  if (wallNow - record.renewedAt < ttlMs)
    throw new ForeignActiveError(key, record, record.renewedAt + ttlMs);
  return takeover('takeover');
}
