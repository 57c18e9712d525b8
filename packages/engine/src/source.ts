/**
 * The source interface: everything the backup worker learns about a database
 * engine, and its only way to touch the engine's files: where the engine is
 * durable, what the files on disk say, catching up with another process's
 * writes, reads, and a hook after every step. The worker never calls it
 * concurrently (the supervisor calls only `durablePosition`, which must be
 * cheap and take no engine lock). A source guarantees that a
 * {@link FileIdentity} names one version of a file (a replaced snapshot or a
 * restarted WAL gets a new one, a growing WAL keeps its own), computed alike by
 * the position and `observe`, and that `durableLength` never counts bytes the
 * engine could still lose (except as documented: `FramedDirSource` out of process).
 */
import type { ParentRecord } from '@x/manifest';

export type { ParentRecord };

/**
 * Opaque identity of one version of a file (for example device, inode and
 * creation time). Compared with `===`; never parsed by the worker.
 */
export type FileIdentity = string;

/**
 * The engine's durable position, read without taking an engine lock.
 *
 * The triple (`engineGeneration`, `snapshot`, `wal`) names the WAL the engine
 * is writing; when any part changes, the worker starts a new generation in the
 * bucket (a new restore point: snapshot, archives, chain files, then the WAL
 * from offset 0).
 */
export interface DurablePosition {
  /**
   * The engine's own WAL generation (framed store: a counter the engine keeps;
   * SQLite: the WAL header's salts). Any string; only equality matters.
   */
  readonly engineGeneration: string;
  /** Identity of the snapshot file the engine's state is on; `null` when there is none. */
  readonly snapshot: FileIdentity | null;
  /** Identity of the WAL file the engine writes; `null` when there is none yet. */
  readonly wal: FileIdentity | null;
  /** Bytes of that WAL file that are durable (fsynced), always a whole number of frames. */
  readonly durableLength: number;
  /**
   * Commits the store holds (the commit count a restore of everything durable
   * would report), or `null` while the engine does not know it yet. The worker
   * defers its first step until it is known: resume compares it with the
   * newest restore point in the bucket.
   */
  readonly commitCount: number | null;
  /** True while this engine handle is taking a snapshot; the worker defers. Absent: never. */
  readonly snapshotInProgress?: boolean;
  /** What the engine's files look like, for health and metrics; absent when the engine does not say. */
  readonly engine?: EngineFiles;
}

/** The engine's files as an operator sizes them (see {@link DurablePosition.engine}). */
export interface EngineFiles {
  /** Bytes of the database file; `null` when unknown. */
  readonly databaseBytes: number | null;
  /** Bytes of the engine's WAL file on disk; `null` when unknown. */
  readonly walBytes: number | null;
  /** Checkpoints the source ran since it opened, by mode; absent for engines that run none. */
  readonly checkpoints?: { readonly passive: number; readonly truncate: number };
  /**
   * Whether the source holds the engine's checkpoint lock (SQLite: see
   * `holdCheckpointLock` of `@x/source-sqlite`); absent for engines without one.
   */
  readonly checkpointLockHeld?: boolean;
}

/** What the files on disk say, at one moment. */
export interface FileObservation {
  readonly snapshot: FileIdentity | null;
  readonly wal: FileIdentity | null;
  /** The WAL file's length in bytes (0 when there is none). */
  readonly walLength: number;
  /**
   * True while a snapshot is between writing its snapshot file and replacing
   * the WAL (framed store: `snapshot.intent` is non-empty). Nothing is read
   * while it is; the step is deferred, not failed. Absent: the engine has no intent.
   */
  readonly intentPending?: boolean;
}

/** Counts frames in a stream of WAL bytes, in the source's frame format. */
export interface FrameCounting {
  push(chunk: Uint8Array): void;
  /** Complete frames (commits) seen so far. */
  readonly frames: number;
}

/**
 * A file opened for reading as part of a restore point. It is opened (a handle
 * held) before the worker's second observation, so its bytes are those of the
 * file as it was then, even if the file is replaced before it is streamed.
 */
