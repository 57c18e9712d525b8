/**
 * Hostile compacted objects (`wal/{g}/{start}-{end}.L{level}.{from}-{to}.seg`):
 * the hostile-bucket table's promise (refuse or report with a clear message
 * naming the key and the field, never crash, never write a byte into a
 * restore target it refuses, never touch what it may not) for the objects a
 * compaction writes. Every row starts from the compacted baseline of
 * `hostile/compacted.ts`: restore points 2–4 name the fine segments, 5 and 6
 * (LATEST) name the level-1 object of commits 1–4 in their place.
 *
 * What each command does, by kind of damage:
 * - A restore point that names a compacted object overlapping its
 *   neighbour, or a key whose level is not 1..9, does not parse: restore of
 *   the latest state falls back to the newest sound restore point (commit 6)
 *   and says so; `ls` and `verify` report it; the worker heals LATEST.
 * - An overlapping or malformed compacted object that no restore point
 *   names is passed over by everything (roll-forward follows fine segments
 *   only; `ls` counts one that reaches past the newest restore point as
 *   newer data, as it does any segment).
 * - A compacted object that is missing, does not decompress, decompresses
 *   to another length than its header says or than its key allows, or
 *   whose header disagrees with its key, entry or chain: restore and
 *   `verify --deep` refuse, naming the key and the field; the shallow
 *   `verify` (sizes only) and `ls` (manifests only) do not read it.
 * - A compacted object re-encoded with other frames, every CRC made to
 *   agree: only the fine segments it claims to cover can tell, and
 *   `verify --deep` compares it with them. Restore reads the objects its
 *   restore point names and nothing else, so it restores what is stored
 *   (a CRC-32 catches damage, not tampering) unless the forged body holds
 *   another number of commits than its entry.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { compactedSegmentKey, manifestKey } from '@x/manifest';
import { verify } from '@x/restore';
import { restoreFramedStore } from '@x/source-framed';
import { FsStore } from '@x/store';
import { readSegmentObjectHeader } from '@x/wal-segment';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { casePaths, copyCase, PREFIX } from './hostile/bucket.ts';
import {
  buildCompactedBaseline,
  COMPACTED,
  corruptedZstd,
  cutShort,
  FINE,
  forgeCompacted,
  framesOf,
  LATEST_MANIFEST,
  plantManifest,
  reencodedCompacted,
  wrongLength,
} from './hostile/compacted.ts';
import type { Planter } from './hostile/plant.ts';
import { describeHostileTable, passes, type Row, refuses } from './hostile/table.ts';

const M5 = manifestKey(PREFIX, 5);
const M7 = manifestKey(PREFIX, 7);
const M9 = manifestKey(PREFIX, 9);
/** The worker backs up (the helper's text says commit 5 whatever the baseline holds; LATEST's is commit 6). */
const RESUMES = passes('backed up commit');
const LS_FINE = passes('*       0..6', 'every commit (1 object)');
const SHALLOW_FINE = passes('verified 5 restore point(s) (sizes; add --deep for CRC-32)');
const NO_LEASE = { lease: passes('no lease'), acquire: passes('acquired generation 1') };
const BUCKET_FINE = {
  resume: RESUMES,
  restore: passes('restored commit 6'),
  ls: LS_FINE,
  verify: SHALLOW_FINE,
  deep: passes('verified 5 restore point(s) with CRC-32 checks'),
  ...NO_LEASE,
};

/**
 * LATEST names a restore point at `key` that does not parse (`problem`):
 * restore of the latest state falls back to commit 6 and the command says
 * why; ls and verify report it; the worker heals LATEST and backs up.
 */
const badRestorePoint = (key: string, problem: string) => ({
  resume: RESUMES,
  restore: passes('restored commit 6'),
  cliRestore: passes(
    `restored commit 6 from ${LATEST_MANIFEST}`,
    `warning: LATEST names ${key}, which is refused: does not parse: invalid manifest field ${problem}`,
  ),
  ls: passes(`PROBLEM: LATEST names ${key}, which is corrupt`, problem),
  verify: refuses(`LATEST names ${key}, which does not verify`, problem),
  ...NO_LEASE,
});

/**
 * An object LATEST's restore point names is refused when read: restore and
 * `verify --deep` say `says` (the key and the field); the shallow verify and
 * ls, which do not read it, pass.
 */
