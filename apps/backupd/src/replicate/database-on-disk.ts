/**
 * What a SQLite database holds on disk, read without opening it through
 * SQLite (no lock, no file created): for a stop whose worker never opened
 * its source (it opens with the bucket lease), to say how much was left
 * unbacked, and whether there was anything to back up at all.
 *
 * Empty means provably nothing committed: a zero-length file, or one page
 * whose schema table has no entry, with no complete WAL frame beside it.
 * Anything else counts as content. Frame counts come from the WAL file's
 * length: after a WAL restart they include frames of the previous cycle, so
 * they are an upper bound ("up to").
 */
import { closeSync, fstatSync, openSync, readSync, statSync } from 'node:fs';

export interface DatabaseOnDisk {
  readonly path: string;
  /** `unreadable`: not a regular file that could be read (a directory, no permission). */
  readonly state: 'missing' | 'empty' | 'content' | 'unreadable';
  /** Bytes of the database file (`null`: missing or unreadable). */
  readonly databaseBytes: number | null;
  /** Pages by the header's page size (`null`: not known). */
  readonly pages: number | null;
  /** Bytes of `<path>-wal` (0 when there is none). */
  readonly walBytes: number;
  /** Complete frames the WAL file's length holds, at most (0 without a WAL header). */
  readonly walFrames: number;
}

const WAL_HEADER_BYTES = 32;
const WAL_FRAME_HEADER_BYTES = 24;

function walFacts(path: string): { walBytes: number; walFrames: number } {
  let walBytes = 0;
  try {
    walBytes = statSync(`${path}-wal`).size;
  } catch {
    return { walBytes: 0, walFrames: 0 };
  }
  if (walBytes < WAL_HEADER_BYTES) return { walBytes, walFrames: 0 };
  const header = readHead(`${path}-wal`, WAL_HEADER_BYTES);
  const pageSize = header === null ? 0 : header.readUInt32BE(8);
  // A header without a valid page size (a WAL being reset): its length says nothing.
  if (pageSize < 512 || pageSize > 65536 || (pageSize & (pageSize - 1)) !== 0)
    return { walBytes, walFrames: 0 };
  const walFrames = Math.floor((walBytes - WAL_HEADER_BYTES) / (pageSize + WAL_FRAME_HEADER_BYTES));
  return { walBytes, walFrames };
}

/** The first `bytes` bytes of the regular file at `path` (fewer when shorter); `null` when it cannot be read. */
function readHead(path: string, bytes: number): Buffer | null {
  let descriptor: number;
  try {
    descriptor = openSync(path, 'r');
  } catch {
    return null;
  }
  try {
    if (!fstatSync(descriptor).isFile()) return null;
    const buffer = Buffer.alloc(bytes);
    const read = readSync(descriptor, buffer, 0, bytes, 0);
    return buffer.subarray(0, read);
  } catch {
    return null;
  } finally {
    closeSync(descriptor);
  }
}

export function databaseOnDisk(path: string): DatabaseOnDisk {
  const wal = walFacts(path);
  let databaseBytes: number;
  try {
    databaseBytes = statSync(path).size;
  } catch (error) {
    const missing = (error as NodeJS.ErrnoException).code === 'ENOENT';
    return {
      path,
      state: missing ? 'missing' : 'unreadable',
      databaseBytes: null,
      pages: null,
      ...wal,
    };
  }
  // The header (100 bytes) and page 1's b-tree header (8 bytes) after it.
  const head = readHead(path, 108);
  if (head === null) return { path, state: 'unreadable', databaseBytes: null, pages: null, ...wal };
  if (databaseBytes === 0)
    return {
      path,
      state: wal.walFrames === 0 ? 'empty' : 'content',
      databaseBytes,
      pages: 0,
      ...wal,
    };
  const isSqlite =
    head.length === 108 && head.toString('latin1', 0, 16) === 'SQLite format 3\u0000';
  const rawPageSize = isSqlite ? head.readUInt16BE(16) : 0;
  const pageSize = rawPageSize === 1 ? 65536 : rawPageSize;
  const pages = pageSize > 0 ? Math.ceil(databaseBytes / pageSize) : null;
  // Page 1 a table leaf (0x0d) with no cell: the schema holds no table, index or view.
  const schemaEmpty = isSqlite && head[100] === 0x0d && head.readUInt16BE(103) === 0;
  const empty = pages === 1 && schemaEmpty && wal.walFrames === 0;
  return { path, state: empty ? 'empty' : 'content', databaseBytes, pages, ...wal };
}

/** One phrase for a log line: "the database at … has …". */
export function describeOnDisk(disk: DatabaseOnDisk): string {
  if (disk.state === 'missing') return `the database at ${disk.path} is gone`;
  if (disk.state === 'unreadable') return `the database at ${disk.path} could not be read`;
  const pages = disk.pages === null ? '' : ` (${disk.pages} pages)`;
  const wal =
    disk.walBytes === 0
      ? 'no WAL'
      : `its WAL ${disk.walBytes} bytes (up to ${disk.walFrames} frames)`;
  return `the database at ${disk.path} has ${disk.databaseBytes} bytes${pages} and ${wal}`;
}
