import { crc32 } from 'node:zlib';
import {
  compactedSegmentKey,
  crc32Hex,
  latestKey,
  type Manifest,
  manifestKey,
  type SegmentEntry,
  segmentObjectKey,
  serializeManifest,
} from '@x/manifest';
import { MemoryStore } from '@x/store';
import { encodeFrame, encodeSegmentObject } from '@x/wal-segment';
import { describe, expect, it } from 'vitest';
import {
  compactedCoverProblem,
  type DecodedCompactedObject,
  type DecodedLogObject,
  FineSegmentIndex,
} from './compacted-cover.ts';
import { verify } from './verify.ts';

const PREFIX = 'p';
const LINEAGE = 'lineage-1';
const encoder = new TextEncoder();
const frame = (payload: string): Uint8Array => encodeFrame(encoder.encode(payload));

/** A fine `.seg` of generation 0 holding `commit-n` for each n of `commits`, starting at `start`. */
function fine(start: number, commits: number[], previousCrc32: number) {
  const body = new Uint8Array(Buffer.concat(commits.map((n) => frame(`commit-${n}`))));
  const stored = encodeSegmentObject(body, {
    codec: 'zstd',
    kind: 'segment',
    generation: 0,
    start,
    end: start + body.length,
    commits: commits.length,
    previousCrc32,
    lineage: LINEAGE,
  });
  return { key: segmentObjectKey(PREFIX, 0, start, start + body.length), stored, commits };
}

type Stored = ReturnType<typeof fine>;

const entryOf = (object: Stored): SegmentEntry => ({
  key: object.key,
  size: object.stored.length,
  crc32: crc32Hex(object.stored),
  frames: object.commits.length,
  lineage: LINEAGE,
});

/**
 * A bucket with three fine segments (commits 1, 2, 3), restore points 1 and
 * 2 naming the first ones, and restore point 3 naming a compacted object of
 * commits 1–2 (its body `body`, by default the two fine bodies
 * concatenated) and the third segment; `withFine: false` leaves out the fine
 * segments and the restore points naming them.
 */
async function bucket(options: { body?: Uint8Array; withFine?: boolean } = {}) {
  const store = new MemoryStore();
  const f1 = fine(0, [1], 0);
  const f2 = fine(16, [2], crc32(f1.stored));
  const f3 = fine(32, [3], crc32(f2.stored));
  const key = compactedSegmentKey(PREFIX, 0, 0, 32, 1, 0, 2);
  const body =
    options.body ?? new Uint8Array(Buffer.concat([frame('commit-1'), frame('commit-2')]));
  const stored = encodeSegmentObject(body, {
    codec: 'zstd',
    kind: 'compacted',
    generation: 0,
    start: 0,
    end: 32,
    commits: 2,
    previousCrc32: 0,
    lineage: LINEAGE,
    decodedLength: body.length,
    chainEndCrc32: crc32(f2.stored),
  });
  const compacted: Stored = { key, stored, commits: [1, 2] };
  const points = [[compacted, f3]];
  if (options.withFine !== false) points.unshift([f1], [f1, f2]);
  else await store.put(f3.key, f3.stored);
  for (const objects of points) {
    for (const object of objects) await store.put(object.key, object.stored);
    const commitSeq = objects.reduce((sum, object) => sum + object.commits.length, 0);
    const manifest: Manifest = {
      formatVersion: 1,
      lineage: LINEAGE,
      createdAt: '2026-12-01T00:00:00Z',
      commitSeq,
      oldestCommitSeq: 0,
      walGeneration: 0,
      files: [],
      segments: objects.map(entryOf),
    };
    await store.put(
      manifestKey(PREFIX, commitSeq),
      encoder.encode(serializeManifest(manifest, { prefix: PREFIX })),
    );
    await store.put(latestKey(PREFIX), encoder.encode(manifestKey(PREFIX, commitSeq)));
  }
  return { store, key };
}

/** The problems `verify --deep` reports, as manifest, kind, key and message. */
async function deepProblems(store: MemoryStore) {
  const report = await verify(store, PREFIX, { deep: true });
  return report.manifests.flatMap((manifest) =>
    manifest.problems.map((problem) => ({ manifest: manifest.key, ...problem })),
  );
}

