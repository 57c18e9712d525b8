/**
 * The time search (restore-point-at-time.ts) over an encrypted generation
 * on a file-system store: a `.snap` snapshot and `.seg` segments of commit
 * records encrypted to two recipients, one chained segment past the
 * restore point. With an identity it answers as over plaintext; without
 * one it is `ObjectKeyError`; a segment of another encryption than its
 * generation's is refused as corrupt, or ends the roll-forward.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  type AgeRecipient,
  generateIdentity,
  parseIdentity,
  parseRecipient,
} from '@x/age-envelope';
import {
  crc32Hex,
  latestKey,
  type Manifest,
  manifestKey,
  type SegmentEntry,
  segmentObjectKey,
  serializeManifest,
  snapshotObjectKey,
} from '@x/manifest';
import { ObjectKeyError } from '@x/restore';
import { FsStore } from '@x/store';
import { encodeSegmentObject } from '@x/wal-segment';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { encodeCommitFrame } from '../src/commit-record.ts';
import { sqliteCommitAtTime } from '../src/restore-point-at-time.ts';
import { SqliteRestoreCorruptError } from '../src/sqlite-errors.ts';

const PREFIX = 'db/encrypted';
const LINEAGE = 'encrypted-lineage';
const GENERATION = 2;
const PAGE = 512;
/** Commits the snapshot holds, taken at t=1000. */
const BASE = 10;
const SNAPSHOT_TIME = 1_000;
/** Commit times of each segment: two named by the restore point, one chained after it. */
const SEGMENT_TIMES = [
  [1_100, 1_200],
  [1_300, 1_400],
  [1_500, 1_600],
];
const NAMED = 2;

function keyPair(source: string) {
  const { identity, recipient } = generateIdentity();
  return { identity: parseIdentity(identity, source), recipient: parseRecipient(recipient) };
}
const alice = keyPair('alice.txt line 1');
const bob = keyPair('bob.txt line 1');
const carol = keyPair('carol.txt line 1');

function records(times: readonly number[]): Uint8Array {
  const frames = times.map((commitTime, index) =>
    encodeCommitFrame({
      pageSize: PAGE,
      databasePages: 1,
      commitTime,
      walSalt1: 0,
      walSalt2: 0,
      commitFrame: index,
      pages: new Map([[1, new Uint8Array(PAGE).fill(index + 1)]]),
    }),
  );
  return new Uint8Array(Buffer.concat(frames));
}

let work: string;
let store: FsStore;

beforeEach(async () => {
  work = await mkdtemp(join(tmpdir(), 'encrypted-time-search-'));
  store = new FsStore({ root: join(work, 'bucket') });
});
afterEach(async () => {
  await rm(work, { recursive: true, force: true });
});

/** The generation, every object encrypted to `recipients` except segment `differing.at`. */
async function writeGeneration(
  recipients: readonly AgeRecipient[],
  differing?: { at: number; recipients: readonly AgeRecipient[] },
): Promise<string[]> {
  const snapshot = new Uint8Array(PAGE).fill(9);
  const snapshotKey = snapshotObjectKey(PREFIX, GENERATION, BASE);
  const storedSnapshot = encodeSegmentObject(
    snapshot,
    {
      codec: 'zstd',
      kind: 'snapshot',
      generation: GENERATION,
      start: 0,
      end: snapshot.byteLength,
      commits: BASE,
      previousCrc32: 0,
      lineage: LINEAGE,
    },
    { recipients },
  );
  await store.put(snapshotKey, storedSnapshot);
  let previous = crc32Hex(storedSnapshot);
  let start = 0;
  const segments: SegmentEntry[] = [];
  for (const [index, times] of SEGMENT_TIMES.entries()) {
    const log = records(times);
    const key = segmentObjectKey(PREFIX, GENERATION, start, start + log.byteLength);
    const stored = encodeSegmentObject(
      log,
      {
        codec: 'zstd',
        kind: 'segment',
        generation: GENERATION,
        start,
        end: start + log.byteLength,
        commits: times.length,
        previousCrc32: Number.parseInt(previous, 16),
        lineage: LINEAGE,
      },
      { recipients: differing?.at === index ? differing.recipients : recipients },
    );
    await store.put(key, stored);
    previous = crc32Hex(stored);
    segments.push({
      key,
      size: stored.byteLength,
      crc32: previous,
      frames: times.length,
      lineage: LINEAGE,
    });
    start += log.byteLength;
  }
  const named = segments.slice(0, NAMED);
  const iso = (ms: number) => new Date(ms).toISOString();
  const manifest: Manifest = {
    formatVersion: 2,
    lineage: LINEAGE,
    createdAt: iso(1_400),
    commitSeq: BASE + NAMED * 2,
    oldestCommitSeq: 0,
    walGeneration: GENERATION,
    snapshotTime: iso(SNAPSHOT_TIME),
    commitTime: iso(1_400),
    files: [
      {
        name: 'sqlite.snapshot',
        key: snapshotKey,
        size: storedSnapshot.byteLength,
        crc32: crc32Hex(storedSnapshot),
        frames: BASE,
        lineage: LINEAGE,
      },
    ],
    segments: named,
  };
  const key = manifestKey(PREFIX, manifest.commitSeq);
  await store.put(key, new TextEncoder().encode(serializeManifest(manifest, { prefix: PREFIX })));
  await store.put(latestKey(PREFIX), new TextEncoder().encode(key));
  return segments.map((segment) => segment.key);
}

