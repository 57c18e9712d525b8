/**
 * The patched commit log (SBC3 records, page-patch.ts): what must hold
 * - a record with patches encodes to SBC3 and decodes to the same pages,
 *   patches and fields; a record without is SBC1/SBC2 as before;
 * - a malformed SBC3 record is refused by name (kind, order, runs, length);
 * - the tap's held log writes a page it wrote before as a patch, so a
 *   commit that changes a few bytes of a page ships about those bytes;
 * - exactness: on random logs of whole pages and patches, the sequential
 *   replay, the merged record (compaction) and the gathered writes of a
 *   restore (PendingPageWrites in page-patch.ts) give the same file, and the merged
 *   record is never longer than the run it replaces.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { CommitLogMerger } from './commit-log-merge.ts';
import {
  BATCH_RECORD_MAGIC,
  COMMIT_RECORD_MAGIC,
  type CommitRecord,
  decodeCommitRecord,
  encodeCommitFrame,
  HASHED_PATCH_RECORD_MAGIC,
  LOG_FRAME_HEADER_BYTES,
  PAGE_HASH_BYTES,
  PATCHED_RECORD_MAGIC,
  pageHash,
  splitLogFrames,
} from './commit-record.ts';
import { HeldLog } from './held-log.ts';
import { applyPatch, type PatchRun, PendingPageWrites } from './page-patch.ts';
import type { WalHeader, WalTransaction } from './wal-file.ts';

const PAGE = 512;
const FIELDS = {
  pageSize: PAGE,
  databasePages: 9,
  commitTime: 1_700_000_000_123,
  walSalt1: 5,
  walSalt2: 6,
  commitFrame: 7,
};

const directories: string[] = [];
afterEach(() => {
  for (const directory of directories.splice(0))
    rmSync(directory, { recursive: true, force: true });
});

function payloadOf(frame: Uint8Array): Uint8Array {
  return frame.subarray(LOG_FRAME_HEADER_BYTES).slice();
}

function magicOf(frame: Uint8Array): number {
  return new DataView(frame.buffer, frame.byteOffset).getUint32(LOG_FRAME_HEADER_BYTES, true);
}

const run = (offset: number, ...bytes: number[]): PatchRun => ({
  offset,
  bytes: new Uint8Array(bytes),
});

describe('SBC4 records', () => {
  const patches = new Map([
    [1, [run(0, 1, 2, 3)]],
    [5, [run(511, 9)]],
  ]);
  const hashes = new Map([
    [1, new Uint8Array(PAGE_HASH_BYTES).fill(0xa1)],
    [5, new Uint8Array(PAGE_HASH_BYTES).fill(0xa5)],
  ]);

  it('carry a hash per patched page; a patch without one makes the record SBC3, byte for byte', () => {
    const record: CommitRecord = { ...FIELDS, pages: new Map(), patches, patchHashes: hashes };
    const frame = encodeCommitFrame(record);
    expect(magicOf(frame)).toBe(HASHED_PATCH_RECORD_MAGIC);
    const decoded = decodeCommitRecord(payloadOf(frame));
    expect([...decoded.patchHashes!].map(([n, h]) => [n, Buffer.from(h).toString('hex')])).toEqual([
      [1, 'a1'.repeat(8)],
      [5, 'a5'.repeat(8)],
    ]);
    expect(decoded.patches!.get(5)![0]!.offset).toBe(511);
    const partial = encodeCommitFrame({ ...record, patchHashes: new Map([[1, hashes.get(1)!]]) });
    expect(magicOf(partial)).toBe(PATCHED_RECORD_MAGIC);
    expect(Buffer.from(partial)).toEqual(
      Buffer.from(encodeCommitFrame({ ...FIELDS, pages: new Map(), patches })),
    );
    expect(decodeCommitRecord(payloadOf(partial)).patchHashes).toBeUndefined();
  });

  it('refuse a record whose hash table is short or long', () => {
    const good = payloadOf(
      encodeCommitFrame({ ...FIELDS, pages: new Map(), patches, patchHashes: hashes }),
    );
    expect(() => decodeCommitRecord(good.subarray(0, good.byteLength - 1))).toThrow(
      /ends inside the hashes of its 2 patched pages/,
    );
    const long = new Uint8Array(good.byteLength + 1);
    long.set(good);
    expect(() => decodeCommitRecord(long)).toThrow(/1 bytes after its 2 patches and their hashes/);
  });

  it('merge into a record carrying the hash of the last patch of each page, or SBC3 when that patch had none', () => {
    const frame = (record: Partial<CommitRecord>) =>
      encodeCommitFrame({ ...FIELDS, pages: new Map(), ...record } as CommitRecord);
    const first = frame({
      patches: new Map([[1, [run(0, 1)]]]),
      patchHashes: new Map([[1, new Uint8Array(PAGE_HASH_BYTES).fill(1)]]),
    });
    const second = frame({
      patches: new Map([[1, [run(4, 2)]]]),
      patchHashes: new Map([[1, new Uint8Array(PAGE_HASH_BYTES).fill(2)]]),
    });
    const merger = new CommitLogMerger();
    merger.add(Buffer.concat([first, second]));
    const merged = decodeCommitRecord(payloadOf(merger.finish()));
    expect(Buffer.from(merged.patchHashes!.get(1)!)).toEqual(Buffer.alloc(PAGE_HASH_BYTES, 2));
    const unhashed = frame({ patches: new Map([[1, [run(8, 3)]]]) });
    const older = new CommitLogMerger();
    older.add(Buffer.concat([first, unhashed]));
    const mergedOlder = older.finish();
    expect(magicOf(mergedOlder)).toBe(PATCHED_RECORD_MAGIC);
  });
});

describe('SBC3 records', () => {
  it('round trip whole pages and patches, with the commit count; a record without patches stays SBC1 or SBC2', () => {
    const record: CommitRecord = {
      ...FIELDS,
      pages: new Map([[2, new Uint8Array(PAGE).fill(0x22)]]),
      patches: new Map([
        [1, [run(0, 1, 2, 3), run(100, 4)]],
        [5, [run(511, 9)]],
      ]),
    };
    const frame = encodeCommitFrame(record);
    expect(magicOf(frame)).toBe(PATCHED_RECORD_MAGIC);
    const decoded = decodeCommitRecord(payloadOf(frame));
    expect(decoded).toMatchObject({ ...FIELDS, commits: 1 });
    expect([...decoded.pages.keys()]).toEqual([2]);
    expect(decoded.pages.get(2)).toEqual(new Uint8Array(PAGE).fill(0x22));
    expect(
      [...decoded.patches!].map(([n, runs]) => [n, runs.map((r) => [r.offset, [...r.bytes]])]),
    ).toEqual([
      [
        1,
        [
          [0, [1, 2, 3]],
          [100, [4]],
        ],
      ],
      [5, [[511, [9]]]],
    ]);
    const batch = encodeCommitFrame({ ...record, commits: 12 });
    expect(decodeCommitRecord(payloadOf(batch)).commits).toBe(12);
    // Whole pages only: the earlier versions, byte for byte.
    const plain = { ...FIELDS, pages: record.pages };
    expect(magicOf(encodeCommitFrame({ ...plain, patches: new Map() }))).toBe(COMMIT_RECORD_MAGIC);
    expect(Buffer.from(encodeCommitFrame({ ...plain, patches: new Map() }))).toEqual(
      Buffer.from(encodeCommitFrame(plain)),
    );
    expect(magicOf(encodeCommitFrame({ ...plain, commits: 3 }))).toBe(BATCH_RECORD_MAGIC);
  });

  it('refuses to encode a page both whole and patched, or a patch with bad runs', () => {
    const whole = new Map([[1, new Uint8Array(PAGE)]]);
    expect(() =>
      encodeCommitFrame({ ...FIELDS, pages: whole, patches: new Map([[1, [run(0, 1)]]]) }),
    ).toThrow(/page 1 is both whole and patched/);
    expect(() =>
      encodeCommitFrame({ ...FIELDS, pages: new Map(), patches: new Map([[1, [run(512, 1)]]]) }),
    ).toThrow(/the patch of page 1: run 1 ends at byte 513, past the 512-byte page/);
  });

  it('refuses a malformed record by name: page order, runs, a short or long payload, page count, 0 commits', () => {
    const good = payloadOf(
      encodeCommitFrame({
        ...FIELDS,
        pages: new Map(),
        patches: new Map([
          [3, [run(10, 1, 1)]],
          [4, [run(20, 2)]],
        ]),
      }),
    );
    const decode = (edit: (payload: Uint8Array, view: DataView) => unknown) => {
      const payload = good.slice();
      const result = edit(payload, new DataView(payload.buffer));
      const edited = result instanceof Uint8Array ? result : payload;
      return () => decodeCommitRecord(edited);
    };
    // Layout: header 40 (no whole pages), patch count at 40; page 3 at 44
    // (number), run count at 48, its run at 52 (offset), 56 (length), bytes
    // at 60..61; page 4 at 62.
    expect(decode((_, v) => v.setUint32(62, 3, true))).toThrow(
      /patches page 3 after page 3 \(patched pages must ascend\)/,
    );
    expect(decode((_, v) => v.setUint32(52, 511, true))).toThrow(
      /patch of page 3: run 1 ends at byte 513/,
    );
    expect(decode((_, v) => v.setUint32(56, 0, true))).toThrow(/patch of page 3: run 1 is empty/);
    expect(decode((p) => p.subarray(0, p.byteLength - 1))).toThrow(
      /ends inside the patch of page 4/,
    );
    expect(decode((p) => new Uint8Array(Buffer.concat([p, new Uint8Array(3)])))).toThrow(
      /3 bytes after its 2 patches/,
    );
    expect(decode((_, v) => v.setUint32(12, 1, true))).toThrow(/does not match its page count/);
    expect(decode((_, v) => v.setUint32(36, 0, true))).toThrow(/stands for 0 commits/);
  });
});

const HEADER: WalHeader = {
  magic: 0x377f0682,
  formatVersion: 3007000,
  pageSize: PAGE,
  checkpointSequence: 0,
  salt1: 1,
  salt2: 2,
  checksum1: 0,
  checksum2: 0,
  bigEndianChecksums: false,
} as unknown as WalHeader;

function transaction(pages: Map<number, Uint8Array>, databasePages: number): WalTransaction {
  return { pages, databasePages, commitFrame: 1 } as unknown as WalTransaction;
}

describe('the held log writes patches', () => {
  it('a page written before is logged as the bytes that changed; without bases, whole', () => {
    const patched = new HeldLog(PAGE, {
      maxHeldLogBytes: 64 * 1024 * 1024,
      maxPageBaseBytes: 1024 * 1024,
    });
    const plain = new HeldLog(PAGE, { maxHeldLogBytes: 64 * 1024 * 1024 });
    const version = new Uint8Array(PAGE).fill(0x5a);
    for (const log of [patched, plain]) {
      log.add(HEADER, transaction(new Map([[2, version.slice()]]), 2), 1);
      for (let i = 0; i < 10; i += 1) {
        version.fill(i, 100, 200); // a 100-byte row rewritten
        log.add(HEADER, transaction(new Map([[2, version.slice()]]), 2), 2 + i);
      }
    }
    const patchedLog = patched.read(0, patched.logEnd)!;
    const plainLog = plain.read(0, plain.logEnd)!;
    expect(patchedLog.commits).toBe(11);
    // The first record whole, then ten of about 100 bytes each.
    expect(plainLog.bytes.byteLength).toBe(11 * (LOG_FRAME_HEADER_BYTES + 40 + 4 + PAGE));
    // Each patch record: the patch count, then page number, run count, one
    // run's offset and length, the 100 bytes, and the page's hash.
    expect(patchedLog.bytes.byteLength).toBe(
      LOG_FRAME_HEADER_BYTES +
        44 +
        PAGE +
        10 * (LOG_FRAME_HEADER_BYTES + 40 + 4 + 4 + 4 + 8 + 100 + PAGE_HASH_BYTES),
    );
    const magics = splitLogFrames(patchedLog.bytes).payloads.map((p) =>
      new DataView(p.buffer, p.byteOffset).getUint32(0, true),
    );
    expect(magics).toEqual([COMMIT_RECORD_MAGIC, ...Array(10).fill(HASHED_PATCH_RECORD_MAGIC)]);
    // Each patch carries the hash of the page it gives, as the tap captured it.
    const last = decodeCommitRecord(splitLogFrames(patchedLog.bytes).payloads.at(-1)!);
    expect(Buffer.from(last.patchHashes!.get(2)!)).toEqual(pageHash(version));
    // Both replay to the same page.
    expect(replay(patchedLog.bytes, new Map()).pages.get(2)).toEqual(version);
    expect(replay(plainLog.bytes, new Map()).pages.get(2)).toEqual(version);
  });

  it('batches past maxHeldLogRecords records held, however small they are', () => {
    const log = new HeldLog(PAGE, {
      maxHeldLogBytes: 1024 * 1024 * 1024,
      maxHeldLogRecords: 3,
      maxPageBaseBytes: 1024 * 1024,
    });
    const version = new Uint8Array(PAGE);
    for (let i = 0; i < 5; i += 1) {
      version[i] = 1;
      log.add(HEADER, transaction(new Map([[2, version.slice()]]), 2), i);
    }
    expect([log.commits, log.batchedCommits]).toEqual([3, 2]);
    log.sealBatch();
    const payloads = splitLogFrames(log.read(0, log.logEnd)!.bytes).payloads;
    expect(payloads.map((p) => decodeCommitRecord(p).commits)).toEqual([1, 1, 1, 2]);
    // Released, the log holds fewer records: the next commit is a record of its own.
    log.release(log.logEnd);
    log.add(HEADER, transaction(new Map([[2, version.slice()]]), 2), 9);
    expect([log.commits, log.batchedCommits]).toEqual([6, 0]);
    expect(
      replay(log.read(log.logStart, log.logEnd)!.bytes, new Map([[2, version]])).pages.get(2),
    ).toEqual(version);
  });

  it("takes the snapshot's overlay pages as bases from the start", () => {
    const overlay = new Map([[3, new Uint8Array(PAGE).fill(1)]]);
    const log = new HeldLog(PAGE, {
      maxHeldLogBytes: 64 * 1024 * 1024,
      maxPageBaseBytes: 1024 * 1024,
      snapshotPages: overlay,
    });
    const next = new Uint8Array(PAGE).fill(1);
    next[7] = 2;
    log.add(HEADER, transaction(new Map([[3, next]]), 3), 1);
    const record = decodeCommitRecord(splitLogFrames(log.read(0, log.logEnd)!.bytes).payloads[0]!);
    expect(record.pages.size).toBe(0);
    expect([...record.patches!.get(3)!].map((r) => [r.offset, [...r.bytes]])).toEqual([[7, [2]]]);
  });
});

/** Applies framed-log `bytes` in order onto `image` (page → bytes), as a restore does; the final size is the last record's. */
function replay(
  bytes: Uint8Array,
  image: Map<number, Uint8Array>,
): { pages: Map<number, Uint8Array>; databasePages: number | null } {
  const pages = new Map([...image].map(([n, p]) => [n, p.slice()]));
  let databasePages: number | null = null;
  for (const payload of splitLogFrames(bytes).payloads) {
    const record = decodeCommitRecord(payload);
    for (const [n, page] of record.pages) pages.set(n, page.slice());
    for (const [n, runs] of record.patches ?? []) {
      const page = pages.get(n) ?? new Uint8Array(PAGE);
      applyPatch(page, runs);
      pages.set(n, page);
    }
    databasePages = record.databasePages;
  }
  return { pages, databasePages };
}

