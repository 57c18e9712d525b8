import { zstdCompressSync } from 'node:zlib';
import { crc32Hex, parseManifestKey, snapshotObjectKey } from '@x/manifest';
import type { ObjectStore } from '@x/store';
import { decodeSegmentObject } from '@x/wal-segment';
import { PREFIX } from './hostile/bucket.ts';
import {
  badEnvelope,
  describeEnvelopeTable,
  envelopeEdits,
  headerBytes,
} from './hostile/envelope.ts';
import type { Planter } from './hostile/plant.ts';
import type { Row } from './hostile/table.ts';

/** The baseline's generation-0 snapshot (`snapshot-at-0`, 13 bytes), which the newest manifest names. */
const SNAP = snapshotObjectKey(PREFIX, 0, 0);
const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * Replaces the snapshot by `change(stored)` and rewrites every manifest
 * naming it with the new size and CRC-32: the object passes the download
 * checks and reaches the decoder.
 */
function damagedSnapshot(change: (stored: Uint8Array) => Uint8Array): Planter {
  return async (store: ObjectStore) => {
    const stored = await store.get(SNAP);
    if (stored === null) throw new Error(`the baseline holds no ${SNAP}`);
    const damaged = change(Uint8Array.from(stored.body));
    await store.put(SNAP, damaged);
    let rewritten = 0;
    for (const { key } of (await store.list(`${PREFIX}/manifest/`)).objects) {
      if (parseManifestKey(PREFIX, key) === undefined) continue;
      const json = JSON.parse(decoder.decode((await store.get(key))!.body)) as {
        files: { key: string; size: number; crc32: string }[];
      };
      const entry = json.files.find((file) => file.key === SNAP);
      if (entry === undefined) continue;
      entry.size = damaged.byteLength;
      entry.crc32 = crc32Hex(damaged);
      await store.put(key, encoder.encode(JSON.stringify(json, null, 2)));
      rewritten += 1;
    }
    if (rewritten === 0) throw new Error(`no manifest of the baseline names ${SNAP}`);
  };
}

const { headerByte, otherBody } = envelopeEdits(damagedSnapshot);

// biome-ignore format: one hostile case per line, its expectations beside it
const ROWS: Row[] = [
  { name: '.snap whose body does not decompress', plant: damagedSnapshot((s) => { s.fill(0x55, headerBytes(s)); return s; }), expect: badEnvelope(SNAP, 'body: does not decode as zstd') },
  { name: '.snap whose body is cut short', plant: damagedSnapshot((s) => s.slice(0, s.length - 2)), expect: badEnvelope(SNAP, 'body: does not decode as zstd') },
  { name: '.snap that decompresses to more than its length', plant: otherBody((d) => new Uint8Array(Buffer.concat([d, d]))), expect: badEnvelope(SNAP, 'end: body decodes to more than end − start (13) bytes') },
  { name: '.snap that decompresses to less than its length', plant: otherBody((d) => d.subarray(0, 12)), expect: badEnvelope(SNAP, 'end: body decodes to 12 bytes, not end − start (13)') },
  { name: '.snap that decompresses to other bytes (body CRC)', plant: damagedSnapshot((s) => { const b = decodeSegmentObject(s).body.slice(); b[3] = b[3]! ^ 1; return new Uint8Array(Buffer.concat([s.subarray(0, headerBytes(s)), zstdCompressSync(b)])); }), expect: badEnvelope(SNAP, 'bodyCrc32: decoded body CRC-32') },
  { name: '.snap with a header CRC mismatch', plant: damagedSnapshot((s) => { s[13] = s[13]! ^ 1; return s; }), expect: badEnvelope(SNAP, 'headerCrc32: header CRC-32') },
  { name: '.snap with an unknown codec (9)', plant: headerByte(7, 9), expect: badEnvelope(SNAP, 'codec: unknown codec 9') },
  { name: '.snap whose header says it is a segment', plant: headerByte(9, 1), expect: badEnvelope(SNAP, 'kind:') },
  { name: '.snap whose header names another generation than its key', plant: headerByte(12, 1), expect: badEnvelope(SNAP, 'generation:') },
  { name: '.snap whose header holds other commits than its manifest entry', plant: headerByte(36, 9), expect: badEnvelope(SNAP, 'commits:') },
];

describeEnvelopeTable('hostile .snap', ROWS);
