/**
 * Hostile `.snap` snapshots: the stored-object envelope of the snapshot
 * damaged in ways a CRC of the stored bytes does not catch (every manifest
 * naming it is rewritten to the damaged object's size and CRC-32, so only
 * decoding can tell). Restore and `verify --deep` refuse each with the key
 * and the envelope field; nothing is written to the restore target;
 * everything that does not read the snapshot's body (resume, retention, ls,
 * verify by sizes, the lease) is unaffected. Same table and checks as
 * `hostile-bucket.test.ts`.
 */
import { readdir } from 'node:fs/promises';
import { crc32, zstdCompressSync } from 'node:zlib';
import { crc32Hex, parseManifestKey, snapshotObjectKey } from '@x/manifest';
import type { ObjectStore } from '@x/store';
import { decodeSegmentObject } from '@x/wal-segment';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PREFIX } from './hostile/bucket.ts';
import { OPERATIONS, RESTORING_OPERATIONS, runOperation } from './hostile/operations.ts';
import type { Planter } from './hostile/plant.ts';
import { HostileTable, passes, type Row, refuses } from './hostile/table.ts';

/** The baseline's generation-0 snapshot (`snapshot-at-0`, 13 bytes), which the newest manifest names. */
const SNAP = snapshotObjectKey(PREFIX, 0, 0);
const encoder = new TextEncoder();
const decoder = new TextDecoder();

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

/** A byte of the header set to `value`, the header CRC fixed. */
const headerByte = (at: number, value: number) =>
  damagedSnapshot((stored) => {
    stored[at] = value;
    return refixHeaderCrc(stored);
  });

/** The same header (its body CRC fixed to match) around zstd of `body(decoded)`. */
const otherBody = (body: (decoded: Uint8Array) => Uint8Array) =>
  damagedSnapshot((stored) => {
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
  restore: refuses(`object ${SNAP} is corrupt: ${says}`),
  ls: passes('*       0..4'),
  verify: passes('verified 3 restore point(s) (sizes; add --deep for CRC-32)'),
  deep: refuses(`object ${SNAP} is corrupt: ${says}`),
  lease: passes('no lease'),
  acquire: passes('acquired generation 1'),
});

// biome-ignore format: one hostile case per line, its expectations beside it
const ROWS: Row[] = [
  { name: '.snap whose body does not decompress', plant: damagedSnapshot((s) => { s.fill(0x55, headerBytes(s)); return s; }), expect: badEnvelope('body: does not decode as zstd') },
  { name: '.snap whose body is cut short', plant: damagedSnapshot((s) => s.slice(0, s.length - 2)), expect: badEnvelope('body: does not decode as zstd') },
  { name: '.snap that decompresses to more than its length', plant: otherBody((d) => new Uint8Array(Buffer.concat([d, d]))), expect: badEnvelope('end: body decodes to more than end − start (13) bytes') },
  { name: '.snap that decompresses to less than its length', plant: otherBody((d) => d.subarray(0, 12)), expect: badEnvelope('end: body decodes to 12 bytes, not end − start (13)') },
  { name: '.snap that decompresses to other bytes (body CRC)', plant: damagedSnapshot((s) => { const b = decodeSegmentObject(s).body.slice(); b[3] = b[3]! ^ 1; return new Uint8Array(Buffer.concat([s.subarray(0, headerBytes(s)), zstdCompressSync(b)])); }), expect: badEnvelope('bodyCrc32: decoded body CRC-32') },
  { name: '.snap with a header CRC mismatch', plant: damagedSnapshot((s) => { s[13] = s[13]! ^ 1; return s; }), expect: badEnvelope('headerCrc32: header CRC-32') },
  { name: '.snap with an unknown codec (9)', plant: headerByte(7, 9), expect: badEnvelope('codec: unknown codec 9') },
  { name: '.snap whose header says it is a segment', plant: headerByte(9, 1), expect: badEnvelope('kind:') },
  { name: '.snap whose header names another generation than its key', plant: headerByte(12, 1), expect: badEnvelope('generation:') },
  { name: '.snap whose header holds other commits than its manifest entry', plant: headerByte(36, 9), expect: badEnvelope('commits:') },
];

const table = new HostileTable();
beforeAll(() => table.setUp());
afterAll(() => table.tearDown());

describe.concurrent.each(ROWS)('hostile .snap: $name', (row) => {
  it.each(OPERATIONS)('%s', async (operation) => {
    await table.run(row, operation, async (store, paths) => {
      const outcome = await runOperation(operation, store, paths);
      if (RESTORING_OPERATIONS.has(operation)) {
        // Refused before a byte of the snapshot was used: the target holds nothing.
        const entries = await readdir(paths.target).catch(() => []);
        expect(entries, `${operation} left files in the target`).toEqual([]);
      }
      return outcome;
    });
  });
});
