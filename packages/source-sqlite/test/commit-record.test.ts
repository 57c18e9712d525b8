/**
 * The commit record's encoding: the framed-log frame `encodeCommitFrame`
 * builds in place is byte for byte `encodeFrame` of the payload, with its
 * pages in ascending order and its reserved field zero, and it decodes back to
 * what was encoded; and `logCrc32` gives, from the frames' headers alone,
 * the CRC-32 of their concatenation.
 */
import { crc32 } from 'node:zlib';
import { encodeFrame } from '@x/wal-segment';
import { describe, expect, it } from 'vitest';
import {
  BATCH_RECORD_MAGIC,
  COMMIT_RECORD_HEADER_BYTES,
  COMMIT_RECORD_MAGIC,
  commitsOfFrame,
  decodeCommitRecord,
  encodeCommitFrame,
  LOG_FRAME_HEADER_BYTES,
  logCrc32,
} from '../src/commit-record.ts';

const PAGE_SIZE = 512;

function page(fill: number): Uint8Array {
  return new Uint8Array(PAGE_SIZE).fill(fill);
}

/** Every field of the test's record but its pages. */
const FIELDS = {
  pageSize: PAGE_SIZE,
  databasePages: 9,
  commitTime: 1_764_570_000_123.5,
  walSalt1: 0xdeadbeef,
  walSalt2: 0x01020304,
  commitFrame: 17,
};

function record(pages: Map<number, Uint8Array>) {
  return { ...FIELDS, pages };
}

describe('encodeCommitFrame', () => {
  it('is the framed-log frame of the payload, pages in ascending order, reserved field zero', () => {
    // Pages given out of order, as a transaction's frames can be.
    const frame = encodeCommitFrame(
      record(
        new Map([
          [7, page(0x77)],
          [2, page(0x22)],
          [5, page(0x55)],
        ]),
      ),
    );
    const payload = frame.subarray(LOG_FRAME_HEADER_BYTES);
    expect(frame).toEqual(encodeFrame(payload));
    expect(payload.byteLength).toBe(COMMIT_RECORD_HEADER_BYTES + 3 * (4 + PAGE_SIZE));
    const view = new DataView(payload.buffer, payload.byteOffset, payload.byteLength);
    expect(view.getUint32(36, true), 'reserved').toBe(0);
    const decoded = decodeCommitRecord(payload);
    expect([...decoded.pages.keys()]).toEqual([2, 5, 7]);
    expect(decoded.pages.get(2)).toEqual(page(0x22));
    expect(decoded.pages.get(5)).toEqual(page(0x55));
    expect(decoded.pages.get(7)).toEqual(page(0x77));
    expect(decoded).toMatchObject(FIELDS);
  });

  it('writes one commit as version 1, byte for byte as before; several as a batch that says how many', () => {
    const pages = new Map([[4, page(0x44)]]);
    const single = encodeCommitFrame(record(pages));
    expect(encodeCommitFrame({ ...record(pages), commits: 1 })).toEqual(single);
    const singleView = new DataView(single.buffer, LOG_FRAME_HEADER_BYTES);
    expect(singleView.getUint32(0, true)).toBe(COMMIT_RECORD_MAGIC);
    expect(commitsOfFrame(single)).toBe(1);
    expect(decodeCommitRecord(single.subarray(LOG_FRAME_HEADER_BYTES)).commits).toBe(1);

    const batch = encodeCommitFrame({ ...record(pages), commits: 37 });
    const payload = batch.subarray(LOG_FRAME_HEADER_BYTES);
    expect(batch).toEqual(encodeFrame(payload));
    const view = new DataView(payload.buffer, payload.byteOffset, payload.byteLength);
    expect(view.getUint32(0, true)).toBe(BATCH_RECORD_MAGIC);
    expect(view.getUint32(36, true)).toBe(37);
    expect(commitsOfFrame(batch)).toBe(37);
    const decoded = decodeCommitRecord(payload);
    expect(decoded).toMatchObject({ ...FIELDS, commits: 37 });
    expect(decoded.pages.get(4)).toEqual(page(0x44));
  });

  it('refuses a batch of fewer than two commits, and a header with another magic', () => {
    const batch = encodeCommitFrame({ ...record(new Map([[4, page(1)]])), commits: 2 });
    const payload = batch.subarray(LOG_FRAME_HEADER_BYTES).slice();
    new DataView(payload.buffer).setUint32(36, 1, true);
    expect(() => decodeCommitRecord(payload)).toThrow(/stands for 1 commits, not 2 or more/);
    new DataView(payload.buffer).setUint32(0, 0x35434253, true);
    expect(() => decodeCommitRecord(payload)).toThrow(/bad magic/);
    expect(() => encodeCommitFrame({ ...record(new Map()), commits: 0 })).toThrow(RangeError);
  });

  it('refuses a page of the wrong size, naming it', () => {
    expect(() => encodeCommitFrame(record(new Map([[3, new Uint8Array(PAGE_SIZE - 1)]])))).toThrow(
      /page 3 is 511 bytes, not 512/,
    );
  });
});

describe('logCrc32', () => {
  it('is the CRC-32 of the frames concatenated, for runs of records of mixed sizes', () => {
    let seed = 7;
    const next = () => {
      seed = (seed * 1_103_515_245 + 12_345) >>> 0;
      return seed >>> 8;
    };
    const frames: Uint8Array[] = [];
    for (let i = 0; i < 40; i += 1) {
      const pages = new Map<number, Uint8Array>();
      // Mixed page counts, so consecutive frames differ in length.
      const count = 1 + (next() % 4);
      for (let p = 0; p < count; p += 1)
        pages.set(
          1 + (next() % 50),
          Uint8Array.from({ length: PAGE_SIZE }, () => next() & 0xff),
        );
      frames.push(encodeCommitFrame(record(pages)));
    }
    for (const run of [frames.slice(0, 1), frames.slice(3, 4), frames.slice(5, 12), frames]) {
      expect(logCrc32(run)).toBe(crc32(Buffer.concat(run)) >>> 0);
    }
    expect(logCrc32([]), 'no frames').toBe(crc32(new Uint8Array(0)) >>> 0);
  });

  it('refuses a frame whose length field disagrees with its size', () => {
    const frame = encodeCommitFrame(record(new Map([[1, page(1)]])));
    expect(() => logCrc32([frame.subarray(0, frame.byteLength - 1)])).toThrow(
      /log frame of 563 bytes says its payload is 556 bytes/,
    );
  });
});
