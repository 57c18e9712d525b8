/**
 * A read replica of a SQLite backup: the latest state restored into a local
 * database file, then every newer state applied as it lands in the bucket,
 * until the signal aborts. Each state is restored, verified and rebuilt by
 * `@x/restore` exactly as a restore does, into a private staging directory
 * beside the target, then published to the target under SQLite's lock
 * (follow-publish.ts), so readers of the target only ever see whole states,
 * in commit order. Never writes to the bucket.
 *
 * Polling costs one request per poll while nothing changes: a listing of
 * the one key prefix the next chained segment of the applied state would
 * have, and every `latestEveryPolls`-th poll a HEAD of `LATEST` instead
 * (new generations, a restore point past a broken chain). Guarantees and
 * costs: the package README, _Following a backup_.
 */
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, readFile, rename, rm } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { AgeIdentity } from '@x/age-envelope';
import {
  latestKey,
  MAX_MANIFEST_BYTES,
  pad20,
  parseManifest,
  parseSegmentKey,
  segmentGenerationPrefix,
} from '@x/manifest';
import {
  NoRestorePointError,
  ObjectKeyError,
  type RestoreResult,
  readLatest,
  restore,
} from '@x/restore';
import { getCapped, isTooLarge, normalizePrefix, type ObjectStore } from '@x/store';
import { createTarget, publishState } from './follow-publish.ts';
import {
  ensureSidecarDirectory,
  SQLITE_SIDECAR_NAMES,
  sqliteSidecarDirectoryName,
  sqliteSidecarFiles,
  writeAtomically,
} from './sidecar-files.ts';
import { SqliteFollowError } from './sqlite-errors.ts';
import { sqliteMaterializer } from './sqlite-materializer.ts';

/** Default time between two polls of the bucket. */
export const DEFAULT_FOLLOW_POLL_MS = 1000;
/** Default: every 10th poll reads `LATEST`'s version instead of probing for the next segment. */
export const DEFAULT_LATEST_EVERY_POLLS = 10;

export interface SqliteFollowOptions {
  /** Time between two polls (ms). Default {@link DEFAULT_FOLLOW_POLL_MS}. */
  readonly pollIntervalMs?: number;
  /** Every how many polls `LATEST` is checked instead of the next segment. Default {@link DEFAULT_LATEST_EVERY_POLLS}. */
  readonly latestEveryPolls?: number;
  /** What opens encrypted objects (several across a rotation). */
  readonly identities?: readonly AgeIdentity[];
  /** Stops following; the target is then left as the last state, ready for `replicate` (see {@link SqliteFollower}). */
  readonly signal?: AbortSignal;
  /** Take over a target this follow did not create (it is replaced by the bucket's state). Default false. */
  readonly force?: boolean;
  /** How long a publish waits for readers' transactions to end (ms). Default 5000. */
  readonly busyTimeoutMs?: number;
  /** Each poll and failure, for logs and status. */
  readonly onEvent?: (event: FollowEvent) => void;
}

/** One state published to the target. */
export interface FollowedState {
  readonly commitSeq: number;
  readonly manifestKey: string;
  readonly lineage: string;
  readonly walGeneration: number;
  /** Recorded time of the state's last commit (ms), `null` when the backup does not record it. */
  readonly commitTime: number | null;
  /** Commits beyond the state shown before (all of them for the first). */
  readonly commitsApplied: number;
  /** Objects and stored bytes downloaded for it. */
  readonly objects: number;
  readonly bytes: number;
  /** Pages of the target written. */
  readonly pagesWritten: number;
  /** When the change was seen, and when readers could see it (ms). */
  readonly detectedAt: number;
  readonly publishedAt: number;
}

export type FollowEvent =
  | { readonly kind: 'waiting'; readonly reason: string }
  | { readonly kind: 'retrying'; readonly error: unknown }
  | { readonly kind: 'skipped'; readonly reason: string }
  | { readonly kind: 'lineage-changed'; readonly from: string; readonly to: string };

/** How far behind the bucket the target is, as of now. */
export interface FollowLag {
  /** The state readers see; `null` before the first. */
  readonly applied: FollowedState | null;
  /**
   * Seconds since the follower last knew the target up to date: the start
   * of the newest poll that found nothing newer, or of the catch-up that
   * applied what it found. About half a poll while caught up; grows while
   * polls fail or a catch-up runs.
   */
  readonly lagSeconds: number;
  /** Commits the bucket is known to hold beyond the applied state (0 when caught up as of the last poll). */
  readonly commitsBehind: number;
  readonly polls: number;
  readonly statesApplied: number;
  /** The last failure while it is not followed by a success. */
  readonly lastError?: string;
}

