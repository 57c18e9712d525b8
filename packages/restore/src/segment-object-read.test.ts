import { crc32 } from 'node:zlib';
import { compactedSegmentKey, crc32Hex, type SegmentEntry } from '@x/manifest';
import { encodeFrame, encodeSegmentObject, readSegmentObjectHeader } from '@x/wal-segment';
import { describe, expect, it } from 'vitest';
import { ObjectEncodingError } from './restore-errors.ts';
import { decodeSegmentEntryLinks } from './segment-object-read.ts';

const PREFIX = 'p';
const LINEAGE = 'lineage-1';
/** Bytes 0..32 of generation 0: two frames of 8-byte payloads, commits 0–2. */
const KEY = compactedSegmentKey(PREFIX, 0, 0, 32, 1, 0, 2);

function compacted(body: Uint8Array): Uint8Array {
  return encodeSegmentObject(body, {
    codec: 'zstd',
    kind: 'compacted',
    generation: 0,
    start: 0,
    end: 32,
    commits: 2,
    previousCrc32: 0,
    lineage: LINEAGE,
    decodedLength: body.length,
    chainEndCrc32: 0x1234,
  });
}

function entryOf(stored: Uint8Array): SegmentEntry {
  return { key: KEY, size: stored.length, crc32: crc32Hex(stored), frames: 2, lineage: LINEAGE };
}

const frames = (...payloads: string[]): Uint8Array =>
  new Uint8Array(
    Buffer.concat(payloads.map((payload) => encodeFrame(new TextEncoder().encode(payload)))),
  );

/** What decoding `stored` as the compacted entry throws, or `undefined`. */
function refusalOf(stored: Uint8Array): unknown {
  try {
    decodeSegmentEntryLinks(PREFIX, entryOf(stored), stored, 0);
    return undefined;
  } catch (error) {
    return error;
  }
}

describe('decodeSegmentEntryLinks of a compacted object', () => {
  it('decodes one as long as its range or shorter (a merge)', () => {
    for (const body of [frames('commit-1', 'commit-2'), frames('merged')]) {
      const stored = compacted(body);
      const decoded = decodeSegmentEntryLinks(PREFIX, entryOf(stored), stored, 0);
      expect(Buffer.from(decoded.body).equals(Buffer.from(body))).toBe(true);
      expect(decoded.chainEndCrc32).toBe(0x1234);
      expect(decoded.bodyCrc32).toBe(crc32(body));
    }
  });

  it('refuses one whose decoded length is more than the log its key stands for', () => {
    const stored = compacted(frames('commit-1-longer', 'commit-2-longer'));
    const error = refusalOf(stored);
    expect(ObjectEncodingError.isInstance(error)).toBe(true);
    expect(error).toMatchObject({ key: KEY, field: 'decodedLength' });
    expect((error as Error).message).toContain(
      'decodedLength: 46 is more than the log its key stands for (end − start = 32)',
    );
  });

  it('refuses that before decompressing anything (the key bounds a decompression bomb)', () => {
    // A header claiming 1 GiB around a body that is not zstd at all: the
    // length is refused, the body never reaches the decoder.
    const stored = compacted(frames('commit-1', 'commit-2'));
    const { headerBytes, lineage } = readSegmentObjectHeader(stored);
    const header = stored.slice(0, headerBytes);
    const view = new DataView(header.buffer);
    view.setBigUint64(53 + lineage.length, BigInt(1 << 30), true);
    view.setUint32(headerBytes - 4, crc32(header.subarray(0, headerBytes - 4)), true);
    const bomb = new Uint8Array(Buffer.concat([header, Buffer.alloc(64, 0x55)]));
    expect(refusalOf(bomb)).toMatchObject({ key: KEY, field: 'decodedLength' });
  });
});
