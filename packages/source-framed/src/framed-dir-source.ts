/**
 * `FramedDirSource`: the framed store directory as a {@link BackupSource}
 * (layout: the package README and docs/format.md; `snapshot.intent` never
 * travels). The durable position comes from an engine handle
 * ({@link FramedEngineHandle}: only fsynced bytes ship) or, without one,
 * from the complete frames on disk, which a machine crash may take back:
 * the worker then refuses the prefix rather than bury newer history.
 * It writes one file, once: `backup.lineage`, created exclusively (a hard
 * link to the final name), so replicas racing to create it end with one.
 */

import { randomUUID } from 'node:crypto';
import {
  type FileHandle,
  link,
  open,
  readdir,
  readFile,
  stat,
  unlink,
  writeFile,
} from 'node:fs/promises';
import { join } from 'node:path';
import type {
  BackupSource,
  DurablePosition,
  FileIdentity,
  FileObservation,
  FrameCounting,
  OpenedArchive,
  OpenedFile,
  OpenedRestorePoint,
  ParentRecord,
  SideFileRead,
  SmallFile,
  SourceCallOptions,
  WalRange,
} from '@x/engine';
import { completeFrames, FRAME_HEADER_BYTES, FrameCounter } from '@x/wal-segment';
import {
  FramedLogConcatenation,
  MAX_FRAMED_COMPACTED_LOG_BYTES,
} from './framed-log-concatenation.ts';

export const SNAPSHOT_FILE = 'snapshot.bin';
export const WAL_FILE = 'wal.bin';
export const INTENT_FILE = 'snapshot.intent';
export const LINEAGE_FILE = 'backup.lineage';
export const PARENT_FILE = 'backup.parent';
export const FLOOR_FILE = 'wal.floor';

/** Every side file that travels with a restore point (never `snapshot.intent`). */
export const SIDE_FILES = [
  LINEAGE_FILE,
  'commit_times.bin',
  'roles.json',
  'keys.json',
  'wal.genesis',
  'wal.genesis.v11',
  FLOOR_FILE,
] as const;

/**
 * The side files that describe the archive chain: they change only at a
 * snapshot and belong to the generation they were read with, so they travel
 * with the restore point, read once.
 */
export const CHAIN_FILES = ['wal.genesis', 'wal.genesis.v11', FLOOR_FILE] as const;

const READ_CHUNK_BYTES = 1024 * 1024;

/** What an in-process engine tells the source. */
export interface FramedEngineHandle {
  /**
   * The engine's durable position. `snapshot` and `wal` must be the
   * identities {@link identifyFramedFiles} computes for the files the
   * engine's state is on; `durableLength` counts fsynced bytes of `wal.bin`,
   * whole frames only; `commitCount` the commits the store holds.
   */
  durablePosition(): DurablePosition | Promise<DurablePosition>;
  /** Absorb what another process committed or snapshotted (re-read the files). */
  catchUp?(): void | Promise<void>;
}

export interface FramedDirSourceOptions {
  /** The store directory. */
  readonly directory: string;
  /** The engine, when it runs in this process. Without one the position comes from the disk (see the module docs). */
  readonly engine?: FramedEngineHandle;
}

interface Stats {
  dev: bigint;
  ino: bigint;
  size: bigint;
  mtimeNs: bigint;
  ctimeNs: bigint;
  birthtimeNs: bigint;
}

async function statOrNull(path: string): Promise<Stats | null> {
  try {
    return await stat(path, { bigint: true });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw error;
  }
}

/** A snapshot file is replaced, never changed in place: device, inode, size and mtime name it. */
function snapshotIdentity(s: Stats): FileIdentity {
  return `${s.dev}:${s.ino}:${s.size}:${s.mtimeNs}`;
}

/**
 * A WAL file grows in place, so its length and times are not part of its
 * identity; a replaced one is a new inode (the old one lives on as an archive
 * or is gone; the birth time guards against inode reuse where the file system
 * records it).
 */
function walIdentity(s: Stats): FileIdentity {
  return `${s.dev}:${s.ino}:${s.birthtimeNs}`;
}

function sideIdentity(s: Stats): FileIdentity {
  return `${s.dev}:${s.ino}:${s.size}:${s.mtimeNs}:${s.ctimeNs}`;
}