const badObject = (says: readonly string[], deepSays: readonly string[] = says) => ({
  resume: RESUMES,
  restore: refuses(...says),
  ls: LS_FINE,
  verify: SHALLOW_FINE,
  deep: refuses(`LATEST names ${LATEST_MANIFEST}, which does not verify`, ...deepSays),
  ...NO_LEASE,
});
/** The refusal of `key` naming `field`, then each fragment of what it says about it. */
const corrupt = (key: string, field: string, ...problem: string[]): string[] => [
  `object ${key} is corrupt: ${field}: ${problem[0] ?? ''}`,
  ...problem.slice(1),
];

/**
 * Only a comparison with the fine segments it covers tells: restore passes
 * (see the module comment), `verify --deep` refuses the restore points
 * naming it, saying `problem` after "it merged nothing away".
 */
const disagreesWithFine = (...problem: string[]) => ({
  ...BUCKET_FINE,
  deep: refuses(
    `${M5}: problems (commit 5)`,
    `${LATEST_MANIFEST}: problems (commit 6)`,
    ...corrupt(COMPACTED, 'body', 'it merged nothing away', ...problem),
    'so it must hold the fine segments it covers',
  ),
});

/** A copy of the compacted object under `key` (any key), and a restore point at 7 naming it in its place. */
const namedUnder =
  (key: string): Planter =>
  async (store) => {
    const object = await store.get(COMPACTED);
    await store.put(key, object!.body);
    await plantManifest(store, 7, (own) => [{ ...own[0]!, key }, ...own.slice(1)]);
  };

/** The header of the compacted object with `fields` changed, every CRC made to agree. */
const header = (fields: Parameters<typeof reencodedCompacted>[1]): Planter =>
  reencodedCompacted((decoded) => decoded, fields);

const OVERLAPPING = compactedSegmentKey(PREFIX, 0, 32, 80, 1, 2, 5);
/** Commits 5–7 (bytes 64..112): past the newest restore point's end (96). */
const PAST_THE_END = compactedSegmentKey(PREFIX, 0, 64, 112, 1, 4, 7);
/** A level-2 object of commits 1–5 (bytes 0..80), which the baseline never wrote. */
const LEVEL_2 = compactedSegmentKey(PREFIX, 0, 0, 80, 2, 0, 5);
const BAD_LEVELS = {
  L0: `${PREFIX}/wal/00000000000000000000/00000000000000000000-00000000000000000064.L0.00000000000000000000-00000000000000000004.seg`,
  L10: `${PREFIX}/wal/00000000000000000000/00000000000000000000-00000000000000000064.L10.00000000000000000000-00000000000000000004.seg`,
  none: `${PREFIX}/wal/00000000000000000000/00000000000000000000-00000000000000000064.00000000000000000000-00000000000000000004.seg`,
};
const notAKey = (index: number) => `segments[${index}].key: not a segment key of this layout`;

