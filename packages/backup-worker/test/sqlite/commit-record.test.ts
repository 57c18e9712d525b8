/**
 * The commit record's encoding: the framed-log frame `encodeCommitFrame`
 * builds in place is byte for byte `encodeFrame` of the payload, with its
 * pages in ascending order and its reserved field zero, and it decodes back to
 * what was encoded.
 */
import { encodeFrame } from '@x/wal-segment';
import { describe, expect, it } from 'vitest';
import {
  COMMIT_RECORD_HEADER_BYTES,
  decodeCommitRecord,
  encodeCommitFrame,
  LOG_FRAME_HEADER_BYTES,
} from '../../src/sqlite/commit-record.ts';

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

  it('refuses a page of the wrong size, naming it', () => {
    expect(() => encodeCommitFrame(record(new Map([[3, new Uint8Array(PAGE_SIZE - 1)]])))).toThrow(
      /page 3 is 511 bytes, not 512/,
    );
  });
});
