/**
 * Log compaction: `CommitLogMerger` turns a run of consecutive commit records
 * into one that a restore applies with the same result. What must hold:
 * - the newest version of each page wins, every page the run wrote is kept
 *   (also those above its final size), and the size, time and diagnostics
 *   are the last record's, the commit count the run's sum;
 * - a one-commit run comes out as the SBC1 record it was, byte for byte;
 * - a damaged, partial, empty or inconsistent input is refused by name, and
 *   leaves the merger as it was;
 * - exactness: replacing any run of a log by its merged record (merged once,
 *   or merged from merged outputs) restores byte-identical files at every
 *   commit restorable after the run, on random logs that shrink and grow the
 *   database, and on a real SQLite database's log.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { encodeFrame } from '@x/wal-segment';
import { afterEach, describe, expect, it } from 'vitest';
import { CommitLogMergeError, CommitLogMerger } from './commit-log-merge.ts';
import {
  BATCH_RECORD_MAGIC,
  COMMIT_RECORD_MAGIC,
  type CommitRecord,
  decodeCommitRecord,
  encodeCommitFrame,
  LOG_FRAME_HEADER_BYTES,
  splitLogFrames,
} from './commit-record.ts';
import { sqliteContentHash } from './content-hash.ts';
import { restoreSqliteDatabase } from './rebuild-database.ts';
import { SqliteSource } from './sqlite-source.ts';
import { SqliteTap } from './tap.ts';

const PAGE_SIZE = 512;

const directories: string[] = [];
afterEach(() => {
  for (const directory of directories.splice(0))
    rmSync(directory, { recursive: true, force: true });
});

function temporaryDirectory(): string {
  const directory = mkdtempSync(join(tmpdir(), 'backupd-sqlite-merge-'));
  directories.push(directory);
  return directory;
}

function page(fill: number): Uint8Array {
  return new Uint8Array(PAGE_SIZE).fill(fill);
}

interface RecordSpec {
  /** Page number → fill byte. */
  readonly pages: readonly (readonly [number, number])[];
  readonly databasePages: number;
  readonly commitTime: number;
  readonly commits?: number;
  readonly pageSize?: number;
}

function frameOf(spec: RecordSpec): Uint8Array {
  const pageSize = spec.pageSize ?? PAGE_SIZE;
  return encodeCommitFrame({
    pageSize,
    databasePages: spec.databasePages,
    commitTime: spec.commitTime,
    walSalt1: spec.commitTime + 1,
    walSalt2: spec.commitTime + 2,
    commitFrame: spec.commitTime + 3,
    pages: new Map(spec.pages.map(([n, fill]) => [n, new Uint8Array(pageSize).fill(fill)])),
    ...(spec.commits === undefined ? {} : { commits: spec.commits }),
  });
}

function concat(parts: readonly Uint8Array[]): Uint8Array {
  return new Uint8Array(Buffer.concat(parts));
}

function decoded(frame: Uint8Array): CommitRecord {
  return decodeCommitRecord(frame.subarray(LOG_FRAME_HEADER_BYTES));
}

function merge(bodies: readonly Uint8Array[], maxPageBytes?: number): Uint8Array {
  const merger = new CommitLogMerger(maxPageBytes === undefined ? {} : { maxPageBytes });
  for (const body of bodies) merger.add(body);
  return merger.finish();
}

/** The frames of a log, each whole (header and payload). */
function framesOf(log: Uint8Array): Uint8Array[] {
  const { payloads, rest } = splitLogFrames(log);
  expect(rest.byteLength).toBe(0);
  return payloads.map((payload) =>
    log.subarray(
      payload.byteOffset - log.byteOffset - LOG_FRAME_HEADER_BYTES,
      payload.byteOffset - log.byteOffset + payload.byteLength,
    ),
  );
}

function commitsOf(frame: Uint8Array): number {
  return decoded(frame).commits ?? 1;
}

