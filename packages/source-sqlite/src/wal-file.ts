/**
 * Reading SQLite's `<db>-wal` transaction by transaction (the frames up to a
 * commit frame), on `@x/wal-segment`'s scanner: a frame is valid only with the
 * header's salts and a matching cumulative checksum; the first invalid frame
 * ends the log. Frames after the last commit frame come apart (`open`): a
 * transaction larger than the bytes scanned, unfinished, or rolled back. Only
 * the wal-index header (in `<db>-shm`, also read here) tells which; its count
 * of committed frames also tells a corrupt committed frame from one being written.
 */
import { readSync } from 'node:fs';
import {
  parseSqliteWalHeader,
  SQLITE_WAL_FRAME_HEADER_BYTES,
  SQLITE_WAL_HEADER_BYTES,
  type SqliteWalHeader,
  SqliteWalScanner,
  sqliteWalHeaderProblem,
} from '@x/wal-segment';

export const WAL_HEADER_BYTES = SQLITE_WAL_HEADER_BYTES;
export const WAL_FRAME_HEADER_BYTES = SQLITE_WAL_FRAME_HEADER_BYTES;

export type WalHeader = SqliteWalHeader;

/** Identity of one WAL cycle: the header's salts change whenever SQLite restarts the WAL. */
export function walCycleId(header: WalHeader): string {
  return `${header.checkpointSequence}.${header.salt1.toString(16)}.${header.salt2.toString(16)}`;
}

/** Parses and checks a WAL header; `null` when the bytes are not a valid one. */
export function parseWalHeader(bytes: Uint8Array): WalHeader | null {
  if (sqliteWalHeaderProblem(bytes) !== undefined) return null;
  return parseSqliteWalHeader(bytes);
}

/** One committed transaction read from the WAL. */
export interface WalTransaction {
  /** The pages it wrote, last version of each, by page number. */
  readonly pages: Map<number, Uint8Array>;
  /** Database size in pages after the commit. */
  readonly databasePages: number;
  /** 1-based index of its commit frame in this WAL cycle. */
  readonly commitFrame: number;
}

/** A point in a WAL cycle: right after a valid frame (or the header). */
export interface WalPosition {
  /** Byte offset after the frame. */
  readonly offset: number;
  /** Frames of the cycle up to and including it. */
  readonly frame: number;
  /** The running checksum after it. */
  readonly checksum: [number, number];
}

/** Where reading stopped, and why. */
export interface WalScan {
  /**
   * The transactions whose commit frame `bytes` hold. The first one holds
   * only its frames from `startOffset` on: when the scan started inside a
   * transaction, the caller holds the frames before (see `open`).
   */
  readonly transactions: WalTransaction[];
  /** Right after the last commit frame in `bytes`; `null` when they hold none. */
  readonly committed: WalPosition | null;
  /** Right after the last valid frame, a commit or not: where the next piece starts. */
  readonly verified: WalPosition;
  /**
   * Pages of the valid frames after the last commit frame (views into
   * `bytes`, last version of each): a transaction whose commit frame comes
   * later, or never (still being written, or rolled back).
   */
  readonly open: Map<number, Uint8Array>;
  /**
   * The first frame (1-based, in the cycle) that is complete, carries this
   * cycle's salts and fails its checksum; `null` when the scan did not stop
   * at one. Not by itself corruption (a rolled-back transaction leaves such
   * frames past the last commit): it is when the wal-index counts it as
   * committed.
   */
  readonly badFrame: number | null;
  /** True when an invalid frame (not the end of `bytes`) ended the scan. */
  readonly stoppedEarly: boolean;
}

function u32(bytes: Uint8Array, at: number): number {
  return (
    ((bytes[at]! << 24) | (bytes[at + 1]! << 16) | (bytes[at + 2]! << 8) | bytes[at + 3]!) >>> 0
  );
}

/**
 * Reads the frames of one WAL cycle in `bytes`, which hold the file from
 * `start.offset` on, right after a valid frame (or the header): frame
 * `start.frame` with the running checksum `start.checksum`. The start may
 * be inside a transaction; see {@link WalScan.transactions}.
 */
