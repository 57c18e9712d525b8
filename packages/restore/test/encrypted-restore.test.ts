/**
 * Restores of encrypted restore points on a real file-system store: the
 * right identity (one of several recipients, one of several identities)
 * restores exactly; a missing or wrong one is `ObjectKeyError` naming every
 * object and its recipients, before anything is written; a tampered body or
 * an object of another encryption than its generation's is refused naming
 * the key, with the target left exactly as it was.
 */
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AgeIdentity } from '@x/age-envelope';
import { crc32Hex, segmentKey } from '@x/manifest';
import { FsStore } from '@x/store';
import { encodeSegmentObject, readSegmentObjectHeader } from '@x/wal-segment';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { restore } from '../src/restore.ts';
import {
  ObjectCorruptError,
  ObjectEncodingError,
  ObjectKeyError,
  RestoreError,
  RestoreOptionsError,
} from '../src/restore-errors.ts';
import { planRestore } from '../src/restore-plan.ts';
import {
  ageChunkBoundaries,
  GENERATION,
  keyPair,
  LINEAGE,
  materializer,
  PREFIX,
  putManifest,
  replaceObject,
  SNAPSHOT_COMMITS,
  treeOf,
  type WrittenRestorePoint,
  writeRestorePoint,
} from './encrypted-fixture.ts';

const alice = keyPair('alice.txt line 1');
const bob = keyPair('bob.txt line 1');
const carol = keyPair('carol.txt line 3');

let work: string;
let store: FsStore;
let target: string;

beforeEach(async () => {
  work = await mkdtemp(join(tmpdir(), 'encrypted-restore-'));
  store = new FsStore({ root: join(work, 'bucket') });
  target = join(work, 'target');
});
afterEach(async () => {
  await rm(work, { recursive: true, force: true });
});

/** The log the named segments of `written` hold, then `rolled` more. */
function logOf(written: WrittenRestorePoint, rolled = 0): Buffer {
  const count = written.manifest.segments.length + rolled;
  return Buffer.concat(written.segments.slice(0, count).map((segment) => segment.log));
}

async function expectRestored(written: WrittenRestorePoint, rolled = 0): Promise<void> {
  expect(Buffer.compare(await readFile(join(target, 'snapshot.bin')), written.snapshot)).toBe(0);
  expect(Buffer.compare(await readFile(join(target, 'wal.bin')), logOf(written, rolled))).toBe(0);
}

/** A target holding an earlier restore's files, restored over with `force`. */
async function occupiedTarget(): Promise<Map<string, string> | null> {
  await mkdir(target);
  await writeFile(join(target, 'snapshot.bin'), 'the snapshot restored yesterday');
  await writeFile(join(target, 'wal.bin'), 'its log');
  await writeFile(join(target, 'backup.parent'), '{"manifestKey":"yesterday"}\n');
  return treeOf(target);
}

/** What a forced restore with `identities` rejects with; the target must be as it was. */
async function refusal(identities?: readonly AgeIdentity[]): Promise<unknown> {
  const before = await occupiedTarget();
  const error = await restore(store, PREFIX, target, {
    materializer,
    force: true,
    ...(identities === undefined ? {} : { identities }),
  }).catch((caught: unknown) => caught);
  expect(await treeOf(target)).toEqual(before);
  return error;
}

function expectNoSecret(error: unknown): void {
  const texts = [String(error), JSON.stringify(error), (error as Error).stack ?? ''];
  for (const text of texts) expect(text).not.toMatch(/AGE-SECRET-KEY/i);
}