function catchError(action: () => unknown): unknown {
  try {
    action();
  } catch (error) {
    return error;
  }
  throw new Error('expected a throw');
}

describe('CommitLogMerger', () => {
  it('keeps the newest version of every page, across records and bodies, and the last record’s size and time', () => {
    const first = concat([
      frameOf({
        pages: [
          [1, 0x11],
          [3, 0x13],
          [7, 0x17],
        ],
        databasePages: 7,
        commitTime: 100,
      }),
      frameOf({ pages: [[3, 0x23]], databasePages: 7, commitTime: 200 }),
    ]);
    const second = frameOf({
      pages: [
        [1, 0x31],
        [2, 0x32],
      ],
      databasePages: 3,
      commitTime: 300,
    });
    const merger = new CommitLogMerger();
    expect([merger.commits, merger.lastCommitTime]).toEqual([0, null]);
    merger.add(first);
    expect([merger.commits, merger.lastCommitTime]).toEqual([2, 200]);
    merger.add(second);
    expect([merger.commits, merger.lastCommitTime]).toEqual([3, 300]);
    const merged = merger.finish();
    expect(splitLogFrames(merged).payloads).toHaveLength(1);
    const record = decoded(merged);
    expect(record).toMatchObject({
      pageSize: PAGE_SIZE,
      databasePages: 3,
      commitTime: 300,
      walSalt1: 301,
      walSalt2: 302,
      commitFrame: 303,
      commits: 3,
    });
    expect([...record.pages.keys()]).toEqual([1, 2, 3, 7]);
    expect(record.pages.get(1)).toEqual(page(0x31));
    expect(record.pages.get(2)).toEqual(page(0x32));
    expect(record.pages.get(3)).toEqual(page(0x23));
    // Page 7 is above the final size (3 pages): kept, a later record may
    // grow the database over it without writing it.
    expect(record.pages.get(7)).toEqual(page(0x17));
    expect([merger.commits, merger.lastCommitTime]).toEqual([3, 300]);
  });

  it('counts every commit of batches, merged outputs included, and writes a batch record', () => {
    const once = merge([
      concat([
        frameOf({ pages: [[1, 1]], databasePages: 1, commitTime: 1 }),
        frameOf({ pages: [[2, 2]], databasePages: 2, commitTime: 5, commits: 4 }),
      ]),
      frameOf({ pages: [[1, 3]], databasePages: 2, commitTime: 8, commits: 3 }),
    ]);
    expect(commitsOf(once)).toBe(8);
    const view = new DataView(once.buffer, once.byteOffset + LOG_FRAME_HEADER_BYTES);
    expect(view.getUint32(0, true)).toBe(BATCH_RECORD_MAGIC);
    expect(view.getUint32(36, true)).toBe(8);
    const merger = new CommitLogMerger();
    merger.add(once);
    merger.add(frameOf({ pages: [[3, 4]], databasePages: 3, commitTime: 9 }));
    expect(merger.commits).toBe(9);
    expect(commitsOf(merger.finish())).toBe(9);
  });

  it('gives a one-commit run back as the same SBC1 record, byte for byte', () => {
    const single = frameOf({
      pages: [
        [4, 0x44],
        [2, 0x22],
      ],
      databasePages: 4,
      commitTime: 7,
    });
    const merged = merge([single]);
    expect(merged).toEqual(single);
    const view = new DataView(merged.buffer, merged.byteOffset + LOG_FRAME_HEADER_BYTES);
    expect(view.getUint32(0, true)).toBe(COMMIT_RECORD_MAGIC);
    expect(view.getUint32(36, true), 'reserved').toBe(0);
  });

  it('copies the pages: a body reused after add changes nothing', () => {
    const body = frameOf({ pages: [[2, 0x22]], databasePages: 2, commitTime: 1 });
    const again = frameOf({ pages: [[5, 0x55]], databasePages: 5, commitTime: 2 });
    const merger = new CommitLogMerger();
    merger.add(body);
    body.fill(0xee);
    merger.add(again);
    again.fill(0xee);
    const record = decoded(merger.finish());
    expect(record.pages.get(2)).toEqual(page(0x22));
    expect(record.pages.get(5)).toEqual(page(0x55));
  });

  it('never changes an input body, a Buffer of the store’s included (its slice() is a view)', () => {
    const whole = frameOf({ pages: [[3, 0x33]], databasePages: 4, commitTime: 1 });
    const patched = encodeCommitFrame({
      pageSize: PAGE_SIZE,
      databasePages: 4,
      commitTime: 2,
      walSalt1: 0,
      walSalt2: 0,
      commitFrame: 0,
      pages: new Map(),
      patches: new Map([[3, [{ offset: 8, bytes: new Uint8Array([1, 2, 3]) }]]]),
    });
    const rewrite = frameOf({ pages: [[3, 0x44]], databasePages: 4, commitTime: 3 });
    const bodies = [whole, patched, rewrite].map((frame) => Buffer.from(frame));
    const before = bodies.map((body) => Buffer.from(body));
    const merger = new CommitLogMerger();
    for (const body of bodies) merger.add(body);
    expect(bodies.map((body) => body.equals(before[bodies.indexOf(body)]!))).toEqual([
      true,
      true,
      true,
    ]);
    expect(decoded(merger.finish()).pages.get(3)).toEqual(page(0x44));
  });

  it('refuses a patch of a page a size before it in the run dropped and nothing wrote since', () => {
    const patchOf = (pageNumber: number, databasePages: number, commitTime: number) =>
      encodeCommitFrame({
        pageSize: PAGE_SIZE,
        databasePages,
        commitTime,
        walSalt1: 0,
        walSalt2: 0,
        commitFrame: 0,
        pages: new Map(),
        patches: new Map([[pageNumber, [{ offset: 0, bytes: new Uint8Array([9]) }]]]),
      });
    const grown = frameOf({ pages: [[30, 0x30]], databasePages: 34, commitTime: 1 });
    const shrunk = frameOf({ pages: [[1, 0x01]], databasePages: 19, commitTime: 2 });
    const merger = new CommitLogMerger();
    merger.add(concat([grown, shrunk]));
    const error = catchError(() => merger.add(patchOf(30, 34, 3)));
    expect(error).toBeInstanceOf(CommitLogMergeError);
    expect((error as Error).message).toBe(
      'input 2, record 1 (frame at byte 0) patches page 30, which a record before it in the run dropped (its database had 19 pages) and none wrote since: the patch has no base',
    );
    // Refused whole: the run goes on as before it; written again, the page patches fine.
    expect(merger.commits).toBe(2);
    merger.add(
      concat([
        frameOf({ pages: [[30, 0x31]], databasePages: 34, commitTime: 4 }),
        patchOf(30, 34, 5),
      ]),
    );
    const record = decoded(merger.finish());
    expect(record.pages.get(30)![0]).toBe(9);
    // A patch of a page above nothing known in the run (its base before the run) merges.
    const first = new CommitLogMerger();
    first.add(patchOf(40, 50, 1));
    expect(decoded(first.finish()).patches?.has(40)).toBe(true);
  });

  describe('refuses', () => {
    const good = () => frameOf({ pages: [[1, 1]], databasePages: 1, commitTime: 1 });

    it('a frame failing its CRC-32, naming the input', () => {
      const damaged = concat([good(), good()]);
      damaged[damaged.byteLength - 3]! ^= 0xff;
      const merger = new CommitLogMerger();
      merger.add(good());
      const error = catchError(() => merger.add(damaged));
      expect(error).toBeInstanceOf(CommitLogMergeError);
      expect((error as Error).name).toBe('CommitLogMergeError');
      expect((error as Error).message).toMatch(/^input 2: log frame at byte 564 fails its CRC-32/);
      expect((error as Error).cause).toBeInstanceOf(RangeError);
    });

    it('a body ending inside a frame, also inside a frame header', () => {
      const frame = good();
      expect(() => new CommitLogMerger().add(frame.subarray(0, frame.byteLength - 1))).toThrow(
        /^input 1 ends inside a frame: 563 bytes after its last whole frame \(at byte 0 of 563\)/,
      );
      expect(() => new CommitLogMerger().add(concat([frame, frame.subarray(0, 5)]))).toThrow(
        /^input 1 ends inside a frame: 5 bytes after its last whole frame \(at byte 564 of 569\)/,
      );
    });

    it('an empty body', () => {
      expect(() => new CommitLogMerger().add(new Uint8Array(0))).toThrow(
        new CommitLogMergeError('input 1 holds no commit records (an empty body)'),
      );
    });

    it('a record that does not decode, with the decoder’s reason', () => {
      const notARecord = encodeFrame(new Uint8Array(64).fill(7));
      const error = catchError(() => new CommitLogMerger().add(concat([good(), notARecord])));
      expect(error).toBeInstanceOf(CommitLogMergeError);
      expect((error as Error).message).toBe(
        'input 1, record 2 (frame at byte 564): not a SQLite commit record (bad magic)',
      );
      expect((error as Error).cause).toBeInstanceOf(RangeError);
    });

    it('a page size change, within a body and between bodies, and a size SQLite never uses', () => {
      const large = frameOf({ pages: [[1, 1]], databasePages: 1, commitTime: 2, pageSize: 1024 });
      expect(() => new CommitLogMerger().add(concat([good(), large]))).toThrow(
        /^input 1, record 2 \(frame at byte 564\) has 1024-byte pages, the records before it 512-byte pages$/,
      );
      const merger = new CommitLogMerger();
      merger.add(good());
      expect(() => merger.add(large)).toThrow(
        /^input 2, record 1 \(frame at byte 0\) has 1024-byte pages, the records before it 512-byte pages$/,
      );
      expect(() =>
        new CommitLogMerger().add(
          frameOf({ pages: [[1, 1]], databasePages: 1, commitTime: 1, pageSize: 100 }),
        ),
      ).toThrow(/has 100-byte pages, not a SQLite page size/);
    });

    it('more distinct pages than maxPageBytes, before merging any of the body; rewrites cost nothing', () => {
      const merger = new CommitLogMerger({ maxPageBytes: 3 * PAGE_SIZE });
      merger.add(
        frameOf({
          pages: [
            [1, 1],
            [2, 2],
          ],
          databasePages: 2,
          commitTime: 1,
        }),
      );
      // Pages 1 and 2 again, and a third: 3 distinct pages, at the cap.
      merger.add(
        frameOf({
          pages: [
            [1, 3],
            [2, 4],
            [3, 5],
          ],
          databasePages: 3,
          commitTime: 2,
        }),
      );
      const over = concat([
        frameOf({ pages: [[1, 6]], databasePages: 3, commitTime: 3 }),
        frameOf({ pages: [[4, 7]], databasePages: 4, commitTime: 4 }),
      ]);
      expect(() => merger.add(over)).toThrow(
        new CommitLogMergeError(
          'input 3: the run touches 4 distinct 512-byte pages (2048 bytes), more than maxPageBytes (1536)',
        ),
      );
      // Nothing of the refused body went in, its first record included.
      expect([merger.commits, merger.lastCommitTime]).toEqual([2, 2]);
      const record = decoded(merger.finish());
      expect([...record.pages.keys()]).toEqual([1, 2, 3]);
      expect(record.pages.get(1)).toEqual(page(3));
    });

    it('add after finish, finish twice, and finish with nothing added', () => {
      expect(() => new CommitLogMerger().finish()).toThrow(
        new CommitLogMergeError('nothing to merge: no commit records were added'),
      );
      const empty = new CommitLogMerger();
      expect(() => empty.add(new Uint8Array(0))).toThrow(CommitLogMergeError);
      expect(() => empty.finish(), 'a refused body adds nothing').toThrow(/nothing to merge/);
      const merger = new CommitLogMerger();
      merger.add(good());
      merger.finish();
      expect(() => merger.add(good())).toThrow(
        new CommitLogMergeError('add() after finish(): this merger has already merged its run'),
      );
      expect(() => merger.finish()).toThrow(/finish\(\) called twice/);
      expect(merger.commits).toBe(1);
    });
  });
});

