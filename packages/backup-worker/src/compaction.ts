/**
 * Compaction of the commit log: a run of the current generation's chain
 * (compaction-plan.ts) is read, checked, merged by the source's
 * {@link LogCompactor} and stored create-if-absent as one compacted object,
 * `wal/{g}/{start}-{end}.L{level}.{from}-{to}.seg`, covering the same log
 * range; the next restore point names it in place of the run. Every input is
 * checked before it is merged (stored size and CRC-32 against its entry, its
 * recipients against the worker's, then the envelope and its header against
 * the entry); a mismatch is a `COMPACTION_INPUT` `BackupError`, and the run
 * stays. The merged object is sealed to the worker's recipients, as its
 * inputs are. Nothing is deleted here. One compaction at a time, off the
 * step, applied at a step's start only if its run is still in the chain,
 * unchanged (docs/decisions/2026-12-06-compaction-levels.md).
 */
import type { LogCompactor } from '@x/engine';
import { compactedSegmentKey, crc32Hex, parseSegmentKey, type SegmentEntry } from '@x/manifest';
import { encodeSegmentObjectAsync, type SegmentObjectHeader } from '@x/wal-segment';
import { type ChainEntryInfo, type CompactionRun, planCompaction } from './compaction-plan.ts';
import type { WorkerContext } from './context.ts';
import { BackupError, messageOf } from './errors.ts';
import { type CheckedLogObject, readCheckedLogObject } from './log-object-read.ts';
import type { Requests } from './requests.ts';
import { restorePointBaseCommits } from './restore-point-builder.ts';
import { sameEnvelopeContent } from './same-envelope-content.ts';
import { StoredObjectCache } from './stored-object-cache.ts';
import type { Generation } from './tenure.ts';

/** A stored compacted object, ready to replace `inputs` in generation `generation`'s chain. */
interface CompactedRun {
  readonly generation: number;
  readonly inputs: readonly string[];
  readonly entry: SegmentEntry;
  readonly level: number;
  readonly shippedAt: number;
  readonly reason: CompactionRun['reason'];
}

/** How long a failed compaction waits before the next attempt: 1 min. */
export const COMPACTION_RETRY_MS = 60_000;

/**
 * Stored bytes of the objects this tenure wrote that a compaction may take
 * as inputs instead of downloading them: 32 MiB at most.
 */
export const COMPACTION_INPUT_CACHE_BYTES = 32 * 1024 * 1024;

export interface CompactionOptions {
  /** Level intervals in ms, ascending; empty: no compaction. */
  readonly levelsMs: readonly number[];
  /** What was shipped this recently merges at level 1 only (see `planCompaction`'s `exactSince`). */
  readonly exactWindowMs: number;
}

export class LogCompaction {
  readonly #ctx: WorkerContext;
  readonly #options: CompactionOptions;
  #inFlight: Promise<void> | null = null;
  #finished: CompactedRun | null = null;
  /** Wall-clock ms before which no compaction starts (after a failed one). */
  #retryAfter = 0;
  /** Set by {@link stop}: no compaction starts, one in flight makes no further request. */
  #stopped = false;
  /** Aborted by {@link stop}: a request of the compaction in flight ends at once. */
  readonly #stop = new AbortController();
  /** When each chain entry was first seen in the chain (the step that shipped it, or the first step after a restart). */
  readonly #shippedAt = new Map<string, number>();
  /** What this tenure stored, for inputs not to be downloaded again; dropped at a new tenure. */
  readonly #stored = new StoredObjectCache(COMPACTION_INPUT_CACHE_BYTES);
  #storedTenure: unknown = null;

  constructor(ctx: WorkerContext, options: CompactionOptions) {
    this.#ctx = ctx;
    this.#options = options;
  }

  get enabled(): boolean {
    return this.#options.levelsMs.length > 0;
  }

  /**
   * The stored bytes of a commit-log object just written (a fine segment, or
   * a compacted object), kept for a later compaction (nothing when off).
   */
  remember(key: string, stored: Uint8Array): void {
    if (this.enabled) this.#storedCache().remember(key, stored);
  }