/**
 * A running follow. Iterate it for each state published; `lag()` at any
 * time. When the signal aborts, the iteration ends after the target is
 * written once more exactly as restored (WAL mode, page for page the
 * backup's state), so `backupd replicate` can continue the same generation
 * from it; readers should reopen it then.
 */
export interface SqliteFollower extends AsyncIterable<FollowedState> {
  lag(): FollowLag;
}

/** How long the look at LATEST at a stop may take. */
const LAST_LOOK_MS = 5000;

/** The file marking a target as written by a follow, in its sidecar directory. */
const FOLLOW_MARKER = 'follow';

/**
 * Follows the backup at `prefix` of `store` into the database file
 * `targetPath`. Fails (when iterated) with SqliteFollowError for a target it
 * did not create (without `force`) or one written by someone else meanwhile,
 * and with ObjectKeyError when the identities open nothing; store errors and
 * refused objects are retried at the next poll, the target showing the last
 * good state.
 */
export function followSqlite(
  store: ObjectStore,
  prefix: string,
  targetPath: string,
  options: SqliteFollowOptions = {},
): SqliteFollower {
  return new Follower(store, normalizePrefix(prefix), resolve(targetPath), options);
}

class Follower implements SqliteFollower {
  readonly #store: ObjectStore;
  readonly #prefix: string;
  readonly #target: string;
  readonly #staging: string;
  readonly #options: SqliteFollowOptions;
  readonly #pollMs: number;
  readonly #latestEvery: number;
  #applied: FollowedState | null = null;
  /** Where the next chained segment's key starts (`null`: no probing until LATEST moves). */
  #nextSegmentPrefix: string | null = null;
  #latestVersion: string | null = null;
  #counter: number | null = null;
  #upToDateAt = Date.now();
  #newestKnown = 0;
  #polls = 0;
  #statesApplied = 0;
  #lastError: string | undefined;
  #started = false;

  constructor(store: ObjectStore, prefix: string, target: string, options: SqliteFollowOptions) {
    this.#store = store;
    this.#prefix = prefix;
    this.#target = target;
    this.#staging = join(dirname(target), `.${basename(target)}-follow`);
    this.#options = options;
    this.#pollMs = options.pollIntervalMs ?? DEFAULT_FOLLOW_POLL_MS;
    this.#latestEvery = Math.max(1, options.latestEveryPolls ?? DEFAULT_LATEST_EVERY_POLLS);
  }