describe('restore of an encrypted restore point', () => {
  it('restores exactly with the identity of one of two recipients', async () => {
    const written = await writeRestorePoint(store, {
      recipients: [alice.recipient, bob.recipient],
      named: 3,
    });
    for (const key of [alice, bob]) {
      await rm(target, { recursive: true, force: true });
      const result = await restore(store, PREFIX, target, {
        materializer,
        identities: [key.identity],
      });
      expect(result.commitSeq).toBe(written.manifest.commitSeq);
      await expectRestored(written);
    }
  });

  it('restores when only the second of several identities given is a recipient', async () => {
    const written = await writeRestorePoint(store, { recipients: [bob.recipient], named: 2 });
    await restore(store, PREFIX, target, {
      materializer,
      identities: [carol.identity, bob.identity],
    });
    await expectRestored(written);
  });

  it('keeps restoring plaintext restore points, identities given or not', async () => {
    const written = await writeRestorePoint(store, { recipients: [], named: 2 });
    await restore(store, PREFIX, target, { materializer });
    await expectRestored(written);
    await rm(target, { recursive: true });
    await restore(store, PREFIX, target, { materializer, identities: [alice.identity] });
    await expectRestored(written);
  });

  for (const [name, identities] of [
    ['no identity', undefined],
    ['an empty list', []],
    ['a wrong identity', [carol.identity]],
  ] as const) {
    it(`with ${name}: ObjectKeyError naming every object and its recipients, the target untouched`, async () => {
      const written = await writeRestorePoint(store, {
        recipients: [alice.recipient, bob.recipient],
        named: 3,
      });
      const error = await refusal(identities);
      expect(ObjectKeyError.isInstance(error), String(error)).toBe(true);
      expect(RestoreError.isInstance(error)).toBe(true);
      const refused = error as ObjectKeyError;
      expect(refused.code).toBe('RESTORE_KEY_MISSING');
      const keys = [written.snapshotKey, ...written.manifest.segments.map((s) => s.key)];
      expect(refused.objects.map((object) => object.key).sort()).toEqual([...keys].sort());
      const recipients = [alice.recipient.text, bob.recipient.text].sort();
      expect(refused.recipients).toEqual(recipients);
      for (const key of keys) expect(refused.message).toContain(key);
      for (const recipient of recipients) expect(refused.message).toContain(recipient);
      if (identities?.length) {
        expect(refused.identities).toEqual([
          { source: 'carol.txt line 3', recipient: carol.recipient.text },
        ]);
        expect(refused.message).toContain('carol.txt line 3');
      } else expect(refused.message).toContain('no age identity was given');
      expectNoSecret(error);
    });
  }

  it('refuses a missing key before reading any body: only headers are read', async () => {
    const written = await writeRestorePoint(store, { recipients: [alice.recipient], named: 2 });
    const streamed: string[] = [];
    const counting = new Proxy(store, {
      get(target, property, receiver) {
        if (property === 'getStream')
          return (key: string, options?: { signal?: AbortSignal }) => {
            streamed.push(key);
            return target.getStream(key, options);
          };
        return Reflect.get(target, property, receiver);
      },
    });
    const error = await restore(counting, PREFIX, target, { materializer }).catch((e) => e);
    expect(ObjectKeyError.isInstance(error)).toBe(true);
    // One header read per object (the snapshot's, then the others'), no download.
    const objects = streamed.filter((key) => /\.(snap|seg)$/.test(key));
    expect(objects.sort()).toEqual(
      [written.snapshotKey, ...written.manifest.segments.map((s) => s.key)].sort(),
    );
    expect(await treeOf(target)).toBeNull();
  });

  it('refuses identities that are not age identities, naming the option', async () => {
    await writeRestorePoint(store, { recipients: [alice.recipient], named: 1 });
    for (const identities of ['AGE-SECRET-KEY-1', [{}], [alice.recipient]]) {
      const error = await restore(store, PREFIX, target, {
        materializer,
        identities: identities as never,
      }).catch((caught: unknown) => caught);
      expect(RestoreOptionsError.isInstance(error), String(error)).toBe(true);
      expect(error).toMatchObject({ option: 'identities' });
      expectNoSecret(error);
    }
    expect(await treeOf(target)).toBeNull();
  });

  it('planRestore needs the key too, and plans with it', async () => {
    await writeRestorePoint(store, { recipients: [alice.recipient], named: 1 });
    const refused = await planRestore(store, PREFIX, { materializer }).catch((e) => e);
    expect(ObjectKeyError.isInstance(refused)).toBe(true);
    const plan = await planRestore(store, PREFIX, { materializer, identities: [alice.identity] });
    expect(plan.objects).toHaveLength(2);
  });
});