export function scanWalFrames(header: WalHeader, bytes: Uint8Array, start: WalPosition): WalScan {
  const scanner = SqliteWalScanner.resume({
    header,
    headerProblem: null,
    validLength: start.offset,
    commits: 0,
    frames: start.frame,
    databasePages: 0,
    checksum: start.checksum,
    uncommittedFrames: 0,
    end: 'end-of-input',
  });
  scanner.push(bytes);
  const result = scanner.result;
  const frameBytes = WAL_FRAME_HEADER_BYTES + header.pageSize;
  const validFrames = result.frames + result.uncommittedFrames - start.frame;
  // The running checksum after a valid frame is the one its header carries.
  const after = (index: number): WalPosition => {
    const at = index * frameBytes;
    return {
      offset: start.offset + at + frameBytes,
      frame: start.frame + index + 1,
      checksum: [u32(bytes, at + 16), u32(bytes, at + 20)],
    };
  };
  const transactions: WalTransaction[] = [];
  let committed: WalPosition | null = null;
  let pending = new Map<number, Uint8Array>();
  for (let index = 0; index < validFrames; index += 1) {
    const at = index * frameBytes;
    pending.set(u32(bytes, at), bytes.subarray(at + WAL_FRAME_HEADER_BYTES, at + frameBytes));
    const databasePages = u32(bytes, at + 4);
    if (databasePages !== 0) {
      committed = after(index);
      transactions.push({ pages: pending, databasePages, commitFrame: committed.frame });
      pending = new Map();
    }
  }
  return {
    transactions,
    committed,
    verified: validFrames === 0 ? start : after(validFrames - 1),
    open: pending,
    badFrame:
      result.end === 'checksum-mismatch' ? result.frames + result.uncommittedFrames + 1 : null,
    stoppedEarly: result.end !== 'end-of-input',
  };
}

/** Reads `length` bytes at `offset` of an open file into a fresh buffer. */
export function readAt(fd: number, offset: number, length: number): Uint8Array {
  return readInto(fd, new Uint8Array(new ArrayBuffer(length)), offset);
}

/** Fills `buffer` from `offset` of an open file: the part filled (less only at the file's end). */
export function readInto(fd: number, buffer: Uint8Array, offset: number): Uint8Array {
  let done = 0;
  while (done < buffer.byteLength) {
    const n = readSync(fd, buffer, done, buffer.byteLength - done, offset + done);
    if (n === 0) break;
    done += n;
  }
  return done === buffer.byteLength ? buffer : buffer.subarray(0, done);
}

/**
 * The committed frame count the wal-index (`-shm`, open as `shmFd`) records,
 * with the salts it records them for; `null` when the file is too short or
 * its two header copies disagree (a writer is updating it). Native byte order
 * (the index is never shared between machines).
 *
 * The caller keeps `shmFd` open for as long as SQLite connections to the
 * database are open in this process: closing any descriptor of a file drops
 * every POSIX lock the process holds on it, SQLite's read marks included.
 */
export function readWalIndexCommitted(shmFd: number): {
  committedFrames: number;
  salt1: number;
  salt2: number;
  /**
   * Frames of this cycle some connection's checkpoint has copied into the
   * database file (`nBackfill`). Read without SQLite's locks: good for
   * deciding whether a copy is worth running, never for what is safe to drop.
   */
  backfilledFrames: number;
} | null {
  const bytes = readAt(shmFd, 0, 136);
  if (bytes.byteLength < 96) return null;
  for (let i = 0; i < 48; i += 1) if (bytes[i] !== bytes[i + 48]) return null;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const littleEndianHost = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;
  if (view.getUint8(12) === 0) return null; // isInit
  // The salts in the index are stored as the WAL header's bytes (big-endian).
  return {
    committedFrames: view.getUint32(16, littleEndianHost),
    salt1: view.getUint32(32),
    salt2: view.getUint32(36),
    // The checkpoint information follows the two header copies.
    backfilledFrames: bytes.byteLength >= 100 ? view.getUint32(96, littleEndianHost) : 0,
  };
}
