/**
 * `SqliteSource`: a live SQLite database in WAL mode as the worker's source,
 * built on {@link SqliteTap}. What it ships is the tap's commit log, which
 * runs on across SQLite's WAL restarts, so one snapshot serves a generation
 * until continuity breaks (a replaced `-wal` or database, a restore point the
 * tap no longer holds). The commit count is the persisted `state` plus what
 * was captured; a lost state file makes the worker refuse the prefix. Its
 * files live in `.<db>-backupd/` (sidecar-files.ts; docs/format.md).
 */

import { randomUUID } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { link, unlink, writeFile } from 'node:fs/promises';
import type {
  BackupSource,
  DurablePosition,
  FileObservation,
  FrameCounting,
  GenerationCandidate,
  OpenedRestorePoint,
  ParentRecord,
  ShippedProgress,
  SourceCallOptions,
  WalRange,
} from '@x/engine';
import { FrameCounter } from '@x/wal-segment';
import { CommitLogMerger } from './commit-log-merge.ts';
import { lastCommitTimeOf } from './commit-record.ts';
import { restorePointPageHashes } from './restore-point-page-hashes.ts';
import { imageDigest, readResumeRecord, writeResumeRecord } from './resume-record.ts';
import {
  adoptLegacySidecars,
  ensureSidecarDirectory,
  type SqliteSidecarFiles,
  sqliteSidecarFiles,
  writeAtomically,
} from './sidecar-files.ts';
import {
  SqliteDatabaseReplacedError,
  SqliteDatabaseUnavailableError,
  SqliteWalRestartedUnderneathError,
} from './sqlite-errors.ts';
import { SqliteTap, type SqliteTapOptions } from './tap.ts';

/** Default of `captureIntervalMs`. */
export const DEFAULT_CAPTURE_INTERVAL_MS = 50;
/** The shortest delay between two capture ticks, however fast the WAL grows. */
const MIN_CAPTURE_INTERVAL_MS = 2;
/**
 * The most frames a tick should find landed since the previous one, when
 * that is less than half the restart threshold: an application that
 * checkpoints after every commit pays less with the held reader nearer the
 * WAL's end. Measurements: docs/decisions/2026-12-06-sqlite-checkpoint-schedule.md.
 */
export const CAPTURE_TICK_MAX_FRAMES = 500;

/** Frames a tick aims to find landed since the previous one (see {@link CAPTURE_TICK_MAX_FRAMES}). */
export function captureTickTargetFrames(truncateCheckpointPages: number): number {
  return Math.min(truncateCheckpointPages / 2, CAPTURE_TICK_MAX_FRAMES);
}

/**
 * When the next capture tick should run: once the WAL will have grown by
 * `targetFrames` at the rate it grew over the last `elapsedMs` (the time
 * actually passed since the previous tick, which need not be the timer's
 * interval), never later than `intervalMs` nor sooner than
 * {@link MIN_CAPTURE_INTERVAL_MS}. A WAL smaller after the tick than before
 * it restarted in between and grew from nothing to `framesAfter`.
 */
export function nextCaptureDelayMs(tick: {
  framesBefore: number;
  framesAfter: number;
  elapsedMs: number;
  targetFrames: number;
  intervalMs: number;
}): number {
  const { framesBefore, framesAfter, elapsedMs, intervalMs } = tick;
  const grown = framesAfter >= framesBefore ? framesAfter - framesBefore : framesAfter;
  if (grown === 0) return intervalMs;
  const target = Math.max(1, tick.targetFrames);
  return Math.min(intervalMs, Math.max(MIN_CAPTURE_INTERVAL_MS, (target * elapsedMs) / grown));
}

/** Name the snapshot travels under (the manifest's file entry). */
export const SQLITE_SNAPSHOT_NAME = 'sqlite.snapshot';

