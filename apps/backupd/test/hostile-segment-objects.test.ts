import { zstdCompressSync } from 'node:zlib';
import { crc32Hex } from '@x/manifest';
import type { ObjectStore } from '@x/store';
import { decodeSegmentObject } from '@x/wal-segment';
import { latestManifest, PREFIX } from './hostile/bucket.ts';
import {
  badEnvelope,
  describeEnvelopeTable,
  envelopeEdits,
  headerBytes,
} from './hostile/envelope.ts';
import type { Planter } from './hostile/plant.ts';
import type { Row } from './hostile/table.ts';

/** The newest manifest's last segment: commit 4's frame, bytes 48..64 of generation 0. */
const SEG = `${PREFIX}/wal/00000000000000000000/00000000000000000048-00000000000000000064.seg`;
const encoder = new TextEncoder();

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

const { headerByte, otherBody } = envelopeEdits(damagedSegment);

// biome-ignore format: one hostile case per line, its expectations beside it
const ROWS: Row[] = [
  { name: '.seg whose body does not decompress', plant: damagedSegment((s) => { s.fill(0x55, headerBytes(s)); return s; }), expect: badEnvelope(SEG, 'body: does not decode as zstd') },
  { name: '.seg whose body is cut short', plant: damagedSegment((s) => s.slice(0, s.length - 2)), expect: badEnvelope(SEG, 'body: does not decode as zstd') },
  { name: '.seg that decompresses to more than its range', plant: otherBody((d) => new Uint8Array(Buffer.concat([d, d]))), expect: badEnvelope(SEG, 'end: body decodes to more than end − start (16) bytes') },
  { name: '.seg that decompresses to less than its range', plant: otherBody((d) => d.subarray(0, 15)), expect: badEnvelope(SEG, 'end: body decodes to 15 bytes, not end − start (16)') },
  { name: '.seg that decompresses to other bytes (body CRC)', plant: damagedSegment((s) => { const b = decodeSegmentObject(s).body.slice(); b[12] = b[12]! ^ 1; return new Uint8Array(Buffer.concat([s.subarray(0, headerBytes(s)), zstdCompressSync(b)])); }), expect: badEnvelope(SEG, 'bodyCrc32: decoded body CRC-32') },
  { name: '.seg with a header CRC mismatch', plant: damagedSegment((s) => { s[13] = s[13]! ^ 1; return s; }), expect: badEnvelope(SEG, 'headerCrc32: header CRC-32') },
  { name: '.seg with an unknown codec (9)', plant: headerByte(7, 9), expect: badEnvelope(SEG, 'codec: unknown codec 9') },
  { name: '.seg with an encryption value (2) this reader does not know', plant: headerByte(8, 2), expect: badEnvelope(SEG, 'encryption: unknown encryption 2') },
  { name: '.seg that says encrypted (1) but lists no recipients', plant: headerByte(8, 1), expect: badEnvelope(SEG, 'recipients: ') },
  { name: '.seg with an unknown envelope version (2)', plant: headerByte(6, 2), expect: badEnvelope(SEG, 'version: unknown envelope version 2') },
  { name: '.seg with a bad magic', plant: damagedSegment((s) => { s[0] = 0x58; return s; }), expect: badEnvelope(SEG, 'magic: not BKO1') },
  { name: '.seg whose header names another generation than its key', plant: headerByte(12, 1), expect: badEnvelope(SEG, 'generation: the header says 1, the key says 0') },
  { name: '.seg whose chain CRC is not the previous segment’s', plant: headerByte(44, 0x00), expect: badEnvelope(SEG, 'previousCrc32: the header says') },
];

describeEnvelopeTable('hostile .seg', ROWS);