  lag(): FollowLag {
    return {
      applied: this.#applied,
      lagSeconds: Math.max(0, (Date.now() - this.#upToDateAt) / 1000),
      commitsBehind: Math.max(0, this.#newestKnown - (this.#applied?.commitSeq ?? 0)),
      polls: this.#polls,
      statesApplied: this.#statesApplied,
      ...(this.#lastError === undefined ? {} : { lastError: this.#lastError }),
    };
  }

  async *[Symbol.asyncIterator](): AsyncIterator<FollowedState> {
    if (this.#started)
      throw new SqliteFollowError(
        'a follower is iterated once',
        this.#target,
        'SQLITE_FOLLOW_TARGET_INVALID',
      );
    this.#started = true;
    const signal = this.#options.signal;
    this.#checkTarget();
    try {
      while (signal?.aborted !== true) {
        const pollStart = Date.now();
        const applied = await this.#step(pollStart);
        if (applied !== null) yield applied;
        await sleep(this.#pollMs, undefined, signal === undefined ? {} : { signal }).catch(
          () => {},
        );
      }
      if (this.#applied !== null) {
        // The writer may have named the applied state in a restore point
        // since the last look at LATEST: a promotion continues from it.
        await this.#latestIsNewer(AbortSignal.timeout(LAST_LOOK_MS)).catch(() => false);
        this.#publish(join(this.#staging, 'current'), 'as-restored');
      }
    } finally {
      await rm(this.#staging, { recursive: true, force: true }).catch(() => {});
    }
  }

  /** One poll, and a catch-up when it found something newer. */
  async #step(pollStart: number): Promise<FollowedState | null> {
    try {
      const changed = this.#applied === null || (await this.#poll());
      if (!changed) {
        this.#upToDateAt = pollStart;
        this.#lastError = undefined;
        return null;
      }
      const applied = await this.#catchUp(pollStart);
      this.#lastError = undefined;
      return applied;
    } catch (error) {
      if (this.#options.signal?.aborted === true) return null;
      if (isFatal(error)) throw error;
      this.#lastError = error instanceof Error ? error.message : String(error);
      this.#options.onEvent?.(
        NoRestorePointError.isInstance(error)
          ? { kind: 'waiting', reason: this.#lastError }
          : { kind: 'retrying', error },
      );
      return null;
    }
  }

  /** Whether the bucket may hold a newer state: one request. */
  async #poll(): Promise<boolean> {
    this.#polls += 1;
    const signal = this.#options.signal;
    const call = signal === undefined ? {} : { signal };
    if (this.#nextSegmentPrefix !== null && this.#polls % this.#latestEvery !== 0) {
      const listed = await this.#store.list(this.#nextSegmentPrefix, call);
      return listed.objects.length > 0;
    }
    const head = await this.#store.head(latestKey(this.#prefix), call);
    const version = head === null ? null : versionOf(head);
    if (version === this.#latestVersion) return false;
    const newer = await this.#latestIsNewer();
    // Known now: a later poll compares with it (a LATEST naming what is
    // applied, or older, is no reason to restore again).
    this.#latestVersion = version;
    return newer;
  }

  /** Whether the restore point LATEST names is newer than the applied state (an unreadable one counts as newer: restore decides). */
  async #latestIsNewer(signal = this.#options.signal): Promise<boolean> {
    const applied = this.#applied;
    if (applied === null) return true;
    const reading = await readLatest(this.#store, this.#prefix, signal);
    if (reading.state !== 'ok') return true;
    if (reading.manifestKey === applied.manifestKey) return false;
    const found = await getCapped(
      this.#store,
      reading.manifestKey,
      MAX_MANIFEST_BYTES,
      signal === undefined ? {} : { signal },
    );
    if (found === null || isTooLarge(found)) return true;
    try {
      const manifest = parseManifest(found.body, { prefix: this.#prefix });
      this.#newestKnown = Math.max(this.#newestKnown, manifest.commitSeq);
      const sameGeneration =
        manifest.lineage === applied.lineage && manifest.walGeneration === applied.walGeneration;
      if (sameGeneration && manifest.commitSeq === applied.commitSeq)
        await this.#adoptRestorePoint(reading.manifestKey);
      return !sameGeneration || manifest.commitSeq > applied.commitSeq;
    } catch (error) {
      if (SqliteFollowError.isInstance(error)) throw error;
      return true;
    }
  }

  /**
   * A newer restore point of the applied state itself (the writer named
   * what the follower had rolled forward to): the target's parent record
   * names it, so a `replicate` on the target, whose check is that LATEST
   * names the restore point it came from, continues from it.
   */
  async #adoptRestorePoint(manifestKey: string): Promise<void> {
    const applied = this.#applied;
    if (applied === null || applied.manifestKey === manifestKey) return;
    const parent = { lineage: applied.lineage, manifestKey, commitSeq: applied.commitSeq };
    await writeAtomically(sqliteSidecarFiles(this.#target).parent, `${JSON.stringify(parent)}\n`);
    this.#applied = { ...applied, manifestKey };
  }

  /** Restores the latest state into staging and publishes it when it moves the target forward. */
  async #catchUp(detectedAt: number): Promise<FollowedState | null> {
    const before = this.#applied;
    let commitTime: number | null = null;
    const next = join(this.#staging, 'next');
    await mkdir(next, { recursive: true, mode: 0o700 });
    const result: RestoreResult = await restore(this.#store, this.#prefix, next, {
      materializer: sqliteMaterializer({
        databaseName: basename(this.#target),
        onRebuilt: (rebuilt) => {
          commitTime = rebuilt.commitTime;
        },
      }),
      force: true,
      identities: this.#options.identities ?? [],
      ...(this.#options.signal === undefined ? {} : { signal: this.#options.signal }),
    });
    this.#nextSegmentPrefix = nextSegmentPrefix(this.#prefix, result);
    this.#newestKnown = Math.max(this.#newestKnown, result.commitSeq);
    if (before !== null) {
      const sameHistory = before.lineage === result.lineage;
      const moved =
        !sameHistory ||
        result.walGeneration !== before.walGeneration ||
        result.commitSeq > before.commitSeq;
      if (!moved || (sameHistory && result.commitSeq < before.commitSeq)) {
        // What was found did not chain (or LATEST fell back to something
        // older): no probing for segments until LATEST moves.
        if (result.commitSeq <= before.commitSeq) this.#nextSegmentPrefix = null;
        this.#upToDateAt = detectedAt;
        this.#options.onEvent?.({
          kind: 'skipped',
          reason: `the newest state found (commit ${result.commitSeq}) is not newer than the one shown (commit ${before.commitSeq})`,
        });
        return null;
      }
      if (!sameHistory)
        this.#options.onEvent?.({
          kind: 'lineage-changed',
          from: before.lineage,
          to: result.lineage,
        });
    }
    const pagesWritten = this.#publish(next, 'rollback');
    await this.#copySidecars(next);
    // What readers see now is kept, for the last write at stop.
    const current = join(this.#staging, 'current');
    await rm(current, { recursive: true, force: true });
    await rename(next, current);
    const state: FollowedState = {
      commitSeq: result.commitSeq,
      manifestKey: result.manifestKey,
      lineage: result.lineage,
      walGeneration: result.walGeneration,
      commitTime,
      commitsApplied:
        before === null || before.lineage !== result.lineage
          ? result.commitSeq
          : result.commitSeq - before.commitSeq,
      objects: result.objects,
      bytes: result.bytes,
      pagesWritten,
      detectedAt,
      publishedAt: Date.now(),
    };
    this.#applied = state;
    this.#statesApplied += 1;
    this.#upToDateAt = detectedAt;
    return state;
  }

  /** The staged database into the target; returns the pages written. */
  #publish(directory: string, header: 'rollback' | 'as-restored'): number {
    const staged = join(directory, basename(this.#target));
    if (!existsSync(this.#target)) {
      const created = createTarget(this.#target, staged);
      this.#counter = created.counter;
      return created.pagesWritten;
    }
    const published = publishState(this.#target, staged, {
      header,
      busyTimeoutMs: this.#options.busyTimeoutMs ?? 5000,
      ...(this.#counter === null ? {} : { expectedCounter: this.#counter }),
    });
    this.#counter = published.counter;
    return published.pagesWritten;
  }

  /** The restore's lineage, state and parent records beside the target, and the follow's mark. */
  async #copySidecars(directory: string): Promise<void> {
    const from = join(directory, sqliteSidecarDirectoryName(basename(this.#target)));
    const to = sqliteSidecarFiles(this.#target);
    ensureSidecarDirectory(this.#target);
    for (const kind of ['lineage', 'state', 'parent'] as const) {
      const source = join(from, SQLITE_SIDECAR_NAMES[kind]);
      if (existsSync(source)) await writeAtomically(to[kind], await readFile(source, 'utf8'));
    }
    // A record a replicate left is about another image: never a proof for this one.
    await rm(to.resume, { force: true });
    await writeAtomically(
      join(to.directory, FOLLOW_MARKER),
      `${JSON.stringify({ prefix: this.#prefix })}\n`,
    );
  }

  /** Refuses a target this follow did not create, unless forced. */
  #checkTarget(): void {
    if (!existsSync(this.#target) || this.#options.force === true) return;
    const marker = join(sqliteSidecarFiles(this.#target).directory, FOLLOW_MARKER);
    let follows: string | undefined;
    try {
      follows = (JSON.parse(readFileSync(marker, 'utf8')) as { prefix?: string }).prefix;
    } catch {
      follows = undefined;
    }
    if (follows === undefined)
      throw new SqliteFollowError(
        `${this.#target} exists and was not created by a follow; follow replaces a database with the bucket's state only when forced (force / --force)`,
        this.#target,
        'SQLITE_FOLLOW_TARGET_FOREIGN',
      );
  }
}

/** The listing prefix of the segment that would chain after `result`'s log. */
function nextSegmentPrefix(prefix: string, result: RestoreResult): string {
  const last = result.lastSegment;
  const end = last === null ? 0 : (parseSegmentKey(prefix, last.key)?.end ?? 0);
  return `${segmentGenerationPrefix(prefix, result.walGeneration)}${pad20(end)}-`;
}

function versionOf(head: {
  readonly size: number;
  readonly version: { readonly etag?: string; readonly generation?: string };
}): string {
  return `${head.version.etag ?? ''}|${head.version.generation ?? ''}|${head.size}`;
}

/** Failures no later poll can clear. */
function isFatal(error: unknown): boolean {
  if (SqliteFollowError.isInstance(error)) return error.code !== 'SQLITE_FOLLOW_LOCKED';
  return ObjectKeyError.isInstance(error);
}