/** The identities `FramedDirSource` observes, for an in-process engine to name its files with. */
export async function identifyFramedFiles(
  directory: string,
): Promise<{ snapshot: FileIdentity | null; wal: FileIdentity | null }> {
  const [snapshot, wal] = await Promise.all([
    statOrNull(join(directory, SNAPSHOT_FILE)),
    statOrNull(join(directory, WAL_FILE)),
  ]);
  return {
    snapshot: snapshot ? snapshotIdentity(snapshot) : null,
    wal: wal ? walIdentity(wal) : null,
  };
}

/** `wal.{n}.archive` with `n` as written on disk (unpadded). */
function archiveNumber(name: string): number | undefined {
  const match = /^wal\.(\d+)\.archive$/.exec(name);
  return match ? Number(match[1]) : undefined;
}

function readFloor(bytes: Uint8Array | null): number {
  if (!bytes || bytes.byteLength < 8) return 0;
  return Number(new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0, true));
}

async function readFileOrNull(path: string): Promise<Uint8Array | null> {
  try {
    return new Uint8Array(await readFile(path));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw error;
  }
}

/** Streams `size` bytes of an open handle from offset 0, positional reads, fresh buffers. */
async function* readHandle(
  handle: FileHandle,
  size: number,
  signal: AbortSignal | undefined,
): AsyncIterable<Uint8Array> {
  let offset = 0;
  while (offset < size) {
    signal?.throwIfAborted();
    const length = Math.min(READ_CHUNK_BYTES, size - offset);
    const buffer = new Uint8Array(length);
    let filled = 0;
    while (filled < length) {
      const { bytesRead } = await handle.read(buffer, filled, length - filled, offset + filled);
      if (bytesRead === 0) throw new Error(`file ended at ${offset + filled} of ${size} bytes`);
      filled += bytesRead;
    }
    offset += length;
    yield buffer;
  }
}

function openedFile(name: string, handle: FileHandle, size: number): OpenedFile {
  return { name, size, read: (options) => readHandle(handle, size, options?.signal) };
}

export class FramedDirSource implements BackupSource {
  readonly description: string;
  readonly chainFileNames: readonly string[] = CHAIN_FILES;
  readonly sideFileNames: readonly string[] = SIDE_FILES.filter(
    (name) => !(CHAIN_FILES as readonly string[]).includes(name),
  );
  /** A compacted object holds its inputs' frames in memory: at most this much log. */
  readonly maxCompactedLogBytes = MAX_FRAMED_COMPACTED_LOG_BYTES;
  readonly #directory: string;
  readonly #engine: FramedEngineHandle | undefined;
  /** Out of process: frames counted in `wal.bin` so far, per WAL identity. */
  #walCount: { identity: FileIdentity; length: number; frames: number } | null = null;
  /** Out of process: frames per archive, by identity (archives never change). */
  #archiveFrames = new Map<FileIdentity, number>();

  constructor(options: FramedDirSourceOptions) {
    this.#directory = options.directory;
    this.#engine = options.engine;
    this.description = `framed store directory ${options.directory}`;
  }

  #path(name: string): string {
    return join(this.#directory, name);
  }