// biome-ignore format: one hostile case per line, its expectations beside it
const ROWS: Row[] = [
  // ── overlapping compacted ranges ──
  { name: 'a second compacted object overlapping the first, named right after it', plant: async (store) => { const forged = await forgeCompacted(store, OVERLAPPING, [FINE['32-48'], FINE['48-64'], FINE['64-80']]); await plantManifest(store, 9, (own) => [own[0]!, forged, own[2]!]); }, expect: badRestorePoint(M9, 'segments[1].key: its commit range starts at 2, not after the 4 commits before it') },
  { name: 'a compacted object whose bytes overlap the one before it, its commit range made to follow on', plant: async (store) => { const forged = await forgeCompacted(store, compactedSegmentKey(PREFIX, 0, 48, 96, 1, 4, 6), [FINE['48-64'], FINE['64-80'], FINE['80-96']]); await plantManifest(store, 7, (own) => [own[0]!, { ...forged, frames: 2 }]); }, expect: badRestorePoint(M7, 'segments[1].key: starts at byte 48, not where the previous segment ends (64)') },
  { name: 'a compacted object overlapping the named one, named by no restore point', plant: async (store) => { await forgeCompacted(store, OVERLAPPING, [FINE['32-48'], FINE['48-64'], FINE['64-80']]); }, retentionMayDelete: [OVERLAPPING], expect: BUCKET_FINE },
  { name: 'a compacted object overlapping the last fine segments and reaching past them, named by no restore point', plant: async (store) => { await forgeCompacted(store, PAST_THE_END, [FINE['64-80'], FINE['80-96']], (body) => new Uint8Array(Buffer.concat([body, framesOf('commit-7')]))); }, retentionMayDelete: [PAST_THE_END], expect: { ...BUCKET_FINE, cliRestore: passes('restored commit 6', 'warning: the backup holds 1 newer segment(s)', 'they are in no restore point and were not restored'), ls: passes('*       0..6', 'NEWER DATA: 1 newer segment(s)') } },
  // ── content that disagrees with the fine segments it covers ──
  { name: 'compacted object re-encoded with other frames (same length, every CRC agreeing)', plant: reencodedCompacted(() => framesOf('forged-1', 'forged-2', 'forged-3', 'forged-4')), expect: disagreesWithFine('(4 frames for 4 commits, 64 bytes for 64 of log)', 'decodes to 64 bytes with CRC-32') },
  { name: 'compacted object re-encoded with shorter frames (decodedLength below its range)', plant: reencodedCompacted(() => framesOf('c1', 'c2', 'c3', 'c4'), (_old, body) => ({ decodedLength: body.length })), expect: disagreesWithFine('(4 frames for 4 commits, 40 bytes for 64 of log)', 'decodes to 40 bytes with CRC-32', 'theirs to 64 bytes') },
  { name: 'compacted object re-encoded with two frames for its four commits', plant: reencodedCompacted(() => framesOf('commits-1-and-2-together', 'commits-3-and-4-together')), expect: badObject([`restore point ${LATEST_MANIFEST} refused: segment ${COMPACTED} holds 2 complete frames, the manifest records 4`], corrupt(COMPACTED, 'body', 'it merged nothing away (2 frames for 4 commits, 64 bytes for 64 of log)')) },
  { name: 'compacted object whose chain end is not the last fine segment it covers', plant: header((old) => ({ chainEndCrc32: (old.chainEndCrc32! ^ 1) >>> 0 })), expect: badObject(corrupt(FINE['64-80'], 'previousCrc32', 'the header says', 'the compacted object before it (its chain end) says'), [...corrupt(FINE['64-80'], 'previousCrc32', 'the header says', 'the compacted object before it (its chain end) says'), ...corrupt(COMPACTED, 'chainEndCrc32', 'the header says', `the fine segments it covers (${FINE['0-32']}, ${FINE['32-48']}, ${FINE['48-64']}) end with`)]) },
  { name: 'compacted object whose previous is not the snapshot', plant: header((old) => ({ previousCrc32: (old.previousCrc32 ^ 1) >>> 0 })), expect: badObject(corrupt(COMPACTED, 'previousCrc32', 'the header says', 'the previous object in the chain says')) },
  { name: 'compacted object whose header holds other commits than its entry', plant: header(() => ({ commits: 3 })), expect: badObject(corrupt(COMPACTED, 'commits', 'the header says 3, the manifest entry says 4')) },
  // ── a missing level ──
  { name: 'the compacted object LATEST’s restore point names is missing', plant: async (store) => { await store.delete(COMPACTED); }, expect: { ...badObject([`object ${COMPACTED} named by ${LATEST_MANIFEST} does not exist`], [`${M5}: problems (commit 5)`, `${COMPACTED} does not exist`]), verify: refuses(`${M5}: problems (commit 5)`, `${COMPACTED} does not exist`) } },
  { name: 'a restore point naming a level-2 object that was never written', plant: (store) => plantManifest(store, 6, (own) => [{ ...own[0]!, key: LEVEL_2, frames: 5 }, own[2]!]), expect: { resume: RESUMES, restore: refuses(`object ${LEVEL_2} named by ${LATEST_MANIFEST} does not exist`), ls: passes('*       0..6'), verify: refuses(`${LATEST_MANIFEST}: problems (commit 6)`, `${LEVEL_2} does not exist`), ...NO_LEASE } },
  { name: 'a restore point naming a compacted key of level 0', plant: namedUnder(BAD_LEVELS.L0), expect: badRestorePoint(M7, notAKey(0)) },
  { name: 'a restore point naming a compacted key of level 10', plant: namedUnder(BAD_LEVELS.L10), expect: badRestorePoint(M7, notAKey(0)) },
  { name: 'a restore point naming a compacted key without its level', plant: namedUnder(BAD_LEVELS.none), expect: badRestorePoint(M7, notAKey(0)) },
  { name: 'compacted objects of levels 0, 10 and none, named by no restore point', plant: async (store) => { const object = (await store.get(COMPACTED))!.body; for (const key of Object.values(BAD_LEVELS)) await store.put(key, object); }, expect: BUCKET_FINE },
  // ── compressed bodies ──
  { name: 'compacted object whose zstd body does not decompress', plant: corruptedZstd, expect: badObject(corrupt(COMPACTED, 'body', 'does not decode as zstd')) },
  { name: 'compacted object whose zstd body is cut short', plant: cutShort(2), expect: badObject(corrupt(COMPACTED, 'body', 'does not decode as zstd')) },
  { name: 'compacted object that decompresses to more than its decodedLength', plant: wrongLength((decoded) => new Uint8Array(Buffer.concat([decoded, decoded]))), expect: badObject(corrupt(COMPACTED, 'decodedLength', 'body decodes to more than decodedLength (64) bytes')) },
  { name: 'compacted object that decompresses to less than its decodedLength', plant: wrongLength((decoded) => decoded.subarray(0, 48)), expect: badObject(corrupt(COMPACTED, 'decodedLength', 'body decodes to 48 bytes, not decodedLength (64)')) },
  { name: 'compacted object whose decodedLength is more than end − start (body agreeing)', plant: reencodedCompacted(() => framesOf('commit-1-longer', 'commit-2-longer', 'commit-3-longer', 'commit-4-longer'), (_old, body) => ({ decodedLength: body.length })), expect: badObject(corrupt(COMPACTED, 'decodedLength', '92 is more than the log its key stands for (end − start = 64)')) },
  { name: 'compacted object whose header range is not its key’s', plant: header(() => ({ end: 80 })), expect: badObject(corrupt(COMPACTED, 'end', 'the header says 80, the key says 64')) },
];

