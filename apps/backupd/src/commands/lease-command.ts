/**
 * `backupd lease <url>`: who holds the lease, since when, how long until it
 * may be taken over, and the exclusion it gives as far as that can be known.
 * The record does not say how its holder acquired: a store without conditional
 * writes is best-effort, a cloud store is measured by a probe beside the lease,
 * and neither the record nor a local directory is ever written. A holder on this
 * host (same host name) is checked by its pid and, given the database, by its
 * local lock (looked at, never taken), which tells a live replicate from a
 * reused pid. In full: the README, "Store URLs" and "Restart after a crash".
 */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { hostname } from 'node:os';
import { type LeaseRecord, LeaseRecordError, MAX_SANE_TTL_S, readLease } from '@x/lease';
import type { ObjectStore } from '@x/store';
import { probeConditionalWrites } from '@x/store-conformance';
import { type CommandContextFor, defineCommand, stringOption } from '../cli/command.ts';
import { EXIT_FAILED, EXIT_OK } from '../exit-codes.ts';
import { inspectDatabaseLock, processRunning } from '../replicate/database-lock.ts';
import { parseStoreUrl, type StoreLocation } from '../store-url.ts';
import { expectPositionals, openUrlArgument, print, printJson } from './command-store.ts';

/** An instant for people; a value beyond what a Date can hold (a hostile record) is shown as the number. */
function instant(milliseconds: number): string {
  const date = new Date(milliseconds);
  return Number.isNaN(date.getTime())
    ? `${milliseconds} ms since the epoch (out of range)`
    : date.toISOString();
}

function seconds(milliseconds: number): string {
  const value = Math.round(milliseconds / 1000);
  return value < 120 ? `${value}s` : `${Math.round(value / 60)}m`;
}

/** The exclusion a lease on this store gives, as far as it can be known. */
export interface MeasuredExclusion {
  readonly exclusion: 'best-effort' | 'unknown';
  /** Why, for a person. */
  readonly detail: string;
}

async function measureExclusion(
  store: ObjectStore,
  prefix: string,
  remote: boolean,
): Promise<MeasuredExclusion> {
  if (!store.capabilities.conditionalPut)
    return {
      exclusion: 'best-effort',
      detail: 'the store cannot write conditionally, so every lease on it is best-effort',
    };
  // A local directory's conditional writes are the adapter's own (no service
  // that could ignore them), and this command must not write there.
  if (!remote)
    return {
      exclusion: 'unknown',
      detail:
        'the store enforces conditional writes itself, but the lease record does not say whether its holder acquired with conditional writes or best-effort (conditional: false)',
    };
  const scratch = `${prefix}/.backupd-lease-probe-${randomBytes(6).toString('hex')}`;
  let probe: Awaited<ReturnType<typeof probeConditionalWrites>>;
  try {
    probe = await probeConditionalWrites(store, scratch, {
      multipart: false,
      concurrency: 2,
      signal: AbortSignal.timeout(60_000),
    });
  } catch (error) {
    return {
      exclusion: 'unknown',
      detail: `could not measure whether the service honours conditional writes: ${error instanceof Error ? error.message : String(error)}`,
    };
  }
  const left = probe.cleanupError ? `; the probe left objects behind: ${probe.cleanupError}` : '';
  const ignored = (
    [
      ['create-if-absent', probe.create.outcome],
      ['replace-if-version', probe.replace.outcome],
    ] as const
  ).filter(([, outcome]) => outcome === 'ignored' || outcome === 'not-implemented');
  if (ignored.length > 0)
    return {
      exclusion: 'best-effort',
      detail: `measured now: the service does not honour ${ignored.map(([name, outcome]) => `${name} (${outcome})`).join(' or ')}, so a lease here can only be held best-effort (an acquire with conditional writes fails closed) and two instances may both write${left}`,
    };
  if (probe.create.outcome === 'honoured' && probe.replace.outcome === 'honoured')
    return {
      exclusion: 'unknown',
      detail: `measured now: the service honours create-if-absent and replace-if-version, but the lease record does not say whether its holder acquired with conditional writes or best-effort (conditional: false)${left}`,
    };
  return {
    exclusion: 'unknown',
    detail: `could not tell whether the service honours conditional writes: create-if-absent ${probe.create.outcome} (${probe.create.evidence}); replace-if-version ${probe.replace.outcome} (${probe.replace.evidence})${left}`,
  };
}

