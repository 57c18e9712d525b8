/**
 * A read replica of a SQLite backup: the latest state restored into a
 * private copy beside the target, then each new segment checked and applied
 * to that copy (a full restore for a new generation or a broken chain), and
 * every state published to the target under SQLite's lock (publish.ts), so
 * readers only ever see whole states, in commit order. One request per poll
 * while nothing changes; never writes to the bucket. Guarantees and costs:
 * the package README; why: docs/decisions/2026-12-07-follow-publish.md.
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
  parseManifestKey,
  segmentGenerationPrefix,
} from '@x/manifest';
import {
  NoRestorePointError,
  ObjectEncodingError,
  ObjectKeyError,
  type RestorePointTarget,
  type RestoreResult,
  readLatest,
  restore,
} from '@x/restore';
import {
  applyCommitsInPlace,
  ensureSidecarDirectory,
  lastCommitTimeOf,
  SQLITE_SIDECAR_NAMES,
  sqliteCommitAtTime,
  sqliteMaterializer,
  sqliteSidecarDirectoryName,
  sqliteSidecarFiles,
  writeAtomically,
} from '@x/source-sqlite';
import { getCapped, isTooLarge, normalizePrefix, type ObjectStore } from '@x/store';
import { FollowError } from './follow-errors.ts';
import { type FollowedChain, type NextSegment, readNextSegment } from './next-segment.ts';
import { createTarget, publishState } from './publish.ts';

/** Default time between two polls of the bucket. */
export const DEFAULT_FOLLOW_POLL_MS = 1000;
/** Default: every 10th poll reads `LATEST`'s version instead of probing for the next segment. */
export const DEFAULT_LATEST_EVERY_POLLS = 10;

