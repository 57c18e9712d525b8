/**
 * Damage to a stored-object envelope (`@x/wal-segment`) that a CRC of the
 * stored bytes does not catch, for the hostile `.seg` and `.snap` tables:
 * each edit keeps the header CRC right (or the body CRC, for a replaced
 * body), so only decoding can tell.
 */
import { crc32, zstdCompressSync } from 'node:zlib';
import { decodeSegmentObject } from '@x/wal-segment';
import type { Planter } from './plant.ts';
import { describeHostileTable, passes, type Row, refuses } from './table.ts';

/** The header length of a stored envelope (bytes 4..6). */
export function headerBytes(stored: Uint8Array): number {
  return new DataView(stored.buffer, stored.byteOffset, stored.byteLength).getUint16(4, true);
}

/** Recomputes the header CRC after an edit, so the damage behind it is what a reader meets. */
export function refixHeaderCrc(stored: Uint8Array): Uint8Array {
  const view = new DataView(stored.buffer, stored.byteOffset, stored.byteLength);
  const h = headerBytes(stored);
  view.setUint32(h - 4, crc32(stored.subarray(0, h - 4)), true);
  return stored;
}

/** The edits of one object, given how that object is replaced in the bucket (`damaged`). */
export function envelopeEdits(damaged: (change: (stored: Uint8Array) => Uint8Array) => Planter) {
  return {
    /** A byte of the header set to `value`, the header CRC fixed. */
    headerByte: (at: number, value: number) =>
      damaged((stored) => {
        stored[at] = value;
        return refixHeaderCrc(stored);
      }),
    /** The same header (its body CRC fixed to match) around zstd of `body(decoded)`. */
    otherBody: (body: (decoded: Uint8Array) => Uint8Array) =>
      damaged((stored) => {
        const replacement = body(decodeSegmentObject(stored).body);
        const header = stored.slice(0, headerBytes(stored));
        new DataView(header.buffer).setUint32(48, crc32(replacement), true);
        refixHeaderCrc(header);
        return new Uint8Array(Buffer.concat([header, zstdCompressSync(replacement)]));
      }),
  };
}

/** Restore and `verify --deep` refuse `key` saying `says`; the rest of the bucket is fine. */
export const badEnvelope = (key: string, says: string) => ({
  resume: passes('backed up commit 5'),
  restore: refuses(`object ${key} is corrupt: ${says}`),
  ls: passes('*       0..4'),
  verify: passes('verified 3 restore point(s) (sizes; add --deep for CRC-32)'),
  deep: refuses(`object ${key} is corrupt: ${says}`),
  lease: passes('no lease'),
  acquire: passes('acquired generation 1'),
});

/**
 * Runs `rows` against every operation, each on a fresh copy of the
 * baseline; a restoring operation that refuses must leave its target empty
 * (every row here expects restore to refuse).
 */
export function describeEnvelopeTable(label: string, rows: readonly Row[]): void {
  describeHostileTable(label, rows);
}