function fileOf(result: { pages: Map<number, Uint8Array>; databasePages: number | null }) {
  const pages = result.databasePages ?? 0;
  const file = new Uint8Array(pages * PAGE);
  for (const [n, page] of result.pages) if (n <= pages) file.set(page, (n - 1) * PAGE);
  return file;
}

/** Random logs: each commit rewrites a few byte ranges of a few of 6 pages, the size moving between 3 and 6 pages. */
const commitsArbitrary = fc.array(
  fc.record({
    databasePages: fc.integer({ min: 3, max: 6 }),
    edits: fc.array(
      fc.tuple(
        fc.integer({ min: 1, max: 6 }),
        fc.integer({ min: 0, max: PAGE - 40 }),
        fc.integer({ min: 1, max: 40 }),
        fc.integer({ min: 0, max: 255 }),
      ),
      { minLength: 1, maxLength: 4 },
    ),
  }),
  { minLength: 2, maxLength: 25 },
);

describe('exactness of patched logs (property)', () => {
  it('the sequential replay, the merged record and the gathered restore writes give the same file', async () => {
    const directory = mkdtempSync(join(tmpdir(), 'backupd-patched-log-'));
    directories.push(directory);
    let file = 0;
    await fc.assert(
      fc.asyncProperty(
        commitsArbitrary,
        fc.integer({ min: 0, max: 24 }),
        async (commits, cutAt) => {
          // The snapshot: 4 pages; the application's pages evolve from it.
          const snapshot = new Map<number, Uint8Array>();
          for (let n = 1; n <= 4; n += 1) snapshot.set(n, new Uint8Array(PAGE).fill(n));
          const current = new Map([...snapshot].map(([n, p]) => [n, p.slice()]));
          const log = new HeldLog(PAGE, {
            maxHeldLogBytes: 64 * 1024 * 1024,
            maxPageBaseBytes: 3 * PAGE,
            snapshotPages: snapshot,
          });
          for (const [index, commit] of commits.entries()) {
            const written = new Map<number, Uint8Array>();
            for (const [n, at, length, value] of commit.edits) {
              const page = current.get(n) ?? new Uint8Array(PAGE);
              page.fill(value, at, at + length);
              current.set(n, page);
              written.set(n, page.slice());
            }
            log.add(HEADER, transaction(written, commit.databasePages), index);
          }
          const bytes = log.read(0, log.logEnd)!.bytes;
          const expected = fileOf(replay(bytes, snapshot));
          // The application's own file: the log is exact.
          expect(
            Buffer.from(
              fileOf({ pages: current, databasePages: commits.at(-1)!.databasePages }),
            ).equals(Buffer.from(expected)),
          ).toBe(true);

          // Compaction: a run from `cut` on merged into one record.
          const frames = splitLogFrames(bytes).payloads.map((p) =>
            bytes.subarray(
              p.byteOffset - bytes.byteOffset - LOG_FRAME_HEADER_BYTES,
              p.byteOffset - bytes.byteOffset + p.byteLength,
            ),
          );
          const cut = Math.min(cutAt, frames.length - 1);
          const merger = new CommitLogMerger();
          for (const frame of frames.slice(cut)) merger.add(frame);
          const mergedRun = merger.finish();
          // Never longer than the run it replaces (a compacted object's
          // decoded length is bounded by its key's range).
          const runBytes = frames.slice(cut).reduce((sum, frame) => sum + frame.byteLength, 0);
          expect(mergedRun.byteLength).toBeLessThanOrEqual(runBytes);
          const merged = new Uint8Array(Buffer.concat([...frames.slice(0, cut), mergedRun]));
          expect(Buffer.from(fileOf(replay(merged, snapshot))).equals(Buffer.from(expected))).toBe(
            true,
          );

          // A restore's gathered writes onto a file holding the snapshot.
          const path = join(directory, `file-${file++}`);
          const handle = await open(path, 'w+');
          try {
            for (const [n, page] of snapshot) await handle.write(page, 0, PAGE, (n - 1) * PAGE);
            // Written out twice: after the `cut`th record (as a restore past
            // its memory bound does) and at the end.
            const pending = new PendingPageWrites(PAGE);
            for (const [index, payload] of splitLogFrames(merged).payloads.entries()) {
              pending.add(decodeCommitRecord(payload));
              if (index === Math.max(0, cut - 1)) await pending.writeTo(handle);
            }
            await pending.writeTo(handle);
            await handle.truncate(commits.at(-1)!.databasePages * PAGE);
            const restored = new Uint8Array(commits.at(-1)!.databasePages * PAGE);
            await handle.read(restored, 0, restored.byteLength, 0);
            expect(Buffer.from(restored).equals(Buffer.from(expected))).toBe(true);
          } finally {
            await handle.close();
          }
        },
      ),
      { numRuns: 150 },
    );
  });
});
