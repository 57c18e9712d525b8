/**
 * A small engine for the worker's tests, shaped like the SQLite one (only
 * sealed envelopes: a full snapshot and log segments; restart continuation;
 * compaction): the database is its list of commits, a snapshot holds the
 * frames of the commits before its generation, the WAL the frames after.
 * `TestDatabase` is what stays on disk across restarts; each `TestSource`
 * is one process's view of it.
 */

import { randomBytes } from 'node:crypto';
import type {
  BackupSource,
  DurablePosition,
  FileObservation,
  GenerationCandidate,
  LogCompactor,
  OpenedRestorePoint,
  ShippedProgress,
  WalRange,
} from '@x/engine';
import { completeFrames, encodeFrame, FrameCounter } from '@x/wal-segment';

export class TestDatabase {
  readonly frames: Uint8Array[] = [];
  lineage: string | null = null;
  /** What a graceful stop leaves: the generation shipped and its first commit. */
  record: { walGeneration: number; firstCommit: number } | null = null;

  /** `count` commits of `bytes` bytes each (random, so zstd cannot shrink them). */
  commit(count = 1, bytes = 64): void {
    for (let i = 0; i < count; i += 1) {
      this.frames.push(encodeFrame(new Uint8Array(randomBytes(bytes))));
    }
  }

  /** Bytes of every frame: the database's size. */
  size(): number {
    let bytes = 0;
    for (const frame of this.frames) bytes += frame.byteLength;
    return bytes;
  }

  /** The frames of commits `from` up to `to`, joined. */
  bytes(from: number, to = this.frames.length): Uint8Array {
    return new Uint8Array(Buffer.concat(this.frames.slice(from, to)));
  }
}

let runs = 0;

export class TestSource implements BackupSource {
  readonly description = 'test commit log';
  readonly #db: TestDatabase;
  /** How a restart proves its state: a graceful stop's record, or the bucket's content. */
  readonly #proof: 'record' | 'content';
  #engineGeneration = '';
  /** The commit the current generation's log starts after (its snapshot holds those before). */
  #firstCommit = 0;
  #walGeneration: number | null = null;

  constructor(db: TestDatabase, options: { proof?: 'record' | 'content' } = {}) {
    this.#db = db;
    this.#proof = options.proof ?? 'record';
    runs += 1;
    this.#newGeneration();
  }

  #newGeneration(): void {
    this.#engineGeneration = `run-${runs}-at-${this.#db.frames.length}`;
    this.#firstCommit = this.#db.frames.length;
  }

  #logLength(): number {
    let length = 0;
    for (let i = this.#firstCommit; i < this.#db.frames.length; i += 1)
      length += this.#db.frames[i]!.byteLength;
    return length;
  }

  async durablePosition(): Promise<DurablePosition> {
    return {
      engineGeneration: this.#engineGeneration,
      snapshot: `snapshot-${this.#engineGeneration}`,
      wal: `wal-${this.#engineGeneration}`,
      durableLength: this.#logLength(),
      commitCount: this.#db.frames.length,
      engine: { databaseBytes: this.#db.size(), walBytes: this.#logLength() },
    };
  }

  async observe(): Promise<FileObservation> {
    const position = await this.durablePosition();
    return { snapshot: position.snapshot, wal: position.wal, walLength: position.durableLength };
  }

  async catchUp(): Promise<void> {}

  async openRestorePoint(): Promise<OpenedRestorePoint> {
    const image = this.#db.bytes(0, this.#firstCommit);
    return {
      snapshot: {
        name: 'database',
        size: image.byteLength,
        identity: `snapshot-${this.#engineGeneration}`,
        async *read() {
          yield image.slice();
        },
      },
      snapshotCommits: this.#firstCommit,
      async close() {},
    };
  }

  async readWalRange(
    start: number,
    durableLength: number,
    options: { readonly maxBytes?: number } = {},
  ): Promise<WalRange | null> {
    const maxBytes = options.maxBytes ?? Number.POSITIVE_INFINITY;
    let offset = 0;
    const picked: Uint8Array[] = [];
    let end = start;
    for (let i = this.#firstCommit; i < this.#db.frames.length; i += 1) {
      const frame = this.#db.frames[i]!;
      if (offset >= start) {
        if (end + frame.byteLength > durableLength) break;
        if (picked.length > 0 && end + frame.byteLength - start > maxBytes) break;
        picked.push(frame);
        end += frame.byteLength;
      }
      offset += frame.byteLength;
    }
    if (picked.length === 0) return null;
    return { start, end, bytes: new Uint8Array(Buffer.concat(picked)), frames: picked.length };
  }

  frameCounter(): FrameCounter {
    return new FrameCounter();
  }

  async readLineage(): Promise<string | null> {
    return this.#db.lineage;
  }

  async createLineage(lineage: string): Promise<void> {
    this.#db.lineage ??= lineage;
  }

  async readParent(): Promise<null> {
    return null;
  }

  async afterStep(shipped: ShippedProgress | null): Promise<void> {
    this.#walGeneration = shipped?.walGeneration ?? null;
  }

  async startGeneration(): Promise<void> {
    this.#newGeneration();
  }

  /** A graceful stop: leaves the record a restart proves its state with. */
  stop(): void {
    if (this.#walGeneration !== null)
      this.#db.record = { walGeneration: this.#walGeneration, firstCommit: this.#firstCommit };
  }

  async continueGeneration(candidate: GenerationCandidate): Promise<boolean> {
    if (candidate.commitSeq !== this.#db.frames.length) return false;
    let firstCommit: number;
    if (this.#proof === 'record') {
      const record = this.#db.record;
      if (record === null || record.walGeneration !== candidate.walGeneration) return false;
      firstCommit = record.firstCommit;
    } else {
      if (candidate.content === undefined) return false;
      const image: Uint8Array[] = [];
      for await (const chunk of candidate.content.image()) image.push(chunk);
      const log: Uint8Array[] = [];
      for await (const body of candidate.content.logBodies()) log.push(body);
      const restored = Buffer.concat([...image, ...log]);
      if (!restored.equals(this.#db.bytes(0))) return false;
      firstCommit = completeFrames(new Uint8Array(Buffer.concat(image))).frames;
    }
    const before = this.#firstCommit;
    this.#firstCommit = firstCommit;
    if (this.#logLength() !== candidate.logEnd) {
      this.#firstCommit = before;
      return false;
    }
    this.#engineGeneration = `run-${runs}-continues-${candidate.walGeneration}`;
    return true;
  }

  logCompactor(): LogCompactor {
    const bodies: Uint8Array[] = [];
    let commits = 0;
    return {
      add(body) {
        const complete = completeFrames(body);
        if (complete.length !== body.byteLength) throw new Error('not whole frames');
        bodies.push(body);
        commits += complete.frames;
      },
      get commits() {
        return commits;
      },
      finish() {
        if (bodies.length === 0) throw new Error('nothing to merge');
        return new Uint8Array(Buffer.concat(bodies));
      },
    };
  }
}