/** A deterministic pseudo-random source (an LCG), so a failure replays. */
function randomSource(seed: number) {
  let state = seed >>> 0;
  const next = () => {
    state = (Math.imul(state, 1_103_515_245) + 12_345) >>> 0;
    return state >>> 8;
  };
  return {
    below: (n: number) => next() % n,
    bytes: (length: number) => Uint8Array.from({ length }, () => next() & 0xff),
  };
}

/**
 * A synthetic snapshot that `restoreSqliteDatabase` accepts with `verify:
 * false`: a SQLite header naming 512-byte pages, random bytes after it.
 */
function syntheticSnapshot(pages: number, random: ReturnType<typeof randomSource>): Uint8Array {
  const image = random.bytes(pages * PAGE_SIZE);
  image.set(new TextEncoder().encode('SQLite format 3\u0000'), 0);
  image[16] = PAGE_SIZE >> 8;
  image[17] = PAGE_SIZE & 0xff;
  return image;
}

/**
 * Random records over pages 1..24: sizes that jump up and down (shrinks
 * below pages written earlier, grows past the file's end without writing
 * every new page), pages written above the record's own size, batches.
 */
function randomRecords(count: number, random: ReturnType<typeof randomSource>): Uint8Array[] {
  const frames: Uint8Array[] = [];
  for (let i = 0; i < count; i += 1) {
    const pages = new Map<number, Uint8Array>();
    const written = 1 + random.below(4);
    for (let p = 0; p < written; p += 1) pages.set(1 + random.below(24), random.bytes(PAGE_SIZE));
    const batch = random.below(5) === 0;
    frames.push(
      encodeCommitFrame({
        pageSize: PAGE_SIZE,
        databasePages: 1 + random.below(20),
        commitTime: 1000 * (i + 1),
        walSalt1: random.below(1 << 20),
        walSalt2: random.below(1 << 20),
        commitFrame: i,
        pages,
        commits: batch ? 2 + random.below(3) : 1,
      }),
    );
  }
  return frames;
}