const options = {
  database: stringOption({
    argument: '<db>',
    description:
      'the database backed up to <url>: a holder on this host is checked against its local lock (live replicate or dead)',
  }),
} as const;

export const leaseCommand = defineCommand({
  name: 'lease',
  synopsis: 'lease <url>',
  summary: 'show who holds the backup lease',
  usage: 'Usage: backupd lease <url> [--database <db>] [--json]',
  description: `Shows who holds the backup lease on <url>, since when, how long until another
instance may take it over, and whether the service gives real exclusion. A holder
on this host is said to be a live replicate or a dead process.`,
  options,
  examples: [
    'backupd lease s3://my-bucket/app',
    'backupd lease s3://my-bucket/app --database ./app.db',
  ],
  run: showLease,
});

/** What is known of a holder on this host. */
export interface LocalHolder {
  /**
   * `dead-process`: its pid is gone, or the database's local lock is free;
   * `live-replicate`: the lock is held by the replicate the record names;
   * `other-replicate`: the lock is held by a replicate of another instance id;
   * `running-process`: its pid runs, the lock was not looked at (no database).
   */
  readonly holder: 'dead-process' | 'live-replicate' | 'other-replicate' | 'running-process';
  readonly detail: string;
  /** The database whose local lock was looked at. */
  readonly database?: string;
}

/** The database `replicate <db>` backs up to `location` by default (`<db>-backups/` beside it), when it is there. */
function defaultDatabaseOf(location: StoreLocation): string | undefined {
  if (location.scheme !== 'file' || !location.root.endsWith('-backups')) return undefined;
  const database = location.root.slice(0, -'-backups'.length);
  return existsSync(database) ? database : undefined;
}

/** A record's holder, when it is on this host and the record is not released; undefined otherwise. */
export function localHolder(
  record: LeaseRecord,
  database: string | undefined,
): LocalHolder | undefined {
  if (record.released || record.host !== hostname()) return undefined;
  const tookOver =
    'a replicate of this database started on this host takes the lease back at once (its instance id is kept beside the database); another host waits until the record expires';
  if (database !== undefined) {
    const lock = inspectDatabaseLock(database);
    if (lock.state === 'free')
      return {
        holder: 'dead-process',
        database,
        detail: `no replicate of ${database} runs on this host (its local lock ${lock.files.lock} is free): the holder, pid ${record.pid}, is dead; ${tookOver}`,
      };
    const by = lock.holder;
    if (by !== undefined && by.instanceId === record.instanceId)
      return {
        holder: 'live-replicate',
        database,
        detail: `this host's live replicate of ${database} (pid ${by.pid}, since ${by.since}) holds it`,
      };
    return {
      holder: 'other-replicate',
      database,
      detail: `the local lock of ${database} is held by ${by ? `pid ${by.pid} (instance ${by.instanceId}, since ${by.since})` : 'a replicate that has not said who it is'}, not by the lease's holder (instance ${record.instanceId}, pid ${record.pid})`,
    };
  }
  if (!processRunning(record.pid))
    return {
      holder: 'dead-process',
      detail: `pid ${record.pid} no longer runs on this host: the holder is dead; ${tookOver}`,
    };
  return {
    holder: 'running-process',
    detail: `pid ${record.pid} runs on this host; give --database <db> to check that it is the replicate of that database (a pid can be reused)`,
  };
}