describeHostileTable('hostile compacted object', ROWS, buildCompactedBaseline);

describe('a compacted object re-encoded with other frames', () => {
  let root: string;
  let baseline: string;
  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'backupd-compacted-forged-'));
    baseline = join(root, 'baseline');
    await buildCompactedBaseline(baseline);
  });
  afterAll(() => rm(root, { recursive: true, force: true }));

  it('passes every check restore makes and restores as stored; verify --deep names it', async () => {
    await copyCase(baseline, join(root, 'case'));
    const paths = casePaths(join(root, 'case'));
    const store = new FsStore({ root: paths.storeRoot, fsync: false });
    const before = (await store.get(COMPACTED))!.body;
    await reencodedCompacted(() => framesOf('forged-1', 'forged-2', 'forged-3', 'forged-4'))(
      store,
      paths,
    );
    const after = (await store.get(COMPACTED))!.body;
    // The plant took: another body behind a header that says the same range, commits and chain.
    expect(Buffer.from(after).equals(Buffer.from(before))).toBe(false);
    const { bodyCrc32: _before, headerBytes: _h, ...kept } = readSegmentObjectHeader(before);
    const { bodyCrc32: _after, headerBytes: _h2, ...now } = readSegmentObjectHeader(after);
    expect(now).toEqual(kept);

    const result = await restoreFramedStore(store, PREFIX, paths.target);
    expect(result.commitSeq).toBe(6);
    const wal = await readFile(join(paths.target, 'wal.bin'));
    expect(wal.includes(Buffer.from('forged-1'))).toBe(true);
    expect(wal.includes(Buffer.from('commit-1'))).toBe(false);

    const report = await verify(store, PREFIX, { deep: true });
    expect(report.ok).toBe(false);
    const problems = report.manifests.flatMap((manifest) =>
      manifest.problems.map((problem) => ({
        manifest: manifest.key,
        kind: problem.kind,
        key: problem.key,
      })),
    );
    expect(problems).toEqual([
      { manifest: M5, kind: 'object-encoding', key: COMPACTED },
      { manifest: LATEST_MANIFEST, kind: 'object-encoding', key: COMPACTED },
    ]);
  });
});
