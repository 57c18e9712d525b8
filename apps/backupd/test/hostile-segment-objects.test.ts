/**
 * Hostile `.seg` segments: the stored-object envelope damaged in ways a CRC
 * of the stored bytes does not catch (the manifest entry is rewritten to
 * the damaged object's size and CRC-32, so only decoding can tell). Restore
 * and `verify --deep` refuse each with the key and the envelope field;
 * nothing is written to the restore target; everything that does not read
 * segment bodies (resume, retention, ls, verify by sizes, the lease) is
 * unaffected. Same table and checks as `hostile-bucket.test.ts`.
 */
import { readdir } from 'node:fs/promises';
import { crc32, zstdCompressSync } from 'node:zlib';
import { crc32Hex } from '@x/manifest';
import type { ObjectStore } from '@x/store';
import { decodeSegmentObject } from '@x/wal-segment';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { latestManifest, PREFIX } from './hostile/bucket.ts';
import { OPERATIONS, RESTORING_OPERATIONS, runOperation } from './hostile/operations.ts';
import type { Planter } from './hostile/plant.ts';
import { HostileTable, passes, type Row, refuses } from './hostile/table.ts';

/** The newest manifest's last segment: commit 4's frame, bytes 48..64 of generation 0. */
const SEG = `${PREFIX}/wal/00000000000000000000/00000000000000000048-00000000000000000064.seg`;
const encoder = new TextEncoder();

/** The header length of a stored envelope (bytes 4..6). */
function headerBytes(stored: Uint8Array): number {
  return new DataView(stored.buffer, stored.byteOffset, stored.byteLength).getUint16(4, true);
}

/** Recomputes the header CRC after an edit, so the damage behind it is what a reader meets. */
function refixHeaderCrc(stored: Uint8Array): Uint8Array {
  const view = new DataView(stored.buffer, stored.byteOffset, stored.byteLength);
  const h = headerBytes(stored);
  view.setUint32(h - 4, crc32(stored.subarray(0, h - 4)), true);
  return stored;
}

/**
 * Replaces the last segment of the newest manifest by `change(stored)` and
 * rewrites that manifest in place with the new size and CRC-32: the object
 * passes the download checks and reaches the decoder.
 */
function damagedSegment(change: (stored: Uint8Array) => Uint8Array): Planter {
  return async (store: ObjectStore) => {
    const { key } = await latestManifest(store);
    const object = await store.get(key);
    const json = JSON.parse(new TextDecoder().decode(object!.body)) as {
      segments: { key: string; size: number; crc32: string }[];
    };
    const segment = json.segments.at(-1)!;
    if (segment.key !== SEG) throw new Error(`the baseline's last segment is ${segment.key}`);
    const stored = (await store.get(SEG))!.body;
    const damaged = change(Uint8Array.from(stored));
    await store.put(SEG, damaged);
    segment.size = damaged.byteLength;
    segment.crc32 = crc32Hex(damaged);
    await store.put(key, encoder.encode(JSON.stringify(json, null, 2)));
  };
}

/** A byte of the header set to `value`, the header CRC fixed. */
const headerByte = (at: number, value: number) =>
  damagedSegment((stored) => {
    stored[at] = value;
    return refixHeaderCrc(stored);
  });

/** The same header (its body CRC fixed to match) around zstd of `body(decoded)`. */
const otherBody = (body: (decoded: Uint8Array) => Uint8Array) =>
  damagedSegment((stored) => {
    const decoded = decodeSegmentObject(stored).body;
    const replacement = body(decoded);
    const header = stored.slice(0, headerBytes(stored));
    new DataView(header.buffer).setUint32(48, crc32(replacement), true);
    refixHeaderCrc(header);
    return new Uint8Array(Buffer.concat([header, zstdCompressSync(replacement)]));
  });

/** Restore and `verify --deep` refuse saying `says`; the rest of the bucket is fine. */
const badEnvelope = (says: string) => ({
  resume: passes('backed up commit 5'),
  restore: refuses(`object ${SEG} is corrupt: ${says}`),
  ls: passes('*       0..4'),
  verify: passes('verified 3 restore point(s) (sizes; add --deep for CRC-32)'),
  deep: refuses(`object ${SEG} is corrupt: ${says}`),
  lease: passes('no lease'),
  acquire: passes('acquired generation 1'),
});

// biome-ignore format: one hostile case per line, its expectations beside it
const ROWS: Row[] = [
  { name: '.seg whose body does not decompress', plant: damagedSegment((s) => { s.fill(0x55, headerBytes(s)); return s; }), expect: badEnvelope('body: does not decode as zstd') },
  { name: '.seg whose body is cut short', plant: damagedSegment((s) => s.slice(0, s.length - 2)), expect: badEnvelope('body: does not decode as zstd') },
  { name: '.seg that decompresses to more than its range', plant: otherBody((d) => new Uint8Array(Buffer.concat([d, d]))), expect: badEnvelope('end: body decodes to more than end − start (16) bytes') },
  { name: '.seg that decompresses to less than its range', plant: otherBody((d) => d.subarray(0, 15)), expect: badEnvelope('end: body decodes to 15 bytes, not end − start (16)') },
  { name: '.seg that decompresses to other bytes (body CRC)', plant: damagedSegment((s) => { const b = decodeSegmentObject(s).body.slice(); b[12] = b[12]! ^ 1; return new Uint8Array(Buffer.concat([s.subarray(0, headerBytes(s)), zstdCompressSync(b)])); }), expect: badEnvelope('bodyCrc32: decoded body CRC-32') },
  { name: '.seg with a header CRC mismatch', plant: damagedSegment((s) => { s[13] = s[13]! ^ 1; return s; }), expect: badEnvelope('headerCrc32: header CRC-32') },
  { name: '.seg with an unknown codec (9)', plant: headerByte(7, 9), expect: badEnvelope('codec: unknown codec 9') },
  { name: '.seg with an encryption value (1) this reader does not know', plant: headerByte(8, 1), expect: badEnvelope('encryption: unknown encryption 1') },
  { name: '.seg with an unknown envelope version (2)', plant: headerByte(6, 2), expect: badEnvelope('version: unknown envelope version 2') },
  { name: '.seg with a bad magic', plant: damagedSegment((s) => { s[0] = 0x58; return s; }), expect: badEnvelope('magic: not BKO1') },
  { name: '.seg whose header names another generation than its key', plant: headerByte(12, 1), expect: badEnvelope('generation: the header says 1, the key says 0') },
  { name: '.seg whose chain CRC is not the previous segment’s', plant: headerByte(44, 0x00), expect: badEnvelope('previousCrc32: the header says') },
];

const table = new HostileTable();
beforeAll(() => table.setUp());
afterAll(() => table.tearDown());

describe.concurrent.each(ROWS)('hostile .seg: $name', (row) => {
  it.each(OPERATIONS)('%s', async (operation) => {
    await table.run(row, operation, async (store, paths) => {
      const outcome = await runOperation(operation, store, paths);
      if (RESTORING_OPERATIONS.has(operation)) {
        // Refused before a byte of the segment was used: the target holds nothing.
        const entries = await readdir(paths.target).catch(() => []);
        expect(entries, `${operation} left files in the target`).toEqual([]);
      }
      return outcome;
    });
  });
});