describe('verify --deep compares a compacted object with the fine segments it covers', () => {
  it('passes one that holds their frames', async () => {
    const { store } = await bucket();
    expect(await deepProblems(store)).toEqual([]);
  });

  it('refuses one re-encoded with other frames of the same length, every CRC agreeing', async () => {
    const body = new Uint8Array(Buffer.concat([frame('forged-1'), frame('forged-2')]));
    const { store, key } = await bucket({ body });
    const problems = await deepProblems(store);
    expect(problems).toEqual([
      {
        manifest: manifestKey(PREFIX, 3),
        kind: 'object-encoding',
        key,
        message: expect.stringContaining(`object ${key} is corrupt: body: it merged nothing away`),
      },
    ]);
    expect(problems[0]!.message).toContain(
      `the fine segments it covers (${segmentObjectKey(PREFIX, 0, 0, 16)}, ${segmentObjectKey(PREFIX, 0, 16, 32)})`,
    );
  });

  it('refuses one with a frame per commit, shorter than the run', async () => {
    const body = new Uint8Array(Buffer.concat([frame('c1'), frame('c2')]));
    const { store, key } = await bucket({ body });
    expect(await deepProblems(store)).toMatchObject([
      {
        kind: 'object-encoding',
        key,
        message: expect.stringContaining('(2 frames for 2 commits, 20 bytes for 32 of log)'),
      },
    ]);
  });

  it('passes a merge that dropped bytes (one record for the run): its content is the engine’s', async () => {
    const { store } = await bucket({ body: frame('merged record of 2') });
    expect(await deepProblems(store)).toEqual([]);
  });

  it('compares nothing once the fine segments are gone', async () => {
    const body = new Uint8Array(Buffer.concat([frame('forged-1'), frame('forged-2')]));
    const { store } = await bucket({ body, withFine: false });
    expect(await deepProblems(store)).toEqual([]);
  });
});

describe('compactedCoverProblem', () => {
  const part = (
    start: number,
    end: number,
    fields: Partial<DecodedLogObject> = {},
  ): DecodedLogObject => ({
    key: `f${start}`,
    generation: 0,
    start,
    end,
    lineage: LINEAGE,
    commits: 1,
    storedCrc32: 0x100 + start,
    previousCrc32: start === 0 ? 7 : 0x100 + start - 16,
    bodyCrc32: 0,
    bodyLength: end - start,
    ...fields,
  });
  const compacted = (fields: Partial<DecodedCompactedObject> = {}): DecodedCompactedObject => ({
    key: 'c',
    generation: 0,
    start: 0,
    end: 32,
    lineage: LINEAGE,
    commits: 2,
    storedCrc32: 1,
    previousCrc32: 7,
    bodyCrc32: 0,
    bodyLength: 20,
    chainEndCrc32: 0x110,
    frames: 1,
    ...fields,
  });
  const index = (...parts: DecodedLogObject[]): FineSegmentIndex => {
    const built = new FineSegmentIndex();
    for (const p of parts) built.add(p);
    return built;
  };

  it('names the chain end when the run it covers ends elsewhere', () => {
    const problem = compactedCoverProblem(
      compacted({ chainEndCrc32: 0x999 }),
      index(part(0, 16), part(16, 32)),
    );
    expect(problem).toMatchObject({ key: 'c', field: 'chainEndCrc32' });
  });

  it('names the commits when the run holds another count', () => {
    const problem = compactedCoverProblem(
      compacted(),
      index(part(0, 16), part(16, 32, { commits: 2 })),
    );
    expect(problem).toMatchObject({ key: 'c', field: 'commits' });
    expect(problem?.problem).toBe(
      'the header says 2, the fine segments it covers (f0, f16) hold 3',
    );
  });

  it('finds no run (and compares nothing) across a broken link, another lineage or a fork', () => {
    const chainEnd = { chainEndCrc32: 0x999 };
    expect(
      compactedCoverProblem(
        compacted(chainEnd),
        index(part(0, 16), part(16, 32, { previousCrc32: 5 })),
      ),
    ).toBeUndefined();
    expect(
      compactedCoverProblem(
        compacted(chainEnd),
        index(part(0, 16, { lineage: 'other' }), part(16, 32)),
      ),
    ).toBeUndefined();
    expect(
      compactedCoverProblem(
        compacted(chainEnd),
        index(part(0, 16), part(0, 16, { key: 'g0' }), part(16, 32)),
      ),
    ).toBeUndefined();
  });
});