/** Splits `frames` into bodies of 1 to 3 frames each, as log objects would hold them. */
function bodiesOf(frames: readonly Uint8Array[], random: ReturnType<typeof randomSource>) {
  const bodies: Uint8Array[] = [];
  for (let i = 0; i < frames.length; ) {
    const take = 1 + random.below(3);
    bodies.push(concat(frames.slice(i, i + take)));
    i += take;
  }
  return bodies;
}

/** Restores the log to `commits` (all of it by default) and returns the file's bytes. */
function restorer(snapshot: Uint8Array, verify: boolean) {
  const directory = temporaryDirectory();
  let restores = 0;
  return async (log: Uint8Array, commits?: number): Promise<Buffer> => {
    restores += 1;
    const target = join(directory, `restore-${restores}.db`);
    await restoreSqliteDatabase({
      targetPath: target,
      snapshot,
      log,
      verify,
      ...(commits === undefined ? {} : { commits }),
    });
    const bytes = readFileSync(target);
    rmSync(target);
    return bytes;
  };
}

/**
 * Checks that `log` with records [first, end) replaced by `merged` restores
 * byte-identically to `log` at every commit count restorable after the run
 * (`reference` caches the unmerged restores), and refuses one inside it.
 */
async function expectExactReplacement(options: {
  frames: readonly Uint8Array[];
  first: number;
  end: number;
  merged: Uint8Array;
  restore: (log: Uint8Array, commits?: number) => Promise<Buffer>;
  reference: Map<number, Buffer>;
}): Promise<void> {
  const { frames, first, end, merged, restore, reference } = options;
  const log = concat([...frames]);
  const replaced = concat([...frames.slice(0, first), merged, ...frames.slice(end)]);
  const before = frames.slice(0, first).reduce((sum, frame) => sum + commitsOf(frame), 0);
  const inRun = frames.slice(first, end).reduce((sum, frame) => sum + commitsOf(frame), 0);
  expect(commitsOf(merged)).toBe(inRun);
  let commits = before + inRun;
  const counts = [commits];
  for (const frame of frames.slice(end)) {
    commits += commitsOf(frame);
    counts.push(commits);
  }
  for (const count of counts) {
    let expected = reference.get(count);
    if (expected === undefined) {
      expected = await restore(log, count);
      reference.set(count, expected);
    }
    const label = `run [${first}, ${end}) restored to commit ${count}`;
    expect((await restore(replaced, count)).equals(expected), label).toBe(true);
  }
  if (inRun > 1)
    await expect(restore(replaced, before + 1)).rejects.toMatchObject({
      name: 'SqliteRestoreRefusedError',
      code: 'SQLITE_RESTORE_POINT_UNAVAILABLE',
    });
}

