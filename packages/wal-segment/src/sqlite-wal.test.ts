import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SqliteWalHeaderError } from './errors.ts';
import {
  parseSqliteWalHeader,
  SQLITE_WAL_HEADER_BYTES,
  type SqliteWalScan,
  SqliteWalScanner,
  scanSqliteWal,
  scanSqliteWalFile,
  sqliteWalChecksum,
  sqliteWalCommittedFrames,
  sqliteWalFrameBytes,
  sqliteWalHeaderProblem,
} from './sqlite-wal.ts';

let dir: string;
/** A WAL of one CREATE TABLE and `INSERTS` insert transactions, never checkpointed. */
let plainWal: Uint8Array;
/** The database file that goes with `plainWal` (as it was when the WAL was copied). */
let plainDb: Uint8Array;
const INSERTS = 24;
/** A WAL after a restart: new salts, one new commit, stale frames of the old generation after it. */
let restartedWal: Uint8Array;
let saltsBeforeRestart: [number, number];

function insertRows(db: DatabaseSync, from: number, count: number): void {
  const insert = db.prepare('INSERT INTO t (n, body) VALUES (?, ?)');
  for (let i = from; i < from + count; i++) {
    // Varying sizes: some transactions touch one page, some several (overflow pages).
    insert.run(i, Buffer.alloc(((i * 1777) % 9000) + 10, i & 0xff));
  }
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sqlite-wal-'));
  const path = join(dir, 'a.db');
  const db = new DatabaseSync(path);
  db.exec('PRAGMA journal_mode=WAL');
  db.exec('PRAGMA wal_autocheckpoint=0');
  db.exec('CREATE TABLE t (n INTEGER PRIMARY KEY, body BLOB)');
  insertRows(db, 0, INSERTS);
  // Copied while the connection holds the WAL open: closing would checkpoint it away.
  plainWal = new Uint8Array(await readFile(`${path}-wal`));
  plainDb = new Uint8Array(await readFile(path));
  saltsBeforeRestart = (() => {
    const header = parseSqliteWalHeader(plainWal);
    return [header.salt1, header.salt2];
  })();
  // Checkpoint everything, then the next write restarts the WAL from the start.
  db.exec('PRAGMA wal_checkpoint(RESTART)');
  insertRows(db, 1000, 1);
  restartedWal = new Uint8Array(await readFile(`${path}-wal`));
  db.close();
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Feeds `bytes` to a scanner split at `cuts`. */
function scanInChunks(
  bytes: Uint8Array,
  cuts: readonly number[],
  scanner = new SqliteWalScanner(),
): SqliteWalScan {
  const points = [...new Set(cuts.map((cut) => cut % (bytes.length + 1)))].sort((a, b) => a - b);
  let previous = 0;
  for (const point of [...points, bytes.length]) {
    scanner.push(bytes.subarray(previous, point));
    previous = point;
  }
  return scanner.result;
}

/** Rows SQLite itself sees in a database file with `wal` beside it. */
async function rowsSqliteSees(db: Uint8Array, wal: Uint8Array): Promise<number | undefined> {
  const copy = await mkdtemp(join(dir, 'copy-'));
  await writeFile(join(copy, 'c.db'), db);
  await writeFile(join(copy, 'c.db-wal'), wal);
  const connection = new DatabaseSync(join(copy, 'c.db'));
  try {
    const table = connection
      .prepare("SELECT count(*) AS c FROM sqlite_master WHERE name = 't'")
      .get() as { c: number };
    if (table.c === 0) return undefined;
    return (connection.prepare('SELECT count(*) AS c FROM t').get() as { c: number }).c;
  } finally {
    connection.close();
    await rm(copy, { recursive: true, force: true });
  }
}

/** A synthetic WAL, for what SQLite on this machine does not write (big-endian checksums, 64 KiB pages). */
function encodeWal(options: {
  byteOrder: 'little-endian' | 'big-endian';
  pageSize: number;
  salts: [number, number];
  frames: { page: number; commit: number; fill: number }[];
}): Uint8Array {
  const { byteOrder, pageSize, salts } = options;
  const frameBytes = sqliteWalFrameBytes(pageSize);
  const out = Buffer.alloc(SQLITE_WAL_HEADER_BYTES + options.frames.length * frameBytes);
  out.writeUInt32BE(byteOrder === 'big-endian' ? 0x377f0683 : 0x377f0682, 0);
  out.writeUInt32BE(3007000, 4);
  out.writeUInt32BE(pageSize, 8);
  out.writeUInt32BE(7, 12);
  out.writeUInt32BE(salts[0], 16);
  out.writeUInt32BE(salts[1], 20);
  let sum = sqliteWalChecksum(out.subarray(0, 24), byteOrder);
  out.writeUInt32BE(sum[0], 24);
  out.writeUInt32BE(sum[1], 28);
  options.frames.forEach((frame, index) => {
    const at = SQLITE_WAL_HEADER_BYTES + index * frameBytes;
    out.writeUInt32BE(frame.page, at);
    out.writeUInt32BE(frame.commit, at + 4);
    out.writeUInt32BE(salts[0], at + 8);
    out.writeUInt32BE(salts[1], at + 12);
    out.fill(frame.fill, at + 24, at + frameBytes);
    sum = sqliteWalChecksum(out.subarray(at, at + 8), byteOrder, sum);
    sum = sqliteWalChecksum(out.subarray(at + 24, at + frameBytes), byteOrder, sum);
    out.writeUInt32BE(sum[0], at + 16);
    out.writeUInt32BE(sum[1], at + 20);
  });
  return new Uint8Array(out);
}

describe('SQLite WAL, as real SQLite writes it', () => {
  it('parses the header', () => {
    const header = parseSqliteWalHeader(plainWal);
    expect(header.formatVersion).toBe(3007000);
    expect(header.pageSize).toBe(4096);
    expect([0x377f0682, 0x377f0683]).toContain(header.magic);
    expect(header.checkpointSequence).toBe(0);
  });

  it('counts one commit per write transaction and ends at the last commit', () => {
    const scan = scanSqliteWal(plainWal);
    expect(scan.header).not.toBeNull();
    expect(scan.commits).toBe(INSERTS + 1);
    expect(scan.validLength).toBe(plainWal.length);
    expect((scan.validLength - 32) % sqliteWalFrameBytes(4096)).toBe(0);
    expect(scan.frames).toBe((plainWal.length - 32) / sqliteWalFrameBytes(4096));
    expect(scan.uncommittedFrames).toBe(0);
    expect(scan.end).toBe('end-of-input');
    expect(scan.databasePages).toBeGreaterThan(1);
  });

  it('after a restart: new salts, one commit, and the stale frames beyond it are not read', () => {
    const scan = scanSqliteWal(restartedWal);
    expect(scan.header!.salt1).toBe((saltsBeforeRestart[0] + 1) >>> 0);
    expect(scan.header!.salt2).not.toBe(saltsBeforeRestart[1]);
    expect(scan.header!.checkpointSequence).toBeGreaterThan(0);
    expect(scan.commits).toBe(1);
    expect(restartedWal.length).toBeGreaterThan(scan.validLength);
    expect(scan.end).toBe('salt-mismatch');
  });

  it('agrees with SQLite on which commits a torn WAL holds', async () => {
    const frameBytes = sqliteWalFrameBytes(4096);
    const totalFrames = (plainWal.length - 32) / frameBytes;
    const cuts = [0, 10, 32, 33, 32 + frameBytes, 32 + frameBytes + 100];
    for (let k = 3; k < totalFrames; k += 4) cuts.push(32 + k * frameBytes + 7);
    cuts.push(plainWal.length);
    for (const cut of cuts) {
      const torn = plainWal.subarray(0, cut);
      const scan = scanSqliteWal(torn);
      const rows = await rowsSqliteSees(plainDb, torn);
      const expectedRows = scan.commits === 0 ? undefined : scan.commits - 1;
      expect(rows, `cut at ${cut}`).toBe(expectedRows);
    }
  });

  it('gives the same result for any split into chunks', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(plainWal, restartedWal),
        fc.array(fc.nat(), { maxLength: 40 }),
        (wal, cuts) => {
          expect(scanInChunks(wal, cuts)).toEqual(scanSqliteWal(wal));
        },
      ),
      { numRuns: 60 },
    );
    // Unaligned chunks (odd byte offsets in their buffer) take the copying path.
    const shifted = new Uint8Array(plainWal.length + 1);
    shifted.set(plainWal, 1);
    expect(scanInChunks(shifted.subarray(1), [1001, 5003])).toEqual(scanSqliteWal(plainWal));
  });

  it('resumes from an earlier scan with the same result as scanning the whole', () => {
    fc.assert(
      fc.property(
        fc.nat({ max: plainWal.length }),
        fc.array(fc.nat(), { maxLength: 10 }),
        (cut, cuts) => {
          const first = scanSqliteWal(plainWal.subarray(0, cut));
          if (first.header === null) return;
          const rest = plainWal.subarray(first.validLength);
          expect(scanInChunks(rest, cuts, SqliteWalScanner.resume(first))).toEqual(
            scanSqliteWal(plainWal),
          );
        },
      ),
      { numRuns: 40 },
    );
  });

  it('never uses a frame with a flipped byte, or any frame after it', () => {
    const frameBytes = sqliteWalFrameBytes(4096);
    fc.assert(
      fc.property(
        fc.nat({ max: plainWal.length - 1 }),
        fc.integer({ min: 1, max: 255 }),
        (at, mask) => {
          const broken = plainWal.slice();
          broken[at] = broken[at]! ^ mask;
          const scan = scanSqliteWal(broken);
          if (at < SQLITE_WAL_HEADER_BYTES) {
            expect(scan.validLength).toBe(0);
            return;
          }
          const frameStart = 32 + Math.floor((at - 32) / frameBytes) * frameBytes;
          expect(scan.validLength).toBeLessThanOrEqual(frameStart);
        },
      ),
      { numRuns: 200 },
    );
  });

  it('scans files from the start, or continuing an earlier scan', async () => {
    const path = join(dir, 'copy.wal');
    await writeFile(path, restartedWal);
    expect(await scanSqliteWalFile(path, { chunkBytes: 5000 })).toEqual(
      scanSqliteWal(restartedWal),
    );
    await writeFile(path, plainWal);
    const early = scanSqliteWal(plainWal.subarray(0, 20_000));
    expect(await scanSqliteWalFile(path, { from: early, chunkBytes: 7777 })).toEqual(
      scanSqliteWal(plainWal),
    );
  });

  it('reads a 64 KiB-page WAL written by SQLite', async () => {
    const path = join(dir, 'big-pages.db');
    const db = new DatabaseSync(path);
    db.exec('PRAGMA page_size=65536');
    db.exec('PRAGMA journal_mode=WAL');
    db.exec('PRAGMA wal_autocheckpoint=0');
    db.exec('CREATE TABLE t (x)');
    db.exec('INSERT INTO t VALUES (1)');
    const wal = new Uint8Array(await readFile(`${path}-wal`));
    db.close();
    const scan = scanSqliteWal(wal);
    expect(scan.header!.pageSize).toBe(65536);
    expect(scan).toMatchObject({ commits: 2, validLength: wal.length, end: 'end-of-input' });
  });

  it('lists the committed frames', () => {
    const scan = scanSqliteWal(restartedWal);
    const frames = [...sqliteWalCommittedFrames(restartedWal)];
    expect(frames).toHaveLength(scan.frames);
    expect(frames.at(-1)!.databasePages).toBe(scan.databasePages);
    expect(frames[0]!.offset).toBe(32);
    expect(frames[0]!.page).toHaveLength(4096);
  });
});