export interface OpenedFile {
  /** The name it is restored under (e.g. `snapshot.bin`, `wal.3.archive`). */
  readonly name: string;
  /** Its length when opened. */
  readonly size: number;
  /**
   * Streams its bytes from the beginning, in bounded memory; exactly `size`
   * bytes. May be called more than once (the worker reads an archive once to
   * check its CRC before deciding to upload it); each call yields fresh
   * buffers the caller may keep.
   */
  read(options?: { signal?: AbortSignal }): AsyncIterable<Uint8Array>;
  /**
   * Optional: the worker has what it needs of this file (it holds the
   * encoded bytes it uploads) and will not call `read` again; the source
   * may let go of what keeps the file readable (SQLite: the reader pinned
   * for a snapshot) before the upload ends.
   */
  release?(): void;
}

/** An archived WAL file of the chain a snapshot stands on. */
export interface OpenedArchive extends OpenedFile {
  /** Its number in the chain (`wal.{number}.archive`). */
  readonly number: number;
}

/** A small file read whole. */
export interface SmallFile {
  readonly name: string;
  readonly bytes: Uint8Array;
}

/**
 * A restore point opened while the files held still: the snapshot, the
 * archives it needs, and the chain files, which belong to this generation and
 * are read once, here.
 */
export interface OpenedRestorePoint {
  /** The snapshot; `null` when the store has none yet (everything is in the WAL). */
  readonly snapshot: (OpenedFile & { readonly identity: FileIdentity }) | null;
  /**
   * Commits the snapshot holds beyond `floor` and the archives (framed store:
   * 0, because its snapshot stands on the archives; an engine whose snapshot
   * is a full copy reports the commits it holds and no archives).
   */
  readonly snapshotCommits: number;
  /** The archives, in chain order. Absent: none. */
  readonly archives?: readonly OpenedArchive[];
  /** The chain files (framed store: `wal.genesis`, `wal.genesis.v11`, `wal.floor`). Absent: none. */
  readonly chainFiles?: readonly SmallFile[];
  /**
   * The commit count the store's horizon starts at (framed store: `wal.floor`),
   * the manifest's `oldestCommitSeq`. Absent: 0.
   */
  readonly floor?: number;
  /**
   * Wall-clock ms of the state the snapshot holds: when the engine's read of
   * it saw the database, so every commit it holds was recorded at or before
   * it and every later commit at or after it. Absent or `null`: unknown (the
   * restore point's `snapshotTime` is then `null`).
   */
  readonly snapshotTime?: number | null;
  /** Releases the handles. Called exactly once, whatever happened. */
  close(): Promise<void>;
}

/** Complete WAL frames read from the current WAL file. */
export interface WalRange {
  /** Offset of the first byte (the cursor asked for). */
  readonly start: number;
  /** Offset after the last complete frame. */
  readonly end: number;
  readonly bytes: Uint8Array;
  /** Commits (complete frames, in the source's format) in `bytes`. */
  readonly frames: number;
  /**
   * CRC-32 of `bytes`, when the source knows it without another pass over
   * them (the worker computes it otherwise). It becomes the segment's CRC in
   * the manifest, which a restore checks the downloaded bytes against: a
   * wrong value makes the segment unrestorable, never silently accepted.
   */
  readonly crc32?: number;
  /**
   * Recorded commit time (wall-clock ms) of the last commit in `bytes`.
   * Absent or `null`: unknown (the restore point's `commitTime` is then `null`).
   */
  readonly lastCommitTime?: number | null;
}

/** A side file's state, as {@link BackupSource.readSideFile} returns it. */
export interface SideFileRead {
  readonly identity: FileIdentity;
  /** The bytes; `null` when `identity` equals the one the caller already knows. */
  readonly bytes: Uint8Array | null;
}

/** What is in the bucket, as the worker tells the source after a step. */
export interface ShippedProgress {
  /** The WAL being shipped, as the position named it when the generation started. */
  readonly engineGeneration: string;
  readonly snapshot: FileIdentity | null;
  readonly wal: FileIdentity | null;
  /** Bytes of that WAL file uploaded (every byte before it is in an immutable object). */
  readonly shippedLength: number;
  /**
   * Bytes of that WAL file named by a manifest `LATEST` points at (a restore
   * point exists up to here). Never more than `shippedLength`.
   */
  readonly inRestorePoint: number;
  /** The bucket generation number these bytes are under. */
  readonly walGeneration: number;
}