export interface SqliteSourceOptions extends SqliteTapOptions {
  /** Path of the database file. */
  readonly path: string;
  /**
   * How often the tap captures new commits, moves its read transaction
   * forward and runs its checkpoints past their thresholds, between the
   * worker's steps, in ms. Short keeps each capture small (its reads and
   * copies share the machine with the application's commits; see the SQLite
   * README's overhead measurements), keeps the frames read hot in the page
   * cache, and lets the application's own checkpoints copy in small steps
   * behind the reader. 0 turns it off (only the worker's steps capture).
   * Default 50.
   */
  readonly captureIntervalMs?: number;
}

function readJson(path: string): unknown {
  try {
    return JSON.parse(readFileSync(path, 'utf8'));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    // A damaged state file counts as missing: the worker then refuses the
    // prefix (fewer commits than its restore points), which is the safe side.
    if (error instanceof SyntaxError) return null;
    throw error;
  }
}

/**
 * Writes `text` at `path` only if no file is there (a complete file or none:
 * temporary file of its own, then a hard link, which never replaces); one
 * already there is left as it is.
 */
async function createExclusively(path: string, text: string): Promise<void> {
  const temporary = `${path}.tmp-${process.pid}-${randomUUID()}`;
  await writeFile(temporary, text, { flag: 'wx' });
  try {
    await link(temporary, path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  } finally {
    await unlink(temporary);
  }
}

export class SqliteSource implements BackupSource {
  readonly description: string;
  readonly path: string;
  readonly #options: SqliteSourceOptions;
  /** The open tap; while {@link #unavailable}, the closed tap of the replaced file (never read). */
  #tap: SqliteTap;
  /**
   * Set while the database was replaced by something the tap cannot open:
   * every call of the worker's tries to open it again and, until then,
   * throws this. `base` is the next generation's commit base.
   */
  #unavailable: { error: SqliteDatabaseUnavailableError; readonly base: number } | null = null;
  /** Commits before the current generation's snapshot. */
  #generationBase: number;
  #persistedCount: number;
  #persisting: Promise<void> = Promise.resolve();
  #timer: ReturnType<typeof setTimeout> | null = null;
  #closed = false;
  readonly #captureIntervalMs: number;
  /** When the last capture tick ran (`performance.now()`), for the WAL's growth rate. */
  #lastTickAt: number | null = null;
  /** An error the capture timer met, rethrown to the worker at its next call. */
  #timerError: unknown = null;
  /**
   * Bytes of the bucket generation's log before the tap's: 0 for a
   * generation the tap started, the continued restore point's log end for
   * one it continues (see {@link continueGeneration}). Every offset the
   * worker sees is the tap's plus this.
   */
  #logOffset = 0;
  /** The tap's generation when the source opened (the only one that may continue a bucket's). */
  readonly #openedGenerationId: string;
  /** Where its sidecar files are. */
  readonly #files: SqliteSidecarFiles;
  /** What the worker last said is in the bucket (for the record a graceful stop leaves). */
  #lastShipped: ShippedProgress | null = null;

  private constructor(options: SqliteSourceOptions) {
    this.#options = options;
    this.path = options.path;
    this.description = `sqlite:${options.path}`;
    this.#tap = SqliteTap.open(options.path, options);
    this.#files = sqliteSidecarFiles(options.path);
    try {
      adoptLegacySidecars(options.path, ['lineage', 'state', 'resume', 'parent']);
      ensureSidecarDirectory(options.path);
    } catch (error) {
      this.#tap.close();
      throw error;
    }
    const state = readJson(this.#files.state) as { readonly commitCount: number } | null;
    const counted =
      state !== null && Number.isSafeInteger(state.commitCount) && state.commitCount >= 0;
    this.#openedGenerationId = this.#tap.generationId;
    // A new generation counts one commit for the break, so its restore
    // points never share a commit count with the previous generation's.
    this.#generationBase = counted ? state.commitCount + 1 : 0;
    this.#persistedCount = -1;
    void this.#persist().catch(() => undefined);
    this.#captureIntervalMs = options.captureIntervalMs ?? DEFAULT_CAPTURE_INTERVAL_MS;
    if (this.#captureIntervalMs > 0) this.#schedule(this.#captureIntervalMs);
  }

  #schedule(delayMs: number): void {
    if (this.#closed) return;
    this.#timer = setTimeout(() => this.#tick(), delayMs);
    this.#timer.unref();
  }

  /**
   * One tick: capture, move the reader, checkpoint past the thresholds. The
   * next tick comes sooner while the WAL grows fast (by
   * {@link captureTickTargetFrames} per tick at most: half the restart
   * threshold, at most 500 frames), so the WAL restarts before it grows far
   * past that threshold and the held reader stays near the WAL's end.
   */
  #tick(): void {
    if (this.#timerError !== null) return;
    // Reopening is left to the worker's calls (at its pace, not every tick).
    if (this.#unavailable !== null) {
      this.#schedule(this.#captureIntervalMs);
      return;
    }
    const now = performance.now();
    const elapsed = this.#lastTickAt === null ? this.#captureIntervalMs : now - this.#lastTickAt;
    this.#lastTickAt = now;
    const framesBefore = this.#tap.walFrames;
    try {
      this.#guarded(() => this.#tap.maintain());
    } catch (error) {
      this.#timerError = error;
      return;
    }
    // Behind the WAL (the capture stopped at its byte budget): read on as
    // soon as the event loop has had its turn.
    if (!this.#tap.caughtUp) {
      this.#schedule(MIN_CAPTURE_INTERVAL_MS);
      return;
    }
    this.#schedule(
      nextCaptureDelayMs({
        framesBefore,
        framesAfter: this.#tap.walFrames,
        elapsedMs: elapsed,
        targetFrames: captureTickTargetFrames(this.#tap.options.truncateCheckpointPages),
        intervalMs: this.#captureIntervalMs,
      }),
    );
  }

  /**
   * Opens the database (read transactions held from now on) and starts the
   * first generation. Never creates the database file. Throws what
   * {@link SqliteTap.open} throws: SqliteDatabaseMissingError,
   * SqliteOpenRefusedError (not a file, not a database, unreadable, a read-only location), and
   * SqliteNotWalError only for a valid database in another journal mode.
   */
  static open(options: SqliteSourceOptions): SqliteSource {
    return new SqliteSource(options);
  }

  /**
   * The tap underneath (for metrics: checkpoint reports, WAL size); while
   * the database is unavailable after a replacement, the closed tap of the
   * replaced file (its counters only).
   */
  get tap(): SqliteTap {
    return this.#tap;
  }

  get #commitCount(): number {
    return this.#generationBase + this.#tap.commits;
  }

  /**
   * Writes the commit count to the state file when it changed, one write at
   * a time (the file never goes back to an older count). Asynchronous: a
   * synchronous write waited on the filesystem's journal and stalled the
   * lease's renewals. Awaited wherever a count can reach the worker.
   */
  #persist(): Promise<void> {
    const write = this.#persisting.then(async () => {
      const count = this.#commitCount;
      if (count === this.#persistedCount) return;
      await writeAtomically(this.#files.state, `${JSON.stringify({ commitCount: count })}\n`);
      this.#persistedCount = count;
    });
    // A failed write fails its callers; the next one tries again.
    this.#persisting = write.catch(() => undefined);
    return write;
  }

  /**
   * A scheduled snapshot: the database as it is now (captured up to the
   * WAL's last commit) becomes the next generation's snapshot, and the log
   * starts empty. Like any new generation, it counts one commit for the
   * break. The worker calls it only once everything captured is shipped.
   */
  async startGeneration(): Promise<void> {
    this.#capture();
    this.#newGeneration();
    await this.#persist();
  }

  #newGeneration(): void {
    this.#generationBase = this.#commitCount + 1;
    this.#logOffset = 0;
    this.#tap.startGeneration();
    // Not awaited here (a synchronous context); every path that hands the
    // new count to the worker awaits the queue this joins.
    void this.#persist().catch(() => undefined);
  }

  /**
   * Captures new commits for the worker and seals the open batch (the worker
   * is about to read the log's end); turns a break in continuity into a new
   * generation.
   */
  #capture(): void {
    if (this.#timerError !== null) {
      const error = this.#timerError;
      this.#timerError = null;
      // The timer stopped at the error: ticks go on from the next call.
      if (this.#captureIntervalMs > 0) this.#schedule(this.#captureIntervalMs);
      throw error;
    }
    this.#guarded(() => {
      this.#tap.capture();
      this.#tap.sealBatch();
    });
  }

  /** Runs `action` on the tap; a break in continuity becomes a new generation, other errors propagate. */
  #guarded(action: () => unknown): void {
    this.#available();
    try {
      action();
    } catch (error) {
      if (SqliteWalRestartedUnderneathError.isInstance(error)) {
        this.#newGeneration();
      } else if (SqliteDatabaseReplacedError.isInstance(error)) {
        // The old file's tap is closed at once (nothing reads its descriptors
        // again), then the file at the path is opened as a new generation.
        const base = this.#commitCount + 1;
        this.#tap.close();
        this.#unavailable = {
          error: new SqliteDatabaseUnavailableError(this.path, { cause: error }),
          base,
        };
        this.#available();
      } else {
        throw error;
      }
    }
  }

  /**
   * After the database was replaced: opens the file now at the path (a new
   * generation, counting one commit for the break), or throws
   * {@link SqliteDatabaseUnavailableError} naming why it cannot.
   */
  #available(): void {
    const unavailable = this.#unavailable;
    if (unavailable === null) return;
    if (this.#closed) throw unavailable.error;
    try {
      this.#tap = SqliteTap.open(this.path, this.#options);
    } catch (error) {
      unavailable.error = new SqliteDatabaseUnavailableError(this.path, { cause: error });
      throw unavailable.error;
    }
    this.#unavailable = null;
    this.#generationBase = unavailable.base;
    this.#logOffset = 0;
    void this.#persist().catch(() => undefined);
  }

  async durablePosition(): Promise<DurablePosition> {
    this.#available();
    // Every commit count the worker can ship passes through here (it ships
    // log bytes up to the durable length it got here), so the count is on
    // disk before any restore point can carry it. Not on every capture tick:
    // a file created and renamed hundreds of times a second adds metadata to
    // every journal commit the application's fsyncs wait for.
    await this.#persist();
    const id = this.#tap.generationId;
    return {
      engineGeneration: id,
      snapshot: `${id}/snapshot`,
      wal: `${id}/log`,
      durableLength: this.#logOffset + this.#tap.logLength,
      commitCount: this.#commitCount,
      engine: {
        databaseBytes: sizeOrNull(this.path),
        walBytes: sizeOrNull(`${this.path}-wal`),
        checkpoints: this.#tap.checkpointCounts,
        checkpointLockHeld: this.#tap.checkpointLock.state === 'held',
      },
    };
  }

  async observe(): Promise<FileObservation> {
    this.#capture();
    const id = this.#tap.generationId;
    return {
      snapshot: `${id}/snapshot`,
      wal: `${id}/log`,
      walLength: this.#logOffset + this.#tap.logLength,
    };
  }

  /**
   * Captures up to the WAL's end, in budgeted pieces with the event loop's
   * turns in between (a shutdown's flush starts from here).
   */
  async catchUp(): Promise<void> {
    this.#capture();
    while (!this.#tap.caughtUp) {
      await new Promise<void>((resolve) => setImmediate(resolve));
      this.#capture();
    }
  }

  async openRestorePoint(): Promise<OpenedRestorePoint> {
    this.#available();
    let snapshot = this.#tap.snapshot();
    if (snapshot === null) {
      // The snapshot this generation started from was let go (it reached the
      // bucket before) and the worker wants a restore point again: start a
      // new generation; the worker sees the identities change and comes back.
      this.#newGeneration();
      snapshot = this.#tap.snapshot()!;
    }
    // The restore point carries the generation's base count: on disk first.
    await this.#persist();
    const id = this.#tap.generationId;
    const image = snapshot;
    return {
      snapshot: {
        name: SQLITE_SNAPSHOT_NAME,
        size: image.size,
        identity: `${id}/snapshot`,
        read: (options) => image.read(options),
        // Read whole (the worker holds the encoded snapshot): the held
        // reader may move on before the upload ends. A retry after a failed
        // upload then finds no snapshot and starts a new generation.
        release: () => {
          if (this.#tap.generationId === id) this.#tap.releaseSnapshot();
        },
      },
      snapshotCommits: this.#generationBase,
      snapshotTime: image.time,
      close: async () => undefined,
    };
  }

  async readWalRange(
    start: number,
    durableLength: number,
    options: SourceCallOptions & { readonly maxBytes?: number } = {},
  ): Promise<WalRange | null> {
    // The bytes handed out may reach commits captured since durablePosition.
    await this.#persist();
    const end =
      options.maxBytes === undefined
        ? durableLength
        : Math.min(durableLength, start + options.maxBytes);
    // The worker's offsets are the bucket log's; the tap's start at #logOffset.
    const offset = this.#logOffset;
    if (start < offset) return null;
    const range =
      this.#tap.readLog(start - offset, end - offset) ??
      this.#tap.readLog(start - offset, durableLength - offset, 1);
    if (range === null) return null;
    return {
      start,
      end: offset + range.end,
      bytes: range.bytes,
      frames: range.commits,
      crc32: range.crc32,
      lastCommitTime: lastCommitTimeOf(range.bytes),
    };
  }

  frameCounter(): FrameCounting {
    return new FrameCounter();
  }

  /**
   * A merger for the worker's log compaction: fed the decoded bodies of a
   * run of consecutive log objects, it returns one record that restores
   * exactly as the run does, restorable at the run's end only (see
   * `commit-log-merge.ts`). A new one per run.
   */
  logCompactor(): CommitLogMerger {
    return new CommitLogMerger();
  }

  async readLineage(): Promise<string | null> {
    try {
      const text = readFileSync(this.#files.lineage, 'utf8').trim();
      return text === '' ? null : text;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw error;
    }
  }

  /**
   * Writes the sidecar `lineage` unless one is already there (another
   * backupd on this database created it first: its lineage stands, and the
   * worker reads it back; see {@link BackupSource.createLineage}).
   */
  async createLineage(lineage: string): Promise<void> {
    await createExclusively(this.#files.lineage, `${lineage}\n`);
  }

  async readParent(): Promise<ParentRecord | null> {
    const record = readJson(this.#files.parent) as ParentRecord | null;
    if (
      record === null ||
      typeof record.lineage !== 'string' ||
      typeof record.manifestKey !== 'string' ||
      !Number.isSafeInteger(record.commitSeq)
    )
      return null;
    const { lineage, manifestKey, commitSeq } = record;
    return { lineage, manifestKey, commitSeq };
  }

  /**
   * What the bucket holds lets the tap go: the snapshot once the generation's
   * restore point is there, log bytes once shipped. Then the tap moves its
   * reader forward and checkpoints past its thresholds.
   */
  async afterStep(shipped: ShippedProgress | null): Promise<void> {
    this.#lastShipped = shipped;
    if (shipped !== null && shipped.engineGeneration === this.#tap.generationId) {
      this.#tap.releaseSnapshot();
      this.#tap.releaseLog(Math.max(0, shipped.shippedLength - this.#logOffset));
    }
    this.#guarded(() => this.#tap.maintain());
  }

  /**
   * Continues the bucket's generation `candidate` when the image the tap
   * opened on is that restore point's state (checked against the last
   * graceful stop's resume record, or after a crash against the restore
   * point read back and hashed), or differs from it in at most half of its
   * pages: those pages then become one commit record put first in the log.
   * Anything else, a tap that started another generation or released log:
   * `false`, nothing changed. Reads the database once; uploads nothing.
   * Rationale: docs/decisions/2026-12-06-sqlite-restart-proof.md.
   */
  async continueGeneration(
    candidate: GenerationCandidate,
    options: SourceCallOptions = {},
  ): Promise<boolean> {
    this.#available();
    if (
      this.#tap.generationId !== this.#openedGenerationId ||
      this.#tap.logStart !== 0 ||
      this.#logOffset !== 0
    )
      return false;
    const record = readResumeRecord(this.path);
    const named =
      record !== null &&
      record.lineage === candidate.lineage &&
      record.walGeneration === candidate.walGeneration &&
      record.logEnd === candidate.logEnd &&
      record.commitSeq === candidate.commitSeq;
    if (!named && candidate.content === undefined) return false;
    const image = this.#tap.snapshot();
    if (image === null) return false;
    // What the image is compared with: the record's digest, or the restore
    // point's pages read back.
    const known = named
      ? {
          bytes: record.imageBytes,
          sha256: record.sha256 as string | null,
          pageHashes: record.pageSize === image.pageSize ? record.pageHashes : undefined,
        }
      : await restorePointPageHashes(candidate.content!, image.pageSize).then((pages) =>
          pages === null ? null : { ...pages, sha256: null },
        );
    if (known === null) return false;
    const digest = await imageDigest(
      image.read(options.signal === undefined ? {} : { signal: options.signal }),
      image.pageSize,
      known.pageHashes === undefined
        ? undefined
        : { known: known.pageHashes, maxChanged: Math.floor(image.databasePages / 2) },
    );
    // The tap may have moved on while the image was hashed (a break in
    // continuity starts another generation): only the opened one continues.
    if (this.#tap.generationId !== this.#openedGenerationId || this.#tap.logStart !== 0)
      return false;
    const unchanged =
      digest.bytes === known.bytes &&
      (known.sha256 === null ? digest.changed?.size === 0 : digest.sha256 === known.sha256);
    if (!unchanged) {
      // Every page the known state's but the whole image not (a record that
      // contradicts itself, or only the size differs): no proof.
      if (known.pageHashes === undefined || digest.changed === null || digest.changed.size === 0)
        return false;
      this.#tap.prependRecord(digest.changed, image.databasePages);
    }
    this.#logOffset = candidate.logEnd;
    this.#generationBase = candidate.commitSeq;
    await this.#persist();
    return true;
  }

  /**
   * Leaves the record for the next start (resume-record.ts) when the
   * worker's last word was that everything captured is shipped and in the
   * restore point LATEST names, and nothing was committed since: the
   * database's image now is that restore point's state. The image is taken
   * as a new generation's snapshot, and kept only if the capture point did
   * not move across it (no commit came in between). Best effort: any
   * failure leaves no record, and the next start uploads a new snapshot.
   */
  async #recordForNextStart(): Promise<void> {
    const shipped = this.#lastShipped;
    if (this.#unavailable !== null) return;
    if (shipped === null || shipped.engineGeneration !== this.#tap.generationId) return;
    const length = this.#logOffset + this.#tap.logLength;
    if (shipped.shippedLength !== length || shipped.inRestorePoint !== length) return;
    const lineage = await this.readLineage();
    if (lineage === null) return;
    this.#tap.capture();
    this.#tap.sealBatch();
    if (!this.#tap.caughtUp || this.#logOffset + this.#tap.logLength !== length) return;
    const commitSeq = this.#commitCount;
    const before = this.#tap.capturePoint;
    this.#tap.startGeneration();
    if (this.#tap.capturePoint !== before) return;
    const image = this.#tap.snapshot();
    if (image === null) return;
    const digest = await imageDigest(image.read(), image.pageSize);
    await writeResumeRecord(this.path, {
      version: 1,
      lineage,
      walGeneration: shipped.walGeneration,
      logEnd: length,
      commitSeq,
      imageBytes: digest.bytes,
      sha256: digest.sha256,
      pageSize: image.pageSize,
      pageHashes: digest.pageHashes,
    });
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timer = null;
    try {
      await this.#recordForNextStart();
    } catch {
      // No record: the next start uploads a new snapshot, as without one.
    }
    this.#tap.close();
  }
}

/** A file's size, or `null` when it cannot be read (gone between two looks, no permission). */
function sizeOrNull(path: string): number | null {
  try {
    return statSync(path).size;
  } catch {
    return null;
  }
}