describe('hostile encrypted objects: refused naming the key, the target as it was', () => {
  const identities = [alice.identity];

  async function expectBody(error: unknown, key: string): Promise<void> {
    expect(ObjectEncodingError.isInstance(error), String(error)).toBe(true);
    expect(ObjectCorruptError.isInstance(error)).toBe(true);
    expect(error).toMatchObject({ key, field: 'body' });
    expect((error as Error).message).toContain(key);
    expectNoSecret(error);
  }

  it('a segment body moved under another segment header (swapped between two objects)', async () => {
    const written = await writeRestorePoint(store, { recipients: [alice.recipient], named: 3 });
    const [, other, last] = written.manifest.segments;
    const lastStored = (await store.get(last!.key))!.body;
    const otherStored = (await store.get(other!.key))!.body;
    const swapped = new Uint8Array(
      Buffer.concat([
        lastStored.subarray(0, readSegmentObjectHeader(lastStored).headerBytes),
        otherStored.subarray(readSegmentObjectHeader(otherStored).headerBytes),
      ]),
    );
    await replaceObject(store, written, last!.key, swapped);
    const error = await refusal(identities);
    await expectBody(error, last!.key);
    expect((error as Error).message).toContain('another header');
  });

  it('a snapshot body moved under another snapshot header', async () => {
    const written = await writeRestorePoint(store, { recipients: [alice.recipient], named: 1 });
    const stored = (await store.get(written.snapshotKey))!.body;
    // Another generation's snapshot of the same length: only the binding tells them apart.
    const other = encodeSegmentObject(
      new Uint8Array(written.snapshot.byteLength).fill(7),
      {
        codec: 'zstd',
        kind: 'snapshot',
        generation: GENERATION + 1,
        start: 0,
        end: written.snapshot.byteLength,
        commits: SNAPSHOT_COMMITS,
        previousCrc32: 0,
        lineage: LINEAGE,
      },
      { recipients: [alice.recipient] },
    );
    const swapped = new Uint8Array(
      Buffer.concat([
        stored.subarray(0, readSegmentObjectHeader(stored).headerBytes),
        other.subarray(readSegmentObjectHeader(other).headerBytes),
      ]),
    );
    await replaceObject(store, written, written.snapshotKey, swapped);
    const error = await refusal(identities);
    await expectBody(error, written.snapshotKey);
    expect((error as Error).message).toContain('another header');
  });

  it('a snapshot replaced by another whose header is the same: the chain refuses it', async () => {
    // Same key, length and recipients give byte-equal headers (an encrypted
    // header states no CRC): the next segment names the stored CRC-32 it follows.
    const first = await writeRestorePoint(store, { recipients: [alice.recipient], named: 1 });
    const firstStored = (await store.get(first.snapshotKey))!.body;
    const second = await writeRestorePoint(store, { recipients: [alice.recipient], named: 1 });
    await replaceObject(store, second, second.snapshotKey, firstStored);
    const error = await refusal(identities);
    expect(ObjectEncodingError.isInstance(error), String(error)).toBe(true);
    expect(error).toMatchObject({
      key: second.manifest.segments[0]!.key,
      field: 'previousCrc32',
    });
  });

  it('a snapshot cut at every 64 KiB chunk boundary (streamed)', async () => {
    const written = await writeRestorePoint(store, {
      recipients: [alice.recipient],
      named: 1,
      snapshotBytes: 300_000,
    });
    const stored = (await store.get(written.snapshotKey))!.body;
    const { payload, chunkEnds } = ageChunkBoundaries(stored);
    expect(chunkEnds.length).toBeGreaterThanOrEqual(4);
    for (const cut of [payload, ...chunkEnds]) {
      await replaceObject(store, written, written.snapshotKey, stored.slice(0, cut));
      await rm(target, { recursive: true, force: true });
      await expectBody(await refusal(identities), written.snapshotKey);
    }
  });

  it('a segment cut at every 64 KiB chunk boundary (decoded whole)', async () => {
    const written = await writeRestorePoint(store, {
      recipients: [alice.recipient],
      named: 2,
      framesPerSegment: 4,
      frameBytes: 60_000,
    });
    const last = written.manifest.segments.at(-1)!;
    const stored = (await store.get(last.key))!.body;
    const { payload, chunkEnds } = ageChunkBoundaries(stored);
    expect(chunkEnds.length).toBeGreaterThanOrEqual(3);
    for (const cut of [payload, ...chunkEnds]) {
      await replaceObject(store, written, last.key, stored.slice(0, cut));
      await rm(target, { recursive: true, force: true });
      await expectBody(await refusal(identities), last.key);
    }
  });

  it('a changed byte of an encrypted body, and an altered age header', async () => {
    const written = await writeRestorePoint(store, { recipients: [alice.recipient], named: 2 });
    const last = written.manifest.segments.at(-1)!;
    const stored = (await store.get(last.key))!.body;
    const { payload } = ageChunkBoundaries(stored);
    const changed = Uint8Array.from(stored);
    changed[payload + 100]! ^= 1;
    await replaceObject(store, written, last.key, changed);
    await expectBody(await refusal(identities), last.key);

    // A byte of the age header's recipient stanza: the file key no longer opens.
    const stanza = Buffer.from(stored).indexOf('-> X25519 ') + 12;
    const altered = Uint8Array.from(stored);
    altered[stanza] = altered[stanza] === 0x41 ? 0x42 : 0x41;
    await replaceObject(store, written, last.key, altered);
    await rm(target, { recursive: true, force: true });
    await expectBody(await refusal(identities), last.key);
  });
});