  /** The cache of the current tenure: a new tenure starts it empty. */
  #storedCache(): StoredObjectCache {
    if (this.#storedTenure !== this.#ctx.tenure) {
      this.#stored.clear();
      this.#storedTenure = this.#ctx.tenure;
    }
    return this.#stored;
  }

  /**
   * No compaction from now on (a shutdown): one in flight ends at once, its
   * request in flight aborted (a bucket that does not answer must not hold
   * the stop for a request's deadline). Its object, if the PUT landed, is
   * one no restore point names.
   */
  stop(): void {
    this.#stopped = true;
    this.#stop.abort(new BackupError('the worker is stopping'));
  }

  /** True while a compaction runs, or has finished and is not applied yet. */
  get busy(): boolean {
    return this.#inFlight !== null || this.#finished !== null;
  }

  /** Waits for a compaction in flight (its result is applied by the next {@link applyFinished}). */
  async settle(): Promise<void> {
    await this.#inFlight;
  }

  /**
   * Replaces the run of a finished compaction in the current generation's
   * chain, when it is still there unchanged; returns why it was planned
   * when it did (`null` when nothing was applied). Its inputs are then the
   * retention's to delete once no kept restore point names them.
   */
  applyFinished(): CompactionRun['reason'] | null {
    const done = this.#finished;
    this.#finished = null;
    const generation = this.#ctx.tenure.current;
    if (done === null || generation === null || generation.number !== done.generation) return null;
    const first = generation.segments.findIndex((s) => s.key === done.inputs[0]);
    if (first === -1) return null;
    for (let i = 0; i < done.inputs.length; i++)
      if (generation.segments[first + i]?.key !== done.inputs[i]) return null;
    // Never the chain's last entry (see compaction-plan.ts).
    if (first + done.inputs.length >= generation.segments.length) return null;
    generation.segments.splice(first, done.inputs.length, done.entry);
    this.#shippedAt.set(done.entry.key, done.shippedAt);
    for (const key of done.inputs) {
      this.#ctx.tenure.compactedAway.set(key, this.#shippedAt.get(key) ?? done.shippedAt);
      this.#shippedAt.delete(key);
    }
    this.#ctx.tenure.manifestDirty = true;
    return done.reason;
  }

  /**
   * Starts the next due compaction of the current generation in the
   * background, unless one is in flight or none is due.
   */
  startDue(databaseBytes: number | null): void {
    if (!this.enabled || this.#stopped || this.#inFlight !== null || this.#finished !== null)
      return;
    const generation = this.#ctx.tenure.current;
    const now = this.#ctx.clock.wallNow();
    if (this.#ctx.source.logCompactor === undefined || generation === null) return;
    if (now < this.#retryAfter) return;
    const chain: ChainEntryInfo[] = generation.segments.map((segment) => {
      let shippedAt = this.#shippedAt.get(segment.key);
      if (shippedAt === undefined) {
        shippedAt = now;
        this.#shippedAt.set(segment.key, now);
      }
      const range = parseSegmentKey(this.#ctx.prefix, segment.key);
      return {
        level: levelOf(this.#ctx.prefix, segment.key),
        size: segment.size,
        logBytes: range === undefined ? 0 : range.end - range.start,
        shippedAt,
      };
    });
    const maxRunLogBytes = this.#ctx.source.maxCompactedLogBytes;
    const run = planCompaction({
      chain,
      now,
      levelsMs: this.#options.levelsMs,
      databaseBytes,
      exactSince: now - this.#options.exactWindowMs,
      ...(maxRunLogBytes === undefined ? {} : { maxRunLogBytes }),
    });
    if (run === null) return;
    const shippedAt = Math.max(...chain.slice(run.first, run.end).map((c) => c.shippedAt));
    this.#inFlight = this.#compact(generation, run, shippedAt, () =>
      this.#ctx.source.logCompactor!(),
    )
      .then(
        (done) => {
          this.#finished = done;
        },
        (error: unknown) => {
          if (this.#stopped) return;
          // Not again at every step: the inputs are downloaded again each time.
          this.#retryAfter = this.#ctx.clock.wallNow() + COMPACTION_RETRY_MS;
          this.#ctx.logger.warn('backup.compaction_failed', {
            walGeneration: generation.number,
            level: run.level,
            error: messageOf(error),
          });
        },
      )
      .finally(() => {
        this.#inFlight = null;
      });
  }

  async #compact(
    generation: Generation,
    run: CompactionRun,
    shippedAt: number,
    newCompactor: () => LogCompactor,
  ): Promise<CompactedRun> {
    const { prefix, tenure } = this.#ctx;
    const requests = this.#requests();
    const inputs = generation.segments.slice(run.first, run.end);
    const fromCommit =
      restorePointBaseCommits(tenure, generation) +
      generation.segments.slice(0, run.first).reduce((sum, s) => sum + s.frames, 0);
    const compactor = newCompactor();
    let first: SegmentObjectHeader | null = null;
    let chainEnd = 0;
    let commits = 0;
    let bytesIn = 0;
    for (const input of inputs) {
      if (this.#stopped) throw new BackupError('the worker is stopping');
      const { header, body } = await this.#readInput(generation.number, input);
      first ??= header;
      chainEnd =
        header.kind === 'compacted'
          ? (header.chainEndCrc32 ?? 0)
          : Number.parseInt(input.crc32, 16);
      compactor.add(body);
      commits += input.frames;
      bytesIn += input.size;
    }
    if (first === null) throw new BackupError('a compaction run without inputs');
    if (compactor.commits !== commits)
      throw BackupError.compactionInput(
        inputs[0]!.key,
        `the run's records count ${compactor.commits} commits, its entries ${commits}`,
      );
    const merged = compactor.finish();
    const start = first.start;
    const end = parseSegmentKey(prefix, inputs.at(-1)!.key)!.end;
    const key = compactedSegmentKey(
      prefix,
      generation.number,
      start,
      end,
      run.level,
      fromCommit,
      fromCommit + commits,
    );
    const { keys } = this.#ctx;
    const encoded = await encodeSegmentObjectAsync(
      merged,
      {
        codec: 'zstd',
        kind: 'compacted',
        generation: generation.number,
        start,
        end,
        commits,
        previousCrc32: first.previousCrc32,
        chainEndCrc32: chainEnd,
        decodedLength: merged.byteLength,
        lineage: tenure.ownLineage(),
      },
      // The generation's recipients: its inputs were checked to have them.
      { recipients: keys.recipients },
    );
    if (this.#stopped) throw new BackupError('the worker is stopping');
    const encodedCrc32 = crc32Hex(encoded);
    const stored = await requests.putImmutable(
      key,
      encoded,
      encodedCrc32,
      keys.encrypts ? sameEnvelopeContent(encoded, merged, keys.identities) : undefined,
    );
    // What the bucket holds: a retry may have found its first attempt's bytes.
    const crc32 = stored === encoded ? encodedCrc32 : crc32Hex(stored);
    this.remember(key, stored);
    this.#ctx.logger.info('backup.log_compacted', {
      walGeneration: generation.number,
      level: run.level,
      key,
      inputs: inputs.length,
      commits,
      bytesIn,
      bytesOut: stored.byteLength,
      reason: run.reason,
    });
    return {
      generation: generation.number,
      inputs: inputs.map((s) => s.key),
      entry: { key, size: stored.byteLength, crc32, frames: commits, lineage: tenure.ownLineage() },
      level: run.level,
      shippedAt,
      reason: run.reason,
    };
  }

  /** The worker's requests, also ended by {@link stop}. */
  #requests(): Requests {
    return this.#ctx.requests.alsoAbortedBy(this.#stop.signal);
  }

  /**
   * One input, taken from what this tenure stored or else downloaded, and
   * checked against its entry either way (see the module comment).
   */
  #readInput(generation: number, entry: SegmentEntry): Promise<CheckedLogObject> {
    return readCheckedLogObject({
      requests: this.#requests(),
      prefix: this.#ctx.prefix,
      generation,
      entry,
      keys: this.#ctx.keys,
      stored: this.#storedCache().take(entry.key),
      fail: (key, problem) => BackupError.compactionInput(key, problem),
    });
  }
}

/** 0 for a fine segment, the level for a compacted object. */
export function levelOf(prefix: string, key: string): number {
  const parsed = parseSegmentKey(prefix, key);
  return parsed?.layout === 'compacted' ? parsed.level : 0;
}
