/**
 * Archives and side files stored whole in the envelope (`.bko`, kind file),
 * as an encrypted backup stores them: read like a `.snap`, their header held
 * to their key and entry.
 */
import { generateIdentity, parseIdentity, parseRecipient } from '@x/age-envelope';
import {
  archiveKey,
  archiveObjectKey,
  crc32Hex,
  type FileEntry,
  sideKey,
  sideObjectKey,
  snapshotObjectKey,
} from '@x/manifest';
import { MemoryStore } from '@x/store';
import { encodeSegmentObject, type SegmentObjectFields } from '@x/wal-segment';
import { describe, expect, it } from 'vitest';
import { downloadFileObject, isFileObject } from './file-object-read.ts';
import { isEnvelopeKey, isRawLayout } from './generation-encryption.ts';
import { ObjectEncodingError, ObjectKeyError } from './restore-errors.ts';

const PREFIX = 'p';
const LINEAGE = 'l'.repeat(32);
const ARCHIVE = new TextEncoder().encode('frames of an archived WAL file');

const pair = generateIdentity();
const identities = [parseIdentity(pair.identity, 'test key')];
const recipients = [parseRecipient(pair.recipient)];

function sealed(body: Uint8Array, fields: Partial<SegmentObjectFields> = {}): Uint8Array {
  return encodeSegmentObject(
    body,
    {
      codec: 'zstd',
      kind: 'file',
      generation: 3,
      start: 0,
      end: body.byteLength,
      commits: 2,
      previousCrc32: 0,
      lineage: LINEAGE,
      ...fields,
    },
    { recipients },
  );
}

async function read(key: string, stored: Uint8Array, entry: Partial<FileEntry> = {}) {
  const store = new MemoryStore();
  await store.put(key, stored);
  const chunks: Uint8Array[] = [];
  const full: FileEntry = {
    name: 'wal.4.archive',
    key,
    size: stored.byteLength,
    crc32: crc32Hex(stored),
    frames: 2,
    lineage: LINEAGE,
    ...entry,
  };
  await downloadFileObject(store, PREFIX, full, (chunk) => void chunks.push(chunk), {
    manifestKey: 'm',
    identities,
  });
  return Buffer.concat(chunks);
}

describe('file objects (.bko archives and side files)', () => {
  it('are envelope keys, their raw forms plaintext', () => {
    for (const key of [archiveObjectKey(PREFIX, 3, 4), sideObjectKey(PREFIX, 'r', '0badf00d', 9)]) {
      expect(isFileObject(PREFIX, key)).toBe(true);
      expect(isEnvelopeKey(PREFIX, key)).toBe(true);
      expect(isRawLayout(PREFIX, key)).toBe(false);
    }
    for (const key of [archiveKey(PREFIX, 3, 4), sideKey(PREFIX, 'r', '0badf00d', 9)]) {
      expect(isFileObject(PREFIX, key)).toBe(false);
      expect(isRawLayout(PREFIX, key)).toBe(true);
    }
    expect(isFileObject(PREFIX, snapshotObjectKey(PREFIX, 3, 4))).toBe(true);
  });

  it('decode to the file, for an archive of the key’s generation and a side file of none', async () => {
    expect(await read(archiveObjectKey(PREFIX, 3, 4), sealed(ARCHIVE))).toEqual(
      Buffer.from(ARCHIVE),
    );
    const side = sealed(ARCHIVE, { generation: 0, commits: 0 });
    const key = sideObjectKey(PREFIX, 'roles.json', crc32Hex(side), side.byteLength);
    expect(await read(key, side, { name: 'roles.json', frames: 0 })).toEqual(Buffer.from(ARCHIVE));
  });

  it('refuse a header that disagrees with the key or entry, and open for no other key', async () => {
    const key = archiveObjectKey(PREFIX, 3, 4);
    const refusal = (stored: Uint8Array, entry: Partial<FileEntry> = {}) =>
      read(key, stored, entry).catch((error: unknown) => error);
    const field = async (stored: Uint8Array, entry: Partial<FileEntry> = {}) => {
      const error = await refusal(stored, entry);
      expect(ObjectEncodingError.isInstance(error)).toBe(true);
      return (error as ObjectEncodingError).field;
    };
    expect(await field(sealed(ARCHIVE, { kind: 'snapshot' }))).toBe('kind');
    expect(await field(sealed(ARCHIVE, { generation: 2 }))).toBe('generation');
    expect(await field(sealed(ARCHIVE), { frames: 3 })).toBe('commits');
    const locked = encodeSegmentObject(
      ARCHIVE,
      {
        codec: 'zstd',
        kind: 'file',
        generation: 3,
        start: 0,
        end: ARCHIVE.byteLength,
        commits: 2,
        previousCrc32: 0,
        lineage: LINEAGE,
      },
      { recipients: [parseRecipient(generateIdentity().recipient)] },
    );
    expect(ObjectKeyError.isInstance(await refusal(locked))).toBe(true);
  });
});