describe('restore by time over encrypted segments', () => {
  it('answers with an identity of one of the recipients, the chained segment included', async () => {
    await writeGeneration([alice.recipient, bob.recipient]);
    const at = async (time: number) => {
      const found = await sqliteCommitAtTime(store, PREFIX, time, { identities: [bob.identity] });
      return found === null
        ? null
        : { commitSeq: found.commitSeq, commitTime: found.commitTime, target: found.target };
    };
    expect(await at(999)).toBeNull();
    expect((await at(1_050))?.commitSeq).toBe(BASE);
    expect(await at(1_250)).toMatchObject({ commitSeq: BASE + 2, commitTime: 1_200 });
    // Past the restore point: a commit of the chained segment, restored rolling forward.
    expect(await at(1_550)).toMatchObject({
      commitSeq: BASE + 5,
      commitTime: 1_500,
      target: { rollForward: true },
    });
  });

  it('without an identity, or with a wrong one, is ObjectKeyError naming the segment and its recipients', async () => {
    const keys = await writeGeneration([alice.recipient, bob.recipient]);
    // Met in the roll-forward, then (the chained segment gone) in the restore point's own log.
    for (const identities of [undefined, [carol.identity], 'chained segment gone'] as const) {
      if (identities === 'chained segment gone') await store.delete(keys[2]!);
      const error = await sqliteCommitAtTime(
        store,
        PREFIX,
        1_250,
        typeof identities === 'object' ? { identities } : {},
      ).catch((caught: unknown) => caught);
      expect(ObjectKeyError.isInstance(error), String(error)).toBe(true);
      const refused = error as ObjectKeyError;
      expect(refused.recipients).toEqual([alice.recipient.text, bob.recipient.text].sort());
      const key = identities === 'chained segment gone' ? keys[0] : keys[2];
      expect(refused.objects.map((object) => object.key)).toEqual([key]);
      expect(refused.message).toContain(key);
      if (typeof identities === 'object') expect(refused.message).toContain('carol.txt line 1');
      expect(refused.message).not.toMatch(/AGE-SECRET-KEY/i);
    }
  });

  it('refuses a named segment encrypted to another recipient set than its generation', async () => {
    const keys = await writeGeneration([alice.recipient], {
      at: 1,
      recipients: [alice.recipient, carol.recipient],
    });
    const error = await sqliteCommitAtTime(store, PREFIX, 1_450, {
      identities: [alice.identity],
    }).catch((caught: unknown) => caught);
    expect(SqliteRestoreCorruptError.isInstance(error), String(error)).toBe(true);
    expect((error as SqliteRestoreCorruptError).path).toBe(keys[1]);
    expect((error as Error).message).toContain('encryption: ');
  });

  it('stops rolling forward at a chained plaintext segment: its commits are not answers', async () => {
    await writeGeneration([alice.recipient], { at: 2, recipients: [] });
    const found = await sqliteCommitAtTime(store, PREFIX, 1_550, { identities: [alice.identity] });
    expect(found).toMatchObject({ commitSeq: BASE + 4, commitTime: 1_400 });
    expect(found?.target.rollForward).toBeUndefined();
  });
});