export interface SourceCallOptions {
  readonly signal?: AbortSignal;
}

/**
 * A database engine's files, as the backup worker sees them.
 *
 * Errors: any method may throw; the worker counts a thrown step as failed and
 * retries with back-off. A method that finds the files mid-change should not
 * throw: it reports what it saw and lets the bracketing observations decide.
 */
export interface BackupSource {
  /** Short text for logs (a path, never credentials). */
  readonly description: string;

  /**
   * Side files refreshed at every manifest (uploaded when their content
   * changed), by name. Must not include the chain files, which travel with
   * the restore point instead, and must not include anything that describes
   * one machine's half-finished work (framed store: never `snapshot.intent`).
   * Absent: none (and `readSideFile` is never called).
   */
  readonly sideFileNames?: readonly string[];

  /**
   * The chain files' names (those `openRestorePoint` reads), when the engine
   * has any. Retention deletes a side object only when its name is one of
   * these or of {@link sideFileNames}: a manifest in the bucket that names
   * anything else under `side/` is not trusted to have been this worker's.
   */
  readonly chainFileNames?: readonly string[];

  /** The engine's durable position. Cheap; called at any moment, also by the health supervisor. */
  durablePosition(options?: SourceCallOptions): Promise<DurablePosition>;

  /** One look at the files on disk. */
  observe(options?: SourceCallOptions): Promise<FileObservation>;

  /**
   * Lets the engine absorb what another process committed or snapshotted.
   * Called when the files differ from the position and no intent is
   * pending, and once at the start of a shutdown's flush (so the final
   * restore point reaches everything committed by then). May do nothing (a
   * position read from disk is always caught up).
   */
  catchUp(options?: SourceCallOptions): Promise<void>;

  /**
   * Opens the snapshot and archives (handles held) and reads the chain files.
   * The worker keeps the result only if an observation after this call shows
   * nothing changed and the position still names the same files; otherwise
   * it closes it and defers.
   */
  openRestorePoint(options?: SourceCallOptions): Promise<OpenedRestorePoint>;

  /**
   * Reads the complete frames of the current WAL file from `start` up to at
   * most `durableLength`, and at most `options.maxBytes` bytes unless the
   * first frame alone is larger (then that one frame); `null` when there is
   * not one complete frame. `start` is always a frame boundary the source
   * returned before (or 0).
   */
  readWalRange(
    start: number,
    durableLength: number,
    options?: SourceCallOptions & { readonly maxBytes?: number },
  ): Promise<WalRange | null>;

  /** A frame counter for archives (the worker streams them and counts as it goes). */
  frameCounter(): FrameCounting;

  /**
   * Reads side file `name`; `null` when it does not exist. When `known` is
   * the file's current identity, `bytes` is `null` (nothing re-read).
   */
  readSideFile?(
    name: string,
    known: FileIdentity | null,
    options?: SourceCallOptions,
  ): Promise<SideFileRead | null>;

  /** The store's lineage id, or `null` before its first backup. */
  readLineage(options?: SourceCallOptions): Promise<string | null>;

  /**
   * Records `lineage` as the store's lineage (framed store: writes
   * `backup.lineage` atomically). Called once, on the first backup, and only
   * when {@link readLineage} returned `null`. The lineage file travels as a
   * side file when it is listed in {@link sideFileNames}.
   *
   * Exclusive: when a lineage is already recorded (several replicas of one
   * store, each with its own prefix, raced to create it), the one recorded
   * first is kept and the call still succeeds. The worker therefore reads the
   * lineage back with {@link readLineage} after this call and uses what is
   * recorded, not the id it passed.
   * @throws whatever the underlying write throws (not when a lineage exists).
   */
  createLineage(lineage: string, options?: SourceCallOptions): Promise<void>;

