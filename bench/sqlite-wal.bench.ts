/**
 * Scanning a 1 GiB SQLite WAL written by real SQLite (node:sqlite, 4 KiB
 * pages, auto-checkpoint off): header, salts and the cumulative checksum of
 * every frame, commit boundaries. Read from disk in 4 MiB chunks into one
 * reused buffer (warm page cache). Passes per run: reading alone, reading +
 * SqliteWalScanner, reading + scanner + a whole-file CRC-32 (what uploading
 * the bytes as a segment adds).
 */
import { randomBytes } from 'node:crypto';
import { open, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { Crc32 } from '@x/manifest';
import { SqliteWalScanner } from '@x/wal-segment';
import { defineBenchmark, type Measurement, megabytesPerSecond } from './harness.ts';

const TARGET_BYTES = 1024 * 1024 * 1024;
const ROW_BYTES = 1024 * 1024;
const ROWS_PER_TRANSACTION = 4;
const CHUNK_BYTES = 4 * 1024 * 1024;

interface State {
  db: DatabaseSync;
  walPath: string;
  size: number;
  commits: number;
  buffer: Buffer;
}

async function pass(state: State, consume: (chunk: Uint8Array) => void) {
  const handle = await open(state.walPath, 'r');
  try {
    const started = process.hrtime.bigint();
    let position = 0;
    for (;;) {
      const { bytesRead } = await handle.read(state.buffer, 0, CHUNK_BYTES, position);
      if (bytesRead === 0) break;
      consume(state.buffer.subarray(0, bytesRead));
      position += bytesRead;
    }
    return { elapsed: process.hrtime.bigint() - started, bytes: position };
  } finally {
    await handle.close();
  }
}

export const benchmark = defineBenchmark<State>({
  name: 'sqlite-wal',
  description:
    'SqliteWalScanner (salts, checksums, commits) and CRC-32 over a 1 GiB SQLite WAL, streamed from disk',
  async setup(context) {
    const dbPath = join(context.tempDir, 'bench.db');
    const db = new DatabaseSync(dbPath);
    db.exec('PRAGMA journal_mode=WAL');
    db.exec('PRAGMA wal_autocheckpoint=0');
    db.exec('CREATE TABLE t (n INTEGER PRIMARY KEY, body BLOB)');
    const insert = db.prepare('INSERT INTO t (n, body) VALUES (?, ?)');
    const walPath = `${dbPath}-wal`;
    let commits = 1;
    let n = 0;
    context.log('writing ~1 GiB of WAL through SQLite');
    while ((await stat(walPath)).size < TARGET_BYTES) {
      db.exec('BEGIN');
      for (let i = 0; i < ROWS_PER_TRANSACTION; i++) insert.run(n++, randomBytes(ROW_BYTES));
      db.exec('COMMIT');
      commits++;
    }
    // The connection stays open (closing would checkpoint the WAL away); nothing writes while measuring.
    return {
      db,
      walPath,
      size: (await stat(walPath)).size,
      commits,
      buffer: Buffer.allocUnsafe(CHUNK_BYTES),
    };
  },
  async run(state) {
    const read = await pass(state, () => {});
    const scanner = new SqliteWalScanner();
    const scanned = await pass(state, (chunk) => scanner.push(chunk));
    const both = new SqliteWalScanner();
    const crc = new Crc32();
    const scannedAndChecksummed = await pass(state, (chunk) => {
      both.push(chunk);
      crc.update(chunk);
    });
    for (const s of [scanner, both]) {
      const result = s.result;
      if (result.commits !== state.commits || result.validLength !== state.size) {
        throw new Error(
          `scanned ${result.commits} commits / ${result.validLength} bytes, expected ${state.commits} / ${state.size}`,
        );
      }
    }
    const results: Record<string, Measurement> = {
      'read only': megabytesPerSecond(read.bytes, read.elapsed),
      'read + scan': megabytesPerSecond(scanned.bytes, scanned.elapsed),
      'read + scan + file CRC': megabytesPerSecond(
        scannedAndChecksummed.bytes,
        scannedAndChecksummed.elapsed,
      ),
    };
    return results;
  },
  async teardown(state) {
    // Drop the WAL instead of checkpointing 1 GiB into the database on close.
    state.db.exec('PRAGMA journal_mode=DELETE');
    state.db.close();
  },
});