describe('one generation, one encryption', () => {
  async function expectEncryptionRefused(error: unknown, key: string): Promise<void> {
    expect(ObjectEncodingError.isInstance(error), String(error)).toBe(true);
    expect(error).toMatchObject({ key, field: 'encryption' });
    expect((error as Error).message).toContain(key);
  }

  it('refuses a plaintext segment in an encrypted generation', async () => {
    const written = await writeRestorePoint(store, {
      recipients: [alice.recipient],
      differing: { at: 1, recipients: [] },
      named: 3,
    });
    const error = await refusal([alice.identity]);
    await expectEncryptionRefused(error, written.manifest.segments[1]!.key);
    expect((error as Error).message).toContain('not encrypted');
  });

  it('refuses a raw .segment in an encrypted generation before downloading anything', async () => {
    const written = await writeRestorePoint(store, { recipients: [alice.recipient], named: 2 });
    const [first, second] = written.segments;
    const raw = second!.log;
    const range = second!.entry.key.match(/(\d+)-(\d+)\.seg$/)!;
    const rawKey = segmentKey(PREFIX, 3, Number(range[1]), Number(range[2]));
    await store.put(rawKey, raw);
    await putManifest(store, {
      ...written.manifest,
      segments: [
        first!.entry,
        { ...second!.entry, key: rawKey, size: raw.byteLength, crc32: crc32Hex(raw) },
      ],
    });
    await expectEncryptionRefused(await refusal([alice.identity]), rawKey);
  });

  it('refuses an encrypted segment in a plaintext generation, even one the identities open', async () => {
    const written = await writeRestorePoint(store, {
      recipients: [],
      differing: { at: 0, recipients: [alice.recipient] },
      named: 2,
    });
    const error = await refusal([alice.identity]);
    await expectEncryptionRefused(error, written.manifest.segments[0]!.key);
  });

  it('refuses a segment encrypted to another recipient set mid-generation', async () => {
    const written = await writeRestorePoint(store, {
      recipients: [alice.recipient, bob.recipient],
      differing: { at: 2, recipients: [alice.recipient, carol.recipient] },
      named: 3,
    });
    const error = await refusal([alice.identity]);
    await expectEncryptionRefused(error, written.manifest.segments[2]!.key);
    expect((error as Error).message).toContain(carol.recipient.text);
  });

  it('an identity that opens the snapshot opens its generation: the recipients order does not matter', async () => {
    const written = await writeRestorePoint(store, {
      recipients: [alice.recipient, bob.recipient],
      differing: { at: 1, recipients: [bob.recipient, alice.recipient] },
      named: 2,
    });
    await restore(store, PREFIX, target, { materializer, identities: [bob.identity] });
    await expectRestored(written);
  });
});