  async observe(): Promise<FileObservation> {
    const [snapshot, wal, intent] = await Promise.all([
      statOrNull(this.#path(SNAPSHOT_FILE)),
      statOrNull(this.#path(WAL_FILE)),
      statOrNull(this.#path(INTENT_FILE)),
    ]);
    return {
      snapshot: snapshot ? snapshotIdentity(snapshot) : null,
      wal: wal ? walIdentity(wal) : null,
      walLength: wal ? Number(wal.size) : 0,
      intentPending: intent !== null && intent.size > 0n,
    };
  }

  async durablePosition(): Promise<DurablePosition> {
    if (this.#engine) return this.#engine.durablePosition();
    return this.#positionFromDisk();
  }

  /**
   * Out of process: the files on disk are the position. The engine
   * generation is fixed: the snapshot and WAL identities already change
   * whenever the files do. Commits: floor + archive frames + complete frames
   * in `wal.bin`, counted incrementally.
   */
  async #positionFromDisk(): Promise<DurablePosition> {
    const disk = await this.observe();
    let durableLength = 0;
    let walFrames = 0;
    if (disk.wal !== null) {
      let count = this.#walCount;
      if (!count || count.identity !== disk.wal || count.length > disk.walLength)
        count = { identity: disk.wal, length: 0, frames: 0 };
      if (disk.walLength > count.length) {
        const handle = await open(this.#path(WAL_FILE), 'r').catch(() => null);
        if (handle) {
          try {
            const counter = new FrameCounter();
            const size = disk.walLength - count.length;
            let offset = count.length;
            const buffer = new Uint8Array(Math.min(READ_CHUNK_BYTES, size));
            while (offset < disk.walLength) {
              const { bytesRead } = await handle.read(
                buffer,
                0,
                Math.min(buffer.byteLength, disk.walLength - offset),
                offset,
              );
              if (bytesRead === 0) break;
              counter.push(buffer.subarray(0, bytesRead));
              offset += bytesRead;
            }
            count = {
              identity: disk.wal,
              length: count.length + counter.completeLength,
              frames: count.frames + counter.frames,
            };
          } finally {
            await handle.close();
          }
        }
      }
      this.#walCount = count;
      durableLength = count.length;
      walFrames = count.frames;
    }
    let commitCount = readFloor(await readFileOrNull(this.#path(FLOOR_FILE))) + walFrames;
    for (const { name } of await this.#localArchives()) {
      const s = await statOrNull(this.#path(name));
      if (!s) continue;
      const identity = sideIdentity(s);
      let frames = this.#archiveFrames.get(identity);
      if (frames === undefined) {
        const counter = new FrameCounter();
        const bytes = await readFileOrNull(this.#path(name));
        if (bytes) counter.push(bytes);
        const counted = counter.frames;
        this.#archiveFrames.set(identity, counted);
        frames = counted;
      }
      commitCount += frames;
    }
    return {
      engineGeneration: 'disk',
      snapshot: disk.snapshot,
      wal: disk.wal,
      durableLength,
      commitCount,
      snapshotInProgress: false,
    };
  }

  async catchUp(): Promise<void> {
    await this.#engine?.catchUp?.();
  }

  async #localArchives(): Promise<{ name: string; number: number }[]> {
    const names = await readdir(this.#directory);
    const archives: { name: string; number: number }[] = [];
    for (const name of names) {
      const number = archiveNumber(name);
      if (number !== undefined) archives.push({ name, number });
    }
    return archives.sort((a, b) => a.number - b.number);
  }

  async openRestorePoint(): Promise<OpenedRestorePoint> {
    const handles: FileHandle[] = [];
    const close = async (): Promise<void> => {
      await Promise.all(handles.splice(0).map((h) => h.close().catch(() => {})));
    };
    try {
      let snapshot: OpenedRestorePoint['snapshot'] = null;
      const snapshotHandle = await open(this.#path(SNAPSHOT_FILE), 'r').catch(
        (error: NodeJS.ErrnoException) => {
          if (error.code === 'ENOENT') return null;
          throw error;
        },
      );
      if (snapshotHandle) {
        handles.push(snapshotHandle);
        // The identity of the file actually opened, so the worker can check
        // it against its observations.
        const s = await snapshotHandle.stat({ bigint: true });
        snapshot = {
          ...openedFile(SNAPSHOT_FILE, snapshotHandle, Number(s.size)),
          identity: snapshotIdentity(s),
        };
      }
      const archives: OpenedArchive[] = [];
      for (const { name, number } of await this.#localArchives()) {
        const handle = await open(this.#path(name), 'r').catch(() => null);
        // An archive removed between the listing and the open: the bracketing
        // observation decides whether this read is kept.
        if (!handle) continue;
        handles.push(handle);
        const s = await handle.stat();
        archives.push({ ...openedFile(name, handle, s.size), number });
      }
      const chainFiles: SmallFile[] = [];
      let floor = 0;
      for (const name of CHAIN_FILES) {
        const bytes = await readFileOrNull(this.#path(name));
        if (bytes === null) continue;
        chainFiles.push({ name, bytes });
        if (name === FLOOR_FILE) floor = readFloor(bytes);
      }
      return { snapshot, snapshotCommits: 0, archives, chainFiles, floor, close };
    } catch (error) {
      await close();
      throw error;
    }
  }

  async readWalRange(
    start: number,
    durableLength: number,
    options: SourceCallOptions & { readonly maxBytes?: number } = {},
  ): Promise<WalRange | null> {
    if (durableLength <= start) return null;
    const handle = await open(this.#path(WAL_FILE), 'r').catch((error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT') return null;
      throw error;
    });
    if (!handle) return null;
    try {
      const readRange = async (length: number): Promise<Uint8Array> => {
        const buffer = new Uint8Array(length);
        let filled = 0;
        while (filled < length) {
          options.signal?.throwIfAborted();
          const { bytesRead } = await handle.read(buffer, filled, length - filled, start + filled);
          if (bytesRead === 0) break;
          filled += bytesRead;
        }
        return buffer.subarray(0, filled);
      };
      const limit = Math.min(durableLength - start, options.maxBytes ?? Number.POSITIVE_INFINITY);
      let bytes = await readRange(limit);
      let complete = completeFrames(bytes);
      if (
        complete.length === 0 &&
        limit < durableLength - start &&
        bytes.byteLength >= FRAME_HEADER_BYTES
      ) {
        // The first frame alone is larger than the cap: ship that one frame.
        const payload = new DataView(bytes.buffer, bytes.byteOffset, 4).getUint32(0, true);
        const frame = Math.min(FRAME_HEADER_BYTES + payload, durableLength - start);
        bytes = await readRange(frame);
        complete = completeFrames(bytes);
      }
      if (complete.length === 0) return null;
      return {
        start,
        end: start + complete.length,
        bytes: bytes.subarray(0, complete.length),
        frames: complete.frames,
      };
    } finally {
      await handle.close();
    }
  }

  frameCounter(): FrameCounting {
    return new FrameCounter();
  }

  /**
   * A merger for the worker's log compaction: the run's frames, concatenated
   * and checked (see `framed-log-concatenation.ts`); every commit inside the
   * compacted object stays restorable. A new one per run.
   */
  logCompactor(): FramedLogConcatenation {
    return new FramedLogConcatenation();
  }

  async readSideFile(name: string, known: FileIdentity | null): Promise<SideFileRead | null> {
    const s = await statOrNull(this.#path(name));
    if (!s) return null;
    const identity = sideIdentity(s);
    if (identity === known) return { identity, bytes: null };
    const bytes = await readFileOrNull(this.#path(name));
    if (bytes === null) return null;
    // Read after the stat: if the file changed in between, the next read
    // sees a new identity and uploads again.
    return { identity, bytes };
  }

  async readLineage(): Promise<string | null> {
    const bytes = await readFileOrNull(this.#path(LINEAGE_FILE));
    if (bytes === null) return null;
    const text = new TextDecoder().decode(bytes).trim();
    return text === '' ? null : text;
  }

  /**
   * Writes `backup.lineage` unless one is already there: a file another
   * replica of this directory created first is kept, and the worker reads it
   * back (see {@link BackupSource.createLineage}).
   */
  async createLineage(lineage: string): Promise<void> {
    // A temporary name per call: a shared one let two replicas' writes and
    // renames interleave, leaving one prefix with a lineage the file did not keep.
    const temporary = this.#path(`${LINEAGE_FILE}.tmp-${process.pid}-${randomUUID()}`);
    await writeFile(temporary, `${lineage}\n`, { flush: true, flag: 'wx' });
    try {
      // link(2) never replaces an existing file: the complete file appears
      // under the final name only if none was there (rename would replace it).
      await link(temporary, this.#path(LINEAGE_FILE));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      // Another replica created it first: its lineage stands.
    } finally {
      await unlink(temporary);
    }
    const directory = await open(this.#directory, 'r');
    try {
      await directory.sync();
    } catch {
      // Some platforms cannot fsync a directory; the rename is still atomic.
    } finally {
      await directory.close();
    }
  }

  async readParent(): Promise<ParentRecord | null> {
    const bytes = await readFileOrNull(this.#path(PARENT_FILE));
    if (bytes === null) return null;
    const value: unknown = JSON.parse(new TextDecoder().decode(bytes));
    if (
      typeof value !== 'object' ||
      value === null ||
      typeof (value as ParentRecord).lineage !== 'string' ||
      typeof (value as ParentRecord).manifestKey !== 'string' ||
      typeof (value as ParentRecord).commitSeq !== 'number'
    )
      throw new Error(
        `${PARENT_FILE} is not a parent record ({ lineage, manifestKey, commitSeq })`,
      );
    const record = value as ParentRecord;
    return {
      lineage: record.lineage,
      manifestKey: record.manifestKey,
      commitSeq: record.commitSeq,
    };
  }
}