async function showLease(context: CommandContextFor<typeof options>): Promise<number> {
  expectPositionals(context, 1);
  const { store, prefix, url } = await openUrlArgument(context, 0);
  const database = context.values.database ?? defaultDatabaseOf(parseStoreUrl(url));
  const now = Date.now();
  let found: Awaited<ReturnType<typeof readLease>>;
  try {
    found = await readLease(store, prefix, { signal: AbortSignal.timeout(30_000) });
  } catch (error) {
    if (error instanceof LeaseRecordError) {
      // A record that does not parse is suspect, never absent: say so and fail.
      print(
        context,
        `the lease record is not valid: ${error.message}\nNo instance will treat the prefix as free until it has seen this record unchanged for one TTL.`,
      );
      return EXIT_FAILED;
    }
    throw error;
  }
  const remote = !['file', 'memory'].includes(parseStoreUrl(url).scheme);
  const measured = await measureExclusion(store, prefix, remote);
  const { exclusion } = measured;
  const exclusionLine = `exclusion: ${exclusion} (${measured.detail})`;
  if (!found) {
    if (context.values.json)
      printJson(context, { held: false, exclusion, exclusionDetail: measured.detail });
    else
      print(
        context,
        `no lease: nobody has backed up to this prefix yet, or the record was removed\n${exclusionLine}`,
      );
    return EXIT_OK;
  }
  const { record } = found;
  const state = leaseState(record, now);
  const expiresAt = record.renewedAt + record.ttlSeconds * 1000;
  const local = localHolder(record, database);
  if (context.values.json) {
    printJson(context, {
      state,
      record,
      expiresAt: instant(expiresAt),
      ...(local ? { local } : {}),
      exclusion,
      exclusionDetail: measured.detail,
    });
    return EXIT_OK;
  }
  const localLine = local ? [`on this host: ${local.holder} (${local.detail})`] : [];
  print(context, [...recordLines(record, state, now), ...localLine, exclusionLine].join('\n'));
  return EXIT_OK;
}

type LeaseState = 'released' | 'suspect' | 'held' | 'expired';

/**
 * What a reader makes of a record at `now`: released, suspect (renewed in
 * the future beyond its TTL, or a TTL over @x/lease's sane maximum), held,
 * or expired.
 */
function leaseState(record: LeaseRecord, now: number): LeaseState {
  if (record.released) return 'released';
  const ttlMs = record.ttlSeconds * 1000;
  if (record.ttlSeconds > MAX_SANE_TTL_S || record.renewedAt - now > ttlMs) return 'suspect';
  return record.renewedAt + ttlMs > now ? 'held' : 'expired';
}

function recordLines(record: LeaseRecord, state: LeaseState, now: number): string[] {
  const expiresAt = record.renewedAt + record.ttlSeconds * 1000;
  const lines = [
    `state: ${state}`,
    `holder: ${record.host} (pid ${record.pid}, instance ${record.instanceId})`,
    `acquired: ${instant(record.acquiredAt)}`,
    `renewed: ${instant(record.renewedAt)} (${record.renewedAt > now ? `${seconds(record.renewedAt - now)} in the future` : `${seconds(now - record.renewedAt)} ago`} by this machine's clock)`,
    `ttl: ${record.ttlSeconds}s, generation ${record.generation}${record.term !== undefined ? `, term ${record.term}` : ''}`,
  ];
  if (state === 'held')
    lines.push(
      `may be taken over in: ${seconds(expiresAt - now)} (at ${instant(expiresAt)}) unless renewed`,
    );
  if (state === 'expired') lines.push('may be taken over now: it was not renewed within its TTL');
  if (state === 'suspect') {
    lines.push(
      'suspect: renewed in the future beyond its TTL, or a TTL over the sane maximum; another instance takes it over after seeing it unchanged for one of its own TTLs',
    );
  }
  if (state === 'released')
    lines.push(
      'released by its holder: the prefix is free (the generation is kept so the next holder gets a higher one)',
    );
  return lines;
}