export interface SqliteFollowOptions {
  /** Time between two polls (ms). Default {@link DEFAULT_FOLLOW_POLL_MS}. */
  readonly pollIntervalMs?: number;
  /**
   * Look for each shipped segment (true, the default: one LIST of one key
   * prefix per poll; the lag is about the writer's ship interval plus a
   * poll), or only at `LATEST` (false: one HEAD per poll, billed as a GET
   * where a LIST is billed as a PUT; the lag is then up to the writer's
   * restore-point interval plus a poll, and each new restore point is
   * applied from the segments it names).
   */
  readonly segments?: boolean;
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
  /**
   * Time travel: show the newest state recorded at or before this time
   * (ms since the epoch), and end the iteration once the bucket holds a
   * commit after it. The target is then left as a restore to that time
   * leaves a database, without a lineage of its own (a `replicate` on it
   * starts a new one, as after a restore).
   */
  readonly until?: number;
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

/** Segments of a backlog applied (and checked) as one state, at most. */
const MAX_SEGMENTS_PER_STATE = 64;
/** Decoded log bytes of a backlog held for one state, at most. */
const MAX_BYTES_PER_STATE = 64 * 1024 * 1024;

/** How long the look at LATEST at a stop may take. */
const LAST_LOOK_MS = 5000;

/** The file marking a target as written by a follow, in its sidecar directory. */
const FOLLOW_MARKER = 'follow';

/**
 * Follows the backup at `prefix` of `store` into the database file
 * `targetPath`. Fails (when iterated) with FollowError for a target it
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
  /** Where the applied log ends (`null`: no probing for segments until LATEST moves). */
  #chain: FollowedChain | null = null;
  /** A state staged and not yet published (readers kept the lock): published before anything else. */
  #pending: Pending | null = null;
  /** The staged copy of the applied state failed part way through an update: only a restore rebuilds it. */
  #stagedStale = false;
  /** With `until`: the bucket holds a commit after it, and the target shows the newest before. */
  #reached = false;
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
      throw new FollowError('a follower is iterated once', this.#target, 'FOLLOW_TARGET_INVALID');
    this.#started = true;
    const signal = this.#options.signal;
    this.#checkTarget();
    try {
      let timed = true;
      while (signal?.aborted !== true && !this.#reached) {
        const applied = await this.#step(Date.now(), timed);
        if (applied !== null) yield applied;
        // A state older than a poll means a backlog: look again at once.
        timed = applied === null || !this.#behind(applied);
        if (timed && !this.#reached)
          await sleep(this.#pollMs, undefined, signal === undefined ? {} : { signal }).catch(
            () => {},
          );
      }
      await this.#leaveAsRestored();
    } finally {
      await rm(this.#staging, { recursive: true, force: true }).catch(() => {});
    }
  }

  /** Whether the newest commit `state` holds is older than a poll: more may be waiting. */
  #behind(state: FollowedState): boolean {
    return state.commitTime !== null && Date.now() - state.commitTime > this.#pollMs;
  }

  /**
   * One poll, and what it found applied. Failures other than fatal ones
   * wait for the next poll. `timed`: a poll after the interval (an
   * immediate one after a state never checks LATEST, so the segment probe
   * is not skipped while catching up).
   */
  async #step(pollStart: number, timed: boolean): Promise<FollowedState | null> {
    try {
      const applied = await this.#stepOnce(pollStart, timed);
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

  async #stepOnce(pollStart: number, timed: boolean): Promise<FollowedState | null> {
    if (this.#pending !== null) return this.#publishPending();
    if (this.#applied === null) return this.#catchUp(pollStart);
    const found = await this.#poll(timed);
    if (found.kind === 'none') {
      this.#upToDateAt = pollStart;
      return null;
    }
    if (found.kind === 'segments') {
      const extended = await this.#extend(found.keys, pollStart);
      if (extended !== undefined) return extended;
    }
    if (this.#reached) return null;
    return this.#catchUp(pollStart);
  }

  /** What the bucket may hold beyond the applied state: one request. */
  async #poll(timed: boolean): Promise<Poll> {
    if (timed) this.#polls += 1;
    const signal = this.#options.signal;
    const call = signal === undefined ? {} : { signal };
    const chain = this.#chain;
    const latestDue =
      this.#options.segments === false || (timed && this.#polls % this.#latestEvery === 0);
    if (chain !== null && !this.#stagedStale && !latestDue) {
      const listed = await this.#store.list(nextSegmentPrefix(this.#prefix, chain), call);
      return listed.objects.length === 0
        ? { kind: 'none' }
        : { kind: 'segments', keys: listed.objects.map((object) => object.key) };
    }
    const head = await this.#store.head(latestKey(this.#prefix), call);
    const version = head === null ? null : versionOf(head);
    if (version === this.#latestVersion && !this.#stagedStale) return { kind: 'none' };
    const found: Poll = this.#stagedStale ? { kind: 'restore' } : await this.#latestMoved();
    // Known now: a later poll compares with it (a LATEST naming what is
    // applied, or older, is no reason to restore again).
    this.#latestVersion = version;
    return found;
  }

  /**
   * The next segment of the applied log, applied to the staged copy and
   * published. `undefined` when it does not continue the chain, or fails a
   * check: a restore of the latest state then decides what is newest.
   */
  async #extend(
    keys: readonly string[],
    detectedAt: number,
  ): Promise<FollowedState | null | undefined> {
    const chain = this.#chain;
    const before = this.#applied;
    if (chain === null || before === null || this.#stagedStale) return undefined;
    const signal = this.#options.signal;
    const read = (found: readonly string[], after: FollowedChain) =>
      readNextSegment(this.#store, this.#prefix, found, after, {
        identities: this.#options.identities ?? [],
        ...(signal === undefined ? {} : { signal }),
      });
    let first: NextSegment | null;
    try {
      first = await read(keys, chain);
    } catch (error) {
      if (ObjectEncodingError.isInstance(error)) return undefined;
      throw error;
    }
    if (first === null) return undefined;
    // Behind (a backlog): the segments after it too, applied and checked as one state.
    const segments = [first];
    let held = first.body.byteLength;
    const readOrEnd = (found: readonly string[], after: FollowedChain) =>
      read(found, after).catch((error: unknown) => {
        if (ObjectEncodingError.isInstance(error)) return null;
        throw error;
      });
    while (segments.length < MAX_SEGMENTS_PER_STATE && held < MAX_BYTES_PER_STATE) {
      const last = segments.at(-1)!;
      // The next one among the keys already known (a restore point's), else,
      // while behind and probing, listed.
      let more = await readOrEnd(keys, last.chain);
      if (more === null) {
        const newest = lastCommitTimeOf(last.body);
        const behind = newest !== null && Date.now() - newest > this.#pollMs;
        if (!behind || this.#options.segments === false) break;
        const listed = await this.#store.list(
          nextSegmentPrefix(this.#prefix, last.chain),
          signal === undefined ? {} : { signal },
        );
        more = await readOrEnd(
          listed.objects.map((object) => object.key),
          last.chain,
        );
      }
      if (more === null) break;
      segments.push(more);
      held += more.body.byteLength;
    }
    const next = {
      bodies: segments.map((segment) => segment.body),
      commits: segments.reduce((sum, segment) => sum + segment.commits, 0),
      bytes: segments.reduce((sum, segment) => sum + segment.bytes, 0),
      chain: segments.at(-1)!.chain,
    };
    const current = join(this.#staging, 'current');
    let applied: Awaited<ReturnType<typeof applyCommitsInPlace>>;
    try {
      const until = this.#options.until;
      applied = await applyCommitsInPlace(join(current, basename(this.#target)), next.bodies, {
        ...(signal === undefined ? {} : { signal }),
        ...(until === undefined ? {} : { time: until }),
      });
    } catch (error) {
      this.#stagedStale = true;
      throw error;
    }
    // A commit after `until`: what is applied is the newest state before it.
    if (applied.commitsApplied < next.commits) this.#reached = true;
    if (applied.commitsApplied === 0) return null;
    const commitSeq = before.commitSeq + applied.commitsApplied;
    await this.#writeStagedRecords(current, before.manifestKey, commitSeq);
    this.#pending = {
      directory: current,
      chain: this.#reached ? null : next.chain,
      mayDiffer: applied.pagesWritten,
      state: {
        ...before,
        commitSeq,
        commitTime: applied.lastCommitTime ?? before.commitTime,
        commitsApplied: applied.commitsApplied,
        objects: segments.length,
        bytes: next.bytes,
        detectedAt,
      },
    };
    return this.#publishPending();
  }

  /**
   * What the restore point LATEST names holds beyond the applied state: the
   * segments it names, when it extends the applied generation; a restore,
   * for another generation or lineage, or when it cannot be read (restore
   * decides); nothing, when it is not newer.
   */
  async #latestMoved(signal = this.#options.signal): Promise<Poll> {
    const applied = this.#applied;
    if (applied === null) return { kind: 'restore' };
    const reading = await readLatest(this.#store, this.#prefix, signal);
    if (reading.state !== 'ok') return { kind: 'restore' };
    if (reading.manifestKey === applied.manifestKey) return { kind: 'none' };
    const found = await getCapped(
      this.#store,
      reading.manifestKey,
      MAX_MANIFEST_BYTES,
      signal === undefined ? {} : { signal },
    );
    if (found === null || isTooLarge(found)) return { kind: 'restore' };
    try {
      const manifest = parseManifest(found.body, { prefix: this.#prefix });
      this.#newestKnown = Math.max(this.#newestKnown, manifest.commitSeq);
      const sameGeneration =
        manifest.lineage === applied.lineage && manifest.walGeneration === applied.walGeneration;
      const named = parseManifestKey(this.#prefix, applied.manifestKey) ?? 0;
      if (sameGeneration && manifest.commitSeq <= applied.commitSeq && manifest.commitSeq >= named)
        await this.#adoptRestorePoint(reading.manifestKey);
      if (!sameGeneration) return { kind: 'restore' };
      if (manifest.commitSeq <= applied.commitSeq) return { kind: 'none' };
      return { kind: 'segments', keys: manifest.segments.map((segment) => segment.key) };
    } catch (error) {
      if (FollowError.isInstance(error)) throw error;
      return { kind: 'restore' };
    }
  }

  /**
   * A newer restore point the applied state extends (the writer named what
   * the follower had rolled forward to, or part of it): the target's parent
   * record names it, so a `replicate` on the target, whose check is that
   * LATEST names the restore point it came from, continues from it.
   */
  async #adoptRestorePoint(manifestKey: string): Promise<void> {
    const applied = this.#applied;
    if (applied === null || applied.manifestKey === manifestKey || this.#pending !== null) return;
    const current = join(this.#staging, 'current');
    await this.#writeStagedRecords(current, manifestKey, applied.commitSeq);
    await this.#copySidecars(current);
    this.#applied = { ...applied, manifestKey };
  }

  /** Restores the latest state into staging and publishes it when it moves the target forward. */
  async #catchUp(detectedAt: number): Promise<FollowedState | null> {
    const before = this.#applied;
    let commitTime: number | null = null;
    const next = join(this.#staging, 'next');
    await mkdir(next, { recursive: true, mode: 0o700 });
    const target = await this.#untilTarget();
    const result: RestoreResult = await restore(this.#store, this.#prefix, next, {
      ...(target === undefined ? {} : { target }),
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
    this.#newestKnown = Math.max(this.#newestKnown, result.commitSeq);
    const chain = chainOf(result);
    if (before !== null && !this.#stagedStale) {
      const sameHistory = before.lineage === result.lineage;
      const moved =
        !sameHistory ||
        result.walGeneration !== before.walGeneration ||
        result.commitSeq > before.commitSeq;
      if (!moved || (sameHistory && result.commitSeq < before.commitSeq)) {
        // What was found did not chain (or LATEST fell back to something
        // older): no probing for segments until LATEST moves.
        this.#chain = null;
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
    this.#pending = {
      directory: next,
      chain,
      state: {
        commitSeq: result.commitSeq,
        manifestKey: result.manifestKey,
        lineage: result.lineage,
        walGeneration: result.walGeneration,
        commitTime,
        commitsApplied:
          before === null || before.lineage !== result.lineage
            ? result.commitSeq
            : Math.max(0, result.commitSeq - before.commitSeq),
        objects: result.objects,
        bytes: result.bytes,
        detectedAt,
      },
    };
    return this.#publishPending();
  }

  /**
   * With `until`: the restore point and commit of the newest state at or
   * before it, and whether the bucket holds a commit after it already
   * (then this state is the last). Without: `undefined` (the latest state).
   */
  async #untilTarget(): Promise<RestorePointTarget | undefined> {
    const until = this.#options.until;
    if (until === undefined) return undefined;
    const search = {
      identities: this.#options.identities ?? [],
      ...(this.#options.signal === undefined ? {} : { signal: this.#options.signal }),
    };
    const [found, newest] = await Promise.all([
      sqliteCommitAtTime(this.#store, this.#prefix, until, search),
      sqliteCommitAtTime(this.#store, this.#prefix, Number.MAX_SAFE_INTEGER, search),
    ]);
    if (newest === null)
      throw new NoRestorePointError(this.#prefix, 'nothing is backed up at this prefix yet');
    if (found === null)
      throw new FollowError(
        `nothing in the backup was committed at or before ${new Date(until).toISOString()} (its oldest restorable commit is later)`,
        this.#target,
        'FOLLOW_UNTIL_BEFORE_BACKUP',
      );
    if (newest.commitTime > until) this.#reached = true;
    return found.target;
  }

  /** The staged state into the target, its records beside it; it becomes the applied state. */
  async #publishPending(): Promise<FollowedState> {
    const pending = this.#pending!;
    const pagesWritten = this.#publish(pending.directory, 'rollback', pending.mayDiffer);
    await this.#copySidecars(pending.directory);
    const current = join(this.#staging, 'current');
    if (pending.directory !== current) {
      // What readers see now is kept, for the next segment and the last write at stop.
      await rm(current, { recursive: true, force: true });
      await rename(pending.directory, current);
      this.#stagedStale = false;
    }
    const state: FollowedState = { ...pending.state, pagesWritten, publishedAt: Date.now() };
    this.#pending = null;
    this.#chain = pending.chain;
    this.#applied = state;
    this.#statesApplied += 1;
    this.#upToDateAt = pending.state.detectedAt;
    return state;
  }

  /**
   * At a stop: the target byte for byte the staged state, as restore leaves
   * a database (WAL mode), for `replicate` to continue from. The writer may
   * have named the applied state in a restore point since the last look at
   * LATEST: the parent record then names it.
   */
  async #leaveAsRestored(): Promise<void> {
    if (this.#applied === null && this.#pending === null) return;
    const directory = this.#pending?.directory ?? join(this.#staging, 'current');
    if (this.#pending === null && this.#options.until === undefined)
      await this.#latestMoved(AbortSignal.timeout(LAST_LOOK_MS)).catch(() => undefined);
    if (this.#stagedStale && this.#pending === null) return;
    this.#publish(directory, 'as-restored');
    await this.#copySidecars(directory);
    // The target's own lineage: `replicate` on it then continues that
    // lineage (and its generation, once it proves the image is the
    // bucket's state) instead of starting a new one as for an adopted copy.
    const lineage = (this.#pending?.state ?? this.#applied)?.lineage;
    if (lineage !== undefined && this.#options.until === undefined)
      await writeAtomically(sqliteSidecarFiles(this.#target).lineage, `${lineage}\n`);
  }

  /** The staged database into the target; returns the pages written. */
  #publish(
    directory: string,
    header: 'rollback' | 'as-restored',
    mayDiffer?: ReadonlySet<number>,
  ): number {
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
      ...(mayDiffer === undefined ? {} : { mayDiffer }),
    });
    this.#counter = published.counter;
    return published.pagesWritten;
  }

  /** The commit count and parent record of a staged state, as a restore writes them. */
  async #writeStagedRecords(
    directory: string,
    manifestKey: string,
    commitSeq: number,
  ): Promise<void> {
    const applied = this.#applied!;
    const records = join(directory, sqliteSidecarDirectoryName(basename(this.#target)));
    await mkdir(records, { recursive: true, mode: 0o700 });
    await writeAtomically(
      join(records, SQLITE_SIDECAR_NAMES.state),
      `${JSON.stringify({ commitCount: commitSeq })}\n`,
    );
    await writeAtomically(
      join(records, SQLITE_SIDECAR_NAMES.parent),
      `${JSON.stringify({ lineage: applied.lineage, manifestKey, commitSeq })}\n`,
    );
  }

  /** The staged state's records beside the target, and the follow's mark. */
  async #copySidecars(directory: string): Promise<void> {
    const from = join(directory, sqliteSidecarDirectoryName(basename(this.#target)));
    const to = sqliteSidecarFiles(this.#target);
    ensureSidecarDirectory(this.#target);
    for (const kind of ['state', 'parent'] as const) {
      const source = join(from, SQLITE_SIDECAR_NAMES[kind]);
      if (existsSync(source)) await writeAtomically(to[kind], await readFile(source, 'utf8'));
    }
    // While it follows, the target has no lineage of its own (one left by
    // an earlier life of the file would claim another history); a stop
    // writes the one it shows.
    await rm(to.lineage, { force: true });
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
      throw new FollowError(
        `${this.#target} exists and was not created by a follow; follow replaces a database with the bucket's state only when forced (force / --force)`,
        this.#target,
        'FOLLOW_TARGET_FOREIGN',
      );
  }
}

/** What a poll found. */
type Poll =
  | { readonly kind: 'none' }
  | { readonly kind: 'segments'; readonly keys: readonly string[] }
  | { readonly kind: 'restore' };

/** A state in staging, to be published. */
interface Pending {
  readonly directory: string;
  readonly chain: FollowedChain | null;
  /** The pages that may differ from the target's (the commits applied in place); absent: any. */
  readonly mayDiffer?: ReadonlySet<number>;
  readonly state: Omit<FollowedState, 'pagesWritten' | 'publishedAt'>;
}

/** Where a restored state's log continues. */
function chainOf(result: RestoreResult): FollowedChain | null {
  const end = result.chainEnd;
  if (end === null) return null;
  return {
    lineage: result.lineage,
    generation: result.walGeneration,
    end: end.end,
    crc32: Number.parseInt(end.crc32, 16),
    ...(result.encryption === undefined ? {} : { encryption: result.encryption }),
  };
}

/** The listing prefix of the segment that would continue `chain`. */
function nextSegmentPrefix(prefix: string, chain: FollowedChain): string {
  return `${segmentGenerationPrefix(prefix, chain.generation)}${pad20(chain.end)}-`;
}

function versionOf(head: {
  readonly size: number;
  readonly version: { readonly etag?: string; readonly generation?: string };
}): string {
  return `${head.version.etag ?? ''}|${head.version.generation ?? ''}|${head.size}`;
}

/** Failures no later poll can clear. */
function isFatal(error: unknown): boolean {
  if (FollowError.isInstance(error)) return error.code !== 'FOLLOW_LOCKED';
  return ObjectKeyError.isInstance(error);
}