describe('SQLite WAL, synthetic', () => {
  it.each(['little-endian', 'big-endian'] as const)('validates %s checksums', (byteOrder) => {
    const wal = encodeWal({
      byteOrder,
      pageSize: 1024,
      salts: [0x11223344, 0xdeadbeef],
      frames: [
        { page: 1, commit: 0, fill: 1 },
        { page: 2, commit: 2, fill: 2 },
        { page: 3, commit: 3, fill: 3 },
        { page: 1, commit: 0, fill: 4 },
      ],
    });
    const scan = scanSqliteWal(wal);
    expect(scan.header!.checksumByteOrder).toBe(byteOrder);
    expect(scan).toMatchObject({
      commits: 2,
      frames: 3,
      databasePages: 3,
      uncommittedFrames: 1,
      end: 'end-of-input',
    });
    expect(scan.validLength).toBe(32 + 3 * 1048);
    // The same bytes read with the other byte order do not verify.
    const other = Buffer.from(wal);
    other.writeUInt32BE(byteOrder === 'big-endian' ? 0x377f0682 : 0x377f0683, 0);
    expect(sqliteWalHeaderProblem(other)).toMatch(/checksum/);
  });

  it('reads 64 KiB pages, and refuses the database-header spelling 1 for 65536 as SQLite does', () => {
    const wal = encodeWal({
      byteOrder: 'little-endian',
      pageSize: 65536,
      salts: [1, 2],
      frames: [{ page: 1, commit: 1, fill: 9 }],
    });
    const scan = scanSqliteWal(wal);
    expect(scan.header!.pageSize).toBe(65536);
    expect(scan.commits).toBe(1);
    expect(scan.validLength).toBe(wal.length);
    const one = Buffer.from(wal);
    one.writeUInt32BE(1, 8);
    expect(sqliteWalHeaderProblem(one)).toMatch(/page size 1 /);
  });

  it('stops at a frame with page number 0', () => {
    const wal = encodeWal({
      byteOrder: 'little-endian',
      pageSize: 512,
      salts: [1, 2],
      frames: [
        { page: 1, commit: 1, fill: 1 },
        { page: 0, commit: 1, fill: 1 },
      ],
    });
    expect(scanSqliteWal(wal)).toMatchObject({ commits: 1, end: 'invalid-page-number' });
  });

  it('refuses invalid headers with the reason', () => {
    const good = Buffer.from(
      encodeWal({ byteOrder: 'little-endian', pageSize: 4096, salts: [1, 2], frames: [] }),
    );
    expect(sqliteWalHeaderProblem(good)).toBeUndefined();
    const cases: [string, (b: Buffer) => void, RegExp][] = [
      ['magic', (b) => b.writeUInt32BE(0x377f0684, 0), /magic/],
      ['version', (b) => b.writeUInt32BE(3007001, 4), /format version/],
      ['page size', (b) => b.writeUInt32BE(1000, 8), /page size/],
      ['page size 256', (b) => b.writeUInt32BE(256, 8), /page size/],
      ['checksum', (b) => b.writeUInt32BE(8, 12), /checksum/],
    ];
    for (const [label, change, problem] of cases) {
      const bad = Buffer.from(good);
      change(bad);
      expect(sqliteWalHeaderProblem(bad), label).toMatch(problem);
      expect(() => parseSqliteWalHeader(bad)).toThrow(SqliteWalHeaderError);
      const scan = scanSqliteWal(bad);
      expect(scan).toMatchObject({
        header: null,
        validLength: 0,
        commits: 0,
        end: 'invalid-header',
      });
      expect(scan.headerProblem).toMatch(problem);
    }
    expect(scanSqliteWal(good.subarray(0, 31))).toMatchObject({
      header: null,
      end: 'end-of-input',
    });
  });

  it('never throws on random input', () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ maxLength: 3000 }),
        fc.array(fc.nat(), { maxLength: 5 }),
        (bytes, cuts) => {
          const whole = scanSqliteWal(bytes);
          expect(whole.validLength).toBeLessThanOrEqual(bytes.length);
          expect(scanInChunks(bytes, cuts)).toEqual(whole);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('meta: the flipped-byte property catches a scanner that checks salts but not checksums', () => {
    // A naive scanner: valid header assumed, frames accepted on matching salts alone.
    const naiveValidLength = (wal: Uint8Array): number => {
      const bytes = Buffer.from(wal.buffer, wal.byteOffset, wal.byteLength);
      const pageSize = bytes.readUInt32BE(8);
      const frameBytes = sqliteWalFrameBytes(pageSize);
      let valid = 32;
      for (let at = 32; at + frameBytes <= bytes.length; at += frameBytes) {
        if (bytes.readUInt32BE(at + 8) !== bytes.readUInt32BE(16)) break;
        if (bytes.readUInt32BE(at + 12) !== bytes.readUInt32BE(20)) break;
        if (bytes.readUInt32BE(at + 4) !== 0) valid = at + frameBytes;
      }
      return valid;
    };
    const frameBytes = sqliteWalFrameBytes(4096);
    const property = (validLength: (wal: Uint8Array) => number) =>
      fc.property(fc.integer({ min: 32 + 24, max: plainWal.length - 1 }), (at) => {
        const broken = new Uint8Array(plainWal);
        broken[at] = broken[at]! ^ 0x01;
        const frameStart = 32 + Math.floor((at - 32) / frameBytes) * frameBytes;
        expect(validLength(broken)).toBeLessThanOrEqual(frameStart);
      });
    expect(fc.check(property(naiveValidLength), { numRuns: 50 }).failed).toBe(true);
    fc.assert(
      property((wal) => scanSqliteWal(wal).validLength),
      { numRuns: 50 },
    );
  });
});