describe('a merged run replays exactly as the run', () => {
  it('keeps a page written above the run’s final size for a later record that grows over it', async () => {
    const random = randomSource(3);
    const snapshot = syntheticSnapshot(6, random);
    const frames = [
      frameOf({ pages: [[5, 0x55]], databasePages: 6, commitTime: 1 }),
      frameOf({ pages: [[1, 0x11]], databasePages: 2, commitTime: 2 }),
      // Grows back to 6 pages, writing page 6 only: page 5 is the run's.
      frameOf({ pages: [[6, 0x66]], databasePages: 6, commitTime: 3 }),
    ];
    const merged = merge(frames.slice(0, 2));
    const restore = restorer(snapshot, false);
    const bytes = await restore(concat([merged, frames[2]!]));
    expect(bytes.subarray(4 * PAGE_SIZE, 5 * PAGE_SIZE)).toEqual(Buffer.from(page(0x55)));
    expect(bytes.equals(await restore(concat(frames)))).toBe(true);
  });

  it('on random logs that shrink and grow, for many runs, merged once or from merged outputs', async () => {
    for (const seed of [1, 2, 3, 4]) {
      const random = randomSource(seed);
      const snapshot = syntheticSnapshot(2 + random.below(10), random);
      const frames = randomRecords(24, random);
      const restore = restorer(snapshot, false);
      const reference = new Map<number, Buffer>();
      const runs: [number, number][] = [
        [0, frames.length],
        [0, 1],
        [0, 2],
        [0, 9],
        [0, 17],
        [5, 12],
        [11, 23],
        [20, 24],
      ];
      for (const [first, end] of runs) {
        const run = frames.slice(first, end);
        const merged = merge(bodiesOf(run, random));
        await expectExactReplacement({ frames, first, end, merged, restore, reference });
        if (run.length < 2) continue;
        // Merged from merged outputs: the same record, byte for byte.
        const middle = 1 + random.below(run.length - 1);
        const twice = merge([
          merge(bodiesOf(run.slice(0, middle), random)),
          merge(bodiesOf(run.slice(middle), random)),
        ]);
        expect(
          Buffer.from(twice).equals(merged),
          `seed ${seed}, run [${first}, ${end}) merged twice`,
        ).toBe(true);
        await expectExactReplacement({ frames, first, end, merged: twice, restore, reference });
      }
    }
  });
});

