/**
 * Compression of commit-log segments: the ratio (WAL bytes ÷ stored bytes)
 * and the CPU cost per MiB of WAL of `encodeSegmentObject` (zstd, as the
 * worker stores `.seg` objects) and `decodeSegmentObject` (as restore reads
 * them), on logs written by real SQLite (`node:sqlite`, 4 KiB pages, WAL
 * mode, no checkpoints while the log is written).
 *
 * Workloads (each 4000 single-row commits, so the log is ~16 MiB: one page
 * image of 4 KiB per commit, plus the WAL's 24-byte frame headers):
 * - `text`: a table of 20 000 rows of ~100 characters of text (ids, words,
 *   numbers, a timestamp), one row updated per commit — the usual small
 *   update to a 4 KiB page;
 * - `blob`: 512 rows of 4 KiB random blobs, one blob replaced per commit
 *   (incompressible page contents: the worst case).
 * Each log is cut into segments of 1 MiB (about a second of heavy writing,
 * what the worker ships per step) and each segment encoded and decoded.
 *
 * Level 3 is measured again with the body encrypted to one age recipient
 * (as `encryption` makes the worker store it), decoded with its identity.
 *
 * Setup (not measured): the databases and their WALs. Each run: every
 * segment encoded then decoded, in six rounds that take the configurations
 * in turn; CPU time (user + system of this process, `process.cpuUsage`) per
 * MiB of WAL over the rounds, and the ratio.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { generateIdentity, parseIdentity, parseRecipient } from '@x/age-envelope';
import { decodeSegmentObject, encodeSegmentObject } from '@x/wal-segment';
import { defineBenchmark, type Measurement } from './harness.ts';

const MiB = 1024 * 1024;
const COMMITS = 4000;
const SEGMENT_BYTES = 1 * MiB;
/** Each run encodes and decodes every log this many times per configuration. */
const ROUNDS = 6;
const WORDS = ['alpha', 'bravo', 'charlie', 'delta', 'echo', 'foxtrot', 'golf', 'hotel', 'india'];

/** A deterministic pseudo-random sequence (the same log every time). */
function lcg(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0;
    return state;
  };
}

/** Writes a database with `rows` in WAL mode, then `COMMITS` single-row updates; returns the WAL's bytes. */
async function writeLog(path: string, kind: 'text' | 'blob'): Promise<Uint8Array> {
  const db = new DatabaseSync(path);
  const next = lcg(kind === 'text' ? 7 : 11);
  db.exec('PRAGMA page_size = 4096; PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0;');
  const text = (): string =>
    `${WORDS[next() % WORDS.length]} ${next() % 100000} ${WORDS[next() % WORDS.length]} ` +
    `${new Date(1_700_000_000_000 + (next() % 1e9)).toISOString()} status=${next() % 4} ` +
    `${'note '.repeat(next() % 6)}`;
  const blob = (): Uint8Array => {
    const bytes = new Uint8Array(4000);
    for (let i = 0; i < bytes.length; i += 4) new DataView(bytes.buffer).setUint32(i, next());
    return bytes;
  };
  const rows = kind === 'text' ? 20_000 : 512;
  db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v)');
  const insert = db.prepare('INSERT INTO t (id, v) VALUES (?, ?)');
  db.exec('BEGIN');
  for (let id = 1; id <= rows; id += 1) insert.run(id, kind === 'text' ? text() : blob());
  db.exec('COMMIT');
  // The initial load is the snapshot's business: start the log after it.
  db.exec('PRAGMA wal_checkpoint(TRUNCATE)');
  const update = db.prepare('UPDATE t SET v = ? WHERE id = ?');
  for (let i = 0; i < COMMITS; i += 1) {
    update.run(kind === 'text' ? text() : blob(), 1 + (next() % rows));
  }
  const wal = new Uint8Array(await readFile(`${path}-wal`));
  db.close();
  return wal;
}

function cpuMs(since: NodeJS.CpuUsage): number {
  const used = process.cpuUsage(since);
  return (used.user + used.system) / 1000;
}

interface State {
  logs: { kind: 'text' | 'blob'; segments: Uint8Array[]; bytes: number }[];
}

export const benchmark = defineBenchmark<State>({
  name: 'segment-compression',
  description:
    'zstd ratio and CPU per MiB of .seg segments (1 MiB) of SQLite commit logs: small text-row updates and random 4 KiB blobs, 4 KiB pages',
  runs: 3,
  async setup(context) {
    const logs: State['logs'] = [];
    for (const kind of ['text', 'blob'] as const) {
      context.log(`writing the ${kind} log (${COMMITS} commits)`);
      const wal = await writeLog(join(context.tempDir, `${kind}.db`), kind);
      const segments: Uint8Array[] = [];
      for (let at = 32; at < wal.byteLength; at += SEGMENT_BYTES) {
        segments.push(wal.subarray(at, Math.min(at + SEGMENT_BYTES, wal.byteLength)));
      }
      logs.push({ kind, segments, bytes: wal.byteLength - 32 });
    }
    return { logs };
  },
  async run(state) {
    const measured: Record<string, Measurement> = {};
    const key = generateIdentity();
    const recipients = [parseRecipient(key.recipient)];
    const identities = [parseIdentity(key.identity)];
    const configs = state.logs.flatMap((log) =>
      [
        { level: 1, encrypted: false },
        { level: 3, encrypted: false },
        { level: 3, encrypted: true },
      ].map((config) => ({ log, ...config, stored: 0, encodeMs: 0, decodeMs: 0 })),
    );
    // Rounds interleave the configurations, so a collection or a busy
    // moment spreads over all of them rather than landing on one.
    for (let round = 0; round < ROUNDS; round++) {
      for (const config of configs) {
        const { log, level, encrypted } = config;
        let stored = 0;
        let start = 32;
        const encoded: Uint8Array[] = [];
        const encodeFrom = process.cpuUsage();
        for (const segment of log.segments) {
          const object = encodeSegmentObject(
            segment,
            {
              codec: 'zstd',
              kind: 'segment',
              generation: 1,
              start,
              end: start + segment.byteLength,
              commits: 1,
              previousCrc32: 0,
              lineage: 'bench',
            },
            encrypted ? { level, recipients } : { level },
          );
          start += segment.byteLength;
          stored += object.byteLength;
          encoded.push(object);
        }
        config.encodeMs += cpuMs(encodeFrom);
        const decodeFrom = process.cpuUsage();
        let decoded = 0;
        for (const object of encoded)
          decoded += decodeSegmentObject(object, { identities }).body.byteLength;
        config.decodeMs += cpuMs(decodeFrom);
        if (decoded !== log.bytes) throw new Error(`decoded ${decoded} of ${log.bytes} bytes`);
        config.stored = stored;
      }
    }
    for (const { log, level, encrypted, stored, encodeMs, decodeMs } of configs) {
      const mib = (ROUNDS * log.bytes) / MiB;
      const label = `${log.kind}, level ${level}${encrypted ? ', encrypted' : ''}`;
      measured[`${label}: ratio`] = { value: log.bytes / stored, unit: '×' };
      measured[`${label}: encode CPU`] = {
        value: encodeMs / mib,
        unit: 'ms/MiB',
        higherIsBetter: false,
      };
      measured[`${label}: decode CPU`] = {
        value: decodeMs / mib,
        unit: 'ms/MiB',
        higherIsBetter: false,
      };
    }
    return measured;
  },
});