  /** The parent record a restore left, or `null`. */
  readParent(options?: SourceCallOptions): Promise<ParentRecord | null>;

  /**
   * Called after every step, succeeded or not, with what the bucket holds of
   * the WAL being shipped (`null` before the first restore point of this
   * tenure). A source that must keep its engine from restarting the WAL over
   * unshipped frames acts here. Errors thrown here fail the step.
   */
  afterStep?(shipped: ShippedProgress | null, options?: SourceCallOptions): Promise<void>;

  /**
   * Starts a new generation at the engine's current state: the next position
   * names another engine generation, and the next restore point stands on a
   * fresh snapshot (a scheduled snapshot; see the worker's
   * `snapshotIntervalMs`). Called only when everything durable is shipped
   * and in a restore point. Optional: an engine without it starts
   * generations on its own only.
   */
  startGeneration?(options?: SourceCallOptions): Promise<void>;

  /**
   * Continue the bucket's generation `candidate` instead of starting a new
   * one: `true` only when the source proves that the state it opened on is
   * exactly what a restore of `candidate` produces, or what it differs by
   * (SQLite: a record its previous run left at a graceful stop, or else
   * `candidate.content` checked against a hash of the database now). Its next
   * positions then continue that log: `durableLength` from `candidate.logEnd`,
   * `readWalRange` in the bucket's offsets, commits from `candidate.commitSeq`.
   * `false` changes nothing (the worker uploads a new snapshot). Asked at most
   * once per tenure, before its first generation, and only for a restore
   * point of a snapshot and segments alone. Optional.
   */
  continueGeneration?(
    candidate: GenerationCandidate,
    options?: SourceCallOptions,
  ): Promise<boolean>;

  /**
   * A new merger of this engine's commit log, for compaction (the worker's
   * `compactionLevels`): fed the decoded bodies of consecutive log objects
   * in order, it returns one body that a restore applies with the same
   * result as all of them. Optional: without it the worker never compacts.
   */
  logCompactor?(): LogCompactor;

  /**
   * The most log (decoded bytes, a key's `end − start`) one compacted
   * object may cover: runs over it are not compacted. For an engine whose
   * merge holds every byte of its inputs in memory (the framed store's
   * concatenation of frames). Absent: no bound beyond the compactor's own.
   */
  readonly maxCompactedLogBytes?: number;

  /** Releases what the source holds. The worker does not call it; the owner does. */
  close?(): Promise<void>;
}

/** Merges consecutive commit-log bodies into one (see `BackupSource.logCompactor`). */
export interface LogCompactor {
  /** Feeds the next decoded body, in chain order; throws when it is not a whole, valid log. */
  add(body: Uint8Array): void;
  /** Commits fed so far. */
  readonly commits: number;
  /** The merged body; throws when nothing was fed. */
  finish(): Uint8Array;
}

/** The bucket's generation a restarted worker offers its source to continue (see `continueGeneration`). */
export interface GenerationCandidate {
  /** The prefix's lineage (the store's own). */
  readonly lineage: string;
  /** The generation of the newest restore point (`walGeneration`). */
  readonly walGeneration: number;
  /** Where that restore point's log ends (bytes), with nothing in the bucket beyond it. */
  readonly logEnd: number;
  /** That restore point's commit count. */
  readonly commitSeq: number;
  /**
   * What a restore of it reads, for a source that has no record of its own
   * to prove its state with (a start after a crash): the snapshot's image
   * and the log's bodies, each object checked against its manifest entry
   * (size, CRC-32, envelope) as a restore checks it; a mismatch throws
   * `RestorePointReadError`. Reading costs the GETs of a restore of the
   * latest state; a source that does not call these reads nothing.
   */
  readonly content?: RestorePointContent;
}

/** The objects of a restore point, read back (see `GenerationCandidate.content`). */
export interface RestorePointContent {
  /** The snapshot's decoded bytes: the engine's image at the generation's start. Iterate once. */
  image(): AsyncIterable<Uint8Array>;
  /** The decoded body of each log object the restore point names, in log order (whole frames). Iterate once. */
  logBodies(): AsyncIterable<Uint8Array>;
}