describe('on a real SQLite database', () => {
  it('merged runs of its captured log restore to the same files and contents', async () => {
    const directory = temporaryDirectory();
    const path = join(directory, 'app.db');
    const application = new DatabaseSync(path);
    // auto_vacuum=FULL: deletes shrink the file at commit, so the log
    // holds shrinking sizes as well as growing ones.
    application.exec(
      'PRAGMA auto_vacuum=FULL; PRAGMA journal_mode=WAL; CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB)',
    );
    let now = 0;
    const tap = SqliteTap.open(path, { wallNow: () => now });
    let snapshot: Uint8Array;
    let log: Uint8Array;
    const hashes: string[] = [];
    const sizes: number[] = [];
    try {
      const chunks: Uint8Array[] = [];
      for await (const chunk of tap.snapshot()!.read()) chunks.push(chunk);
      snapshot = concat(chunks);
      tap.releaseSnapshot();
      hashes.push(sqliteContentHash(application));
      const insert = application.prepare('INSERT INTO t (v) VALUES (randomblob(?))');
      const statements = [
        ...Array.from({ length: 6 }, () => () => insert.run(3000)),
        () => application.exec('UPDATE t SET v = randomblob(100) WHERE id % 2 = 0'),
        () => application.exec('DELETE FROM t WHERE id > 2'),
        () => insert.run(200),
        ...Array.from({ length: 4 }, () => () => insert.run(5000)),
        () => application.exec('DELETE FROM t WHERE id % 3 = 0'),
        () => application.exec('DELETE FROM t'),
        () => insert.run(10),
      ];
      for (const statement of statements) {
        statement();
        now += 1000;
        tap.capture();
        hashes.push(sqliteContentHash(application));
        sizes.push(application.prepare('PRAGMA page_count').get()!.page_count as number);
      }
      log = tap.readLog(0, tap.logLength)!.bytes;
    } finally {
      tap.close();
      application.close();
    }
    // The database grew and shrank (and each commit is a record of its own).
    expect(Math.max(...sizes)).toBeGreaterThan(sizes.at(-1)! + 5);
    const frames = framesOf(log);
    expect(frames.map(commitsOf)).toEqual(frames.map(() => 1));
    expect(frames).toHaveLength(hashes.length - 1);

    const restore = restorer(snapshot, true);
    const reference = new Map<number, Buffer>();
    for (const [first, end] of [
      [0, frames.length],
      [0, 8],
      [3, 12],
      [7, 15],
    ] as const) {
      const merged = merge(bodiesOf(frames.slice(first, end), randomSource(first + end)));
      await expectExactReplacement({ frames, first, end, merged, restore, reference });
    }
    // The files compared hold the application's contents at each commit.
    for (const [commits, bytes] of reference) {
      const copy = join(directory, `copy-${commits}.db`);
      writeFileSync(copy, bytes);
      const database = new DatabaseSync(copy);
      try {
        expect(sqliteContentHash(database), `commit ${commits}`).toBe(hashes[commits]);
      } finally {
        database.close();
      }
    }
  });

  it('SqliteSource offers a fresh merger per run as its log compactor', async () => {
    const directory = temporaryDirectory();
    const path = join(directory, 'app.db');
    const application = new DatabaseSync(path);
    application.exec('PRAGMA journal_mode=WAL; CREATE TABLE t (id INTEGER PRIMARY KEY)');
    const source = SqliteSource.open({ path, captureIntervalMs: 0 });
    try {
      const compactor = source.logCompactor();
      expect(compactor).toBeInstanceOf(CommitLogMerger);
      expect(source.logCompactor()).not.toBe(compactor);
      compactor.add(frameOf({ pages: [[1, 1]], databasePages: 1, commitTime: 1 }));
      expect(compactor.commits).toBe(1);
    } finally {
      await source.close();
      application.close();
    }
  });
});
