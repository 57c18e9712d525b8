import { FakeClock } from '@x/lease';
import {
  archiveKey,
  type FileEntry,
  type Manifest,
  manifestKey,
  segmentKey,
  sideKey,
  snapshotKey,
} from '@x/manifest';
import { describe, expect, it } from 'vitest';
import { BackupError } from './errors.ts';
import {
  exactWindowSplit,
  type ListedManifest,
  planDeletions,
  retentionPolicy,
  retentionRuns,
  retiringGenerations,
  selectManifests,
} from './retention-plan.ts';
import { DEFAULT_EXACT_WINDOW_MS, DEFAULT_RETAIN_FOR_MS } from './worker-options.ts';

const P = 'db';
const OURS = 'lineage-a';

function file(name: string, key: string, lineage = OURS): FileEntry {
  return { name, key, size: 1, crc32: '00000000', frames: 0, lineage };
}

/** A restore point of generation `g` at `commitSeq`: snapshot, one archive, one side file, segments. */
function restorePoint(
  g: number,
  commitSeq: number,
  options: {
    lineage?: string;
    side?: string;
    segments?: [number, number][];
    createdAt?: string;
  } = {},
): ListedManifest {
  const lineage = options.lineage ?? OURS;
  const manifest: Manifest = {
    formatVersion: 1,
    lineage,
    createdAt: options.createdAt ?? '2026-01-01T00:00:00.000Z',
    commitSeq,
    oldestCommitSeq: 0,
    walGeneration: g,
    files: [
      file('snapshot.bin', snapshotKey(P, g, 0), lineage),
      file('wal.00000000000000000001.archive', archiveKey(P, g, 1), lineage),
      file('roles.json', sideKey(P, 'roles.json', options.side ?? 'aaaaaaaa', 1), lineage),
    ],
    segments: (options.segments ?? [[0, 10]]).map(([start, end]) => ({
      key: segmentKey(P, g, start, end),
      size: end - start,
      crc32: '00000000',
      frames: 1,
      lineage,
    })),
  };
  return { key: manifestKey(P, commitSeq), manifest };
}

function select(manifests: ListedManifest[], retain: number, latestTarget?: string) {
  return selectManifests({
    manifests,
    lineage: OURS,
    retain,
    justWritten: manifests.at(-1)!.key,
    latestTarget: latestTarget ?? manifests.at(-1)!.key,
  });
}

describe('selectManifests', () => {
  it('keeps the newest `retain` of this lineage and drops the older ones, oldest first', () => {
    const all = [restorePoint(0, 1), restorePoint(0, 2), restorePoint(1, 3), restorePoint(1, 4)];
    const selection = select(all, 2);
    expect(selection.kept.map((m) => m.key)).toEqual([all[2]!.key, all[3]!.key]);
    expect(selection.dropped.map((m) => m.key)).toEqual([all[0]!.key, all[1]!.key]);
    expect(selection.restorePoints).toBe(2);
    expect(selection.doubt).toBe(false);
  });

  it("always keeps LATEST's target, even when it is older than the newest `retain`", () => {
    const all = [restorePoint(0, 1), restorePoint(0, 2), restorePoint(1, 3)];
    const selection = select(all, 1, all[0]!.key);
    expect(selection.kept.map((m) => m.key)).toEqual([all[0]!.key, all[2]!.key]);
    expect(selection.dropped.map((m) => m.key)).toEqual([all[1]!.key]);
  });

  it("neither counts nor drops another lineage's manifests, and protects what they name", () => {
    const foreign = restorePoint(7, 1, { lineage: 'lineage-b' });
    const all = [foreign, restorePoint(0, 2), restorePoint(0, 3)];
    const selection = select(all, 1);
    expect(selection.dropped.map((m) => m.key)).toEqual([all[1]!.key]);
    expect(selection.restorePoints).toBe(1);
    expect(selection.foreign.has(snapshotKey(P, 7, 0))).toBe(true);
  });

  // Four restore points, the last newest by key; `retain: 1` keeps it, and
  // the rule under test must keep the two it names besides.
  it.each([
    {
      rule: 'keeps the manifest just written when a newer one by key is there and LATEST names another',
      justWritten: 1,
      latestTarget: 0,
      kept: [0, 1, 3],
      dropped: [2],
    },
    {
      rule: "keeps LATEST's target when it is neither the newest nor the one just written",
      justWritten: 2,
      latestTarget: 1,
      kept: [1, 2, 3],
      dropped: [0],
    },
  ])('$rule', ({ justWritten, latestTarget, kept, dropped }) => {
    const all = [restorePoint(0, 1), restorePoint(0, 2), restorePoint(0, 3), restorePoint(0, 100)];
    const selection = selectManifests({
      manifests: all,
      lineage: OURS,
      retain: 1,
      justWritten: all[justWritten]!.key,
      latestTarget: all[latestTarget]!.key,
    });
    expect(selection.kept.map((m) => m.key)).toEqual(kept.map((index) => all[index]!.key));
    expect(selection.dropped.map((m) => m.key)).toEqual(dropped.map((index) => all[index]!.key));
  });

  it('turns doubtful when a manifest does not parse, and still names the surplus to drop', () => {
    const all: ListedManifest[] = [
      restorePoint(0, 1),
      { key: manifestKey(P, 2), manifest: null },
      restorePoint(1, 3),
      restorePoint(2, 4),
    ];
    const selection = select(all, 2);
    expect(selection.doubt).toBe(true);
    expect(selection.dropped.map((m) => m.key)).toEqual([all[0]!.key]);
    expect(selection.kept.map((m) => m.key)).toEqual([all[2]!.key, all[3]!.key]);
  });

  it('turns doubtful when a manifest does not parse, and drops nothing when under the limit', () => {
    const all: ListedManifest[] = [{ key: manifestKey(P, 1), manifest: null }, restorePoint(0, 2)];
    const selection = select(all, 5);
    expect(selection.doubt).toBe(true);
    expect(selection.dropped).toEqual([]);
    expect(selection.restorePoints).toBe(1);
  });
});

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;

/**
 * Restore points of generation 0 at commits 1, 2, …, created at the given
 * minutes after the clock's start; a string is taken as `createdAt` itself.
 */
function timeline(clock: FakeClock, minutes: (number | string)[]): ListedManifest[] {
  const start = clock.wallNow();
  return minutes.map((at, index) =>
    restorePoint(0, index + 1, {
      createdAt: typeof at === 'string' ? at : new Date(start + at * MINUTE).toISOString(),
    }),
  );
}

function selectByTime(
  manifests: ListedManifest[],
  clock: FakeClock,
  retainFor: number,
  retain?: number,
) {
  return selectManifests({
    manifests,
    lineage: OURS,
    retainFor,
    ...(retain === undefined ? {} : { retain }),
    wallNow: clock.wallNow(),
    justWritten: manifests.at(-1)!.key,
    latestTarget: manifests.at(-1)!.key,
  });
}

const keys = (entries: readonly { key: string }[]) => entries.map((m) => m.key);

describe('selectManifests by time', () => {
  it('keeps those created inside the window and the newest one before it, drops the older', () => {
    const clock = new FakeClock({ wallMs: Date.parse('2026-03-01T00:00:00.000Z') });
    // Every 20 minutes over 3 hours; at 180 minutes the window of 1 h starts at 120.
    const all = timeline(clock, [0, 20, 40, 60, 80, 100, 119, 121, 140, 160, 180]);
    clock.advance(180 * MINUTE);
    const selection = selectByTime(all, clock, HOUR);
    // 119 is the newest before the window's start: it holds the commits there.
    expect(keys(selection.kept)).toEqual(keys(all.slice(6)));
    expect(keys(selection.dropped)).toEqual(keys(all.slice(0, 6)));
    expect(selection.restorePoints).toBe(5);
    expect(selection.doubt).toBe(false);
  });

  it('keeps a restore point created exactly at the window start, and the one before it', () => {
    const clock = new FakeClock({ wallMs: Date.parse('2026-03-01T00:00:00.000Z') });
    const all = timeline(clock, [0, 30, 60, 90, 120]);
    clock.advance(120 * MINUTE);
    expect(keys(selectByTime(all, clock, HOUR).kept)).toEqual(keys(all.slice(1)));
  });

  it('moves with the clock: the same restore points, later, keep fewer', () => {
    const clock = new FakeClock({ wallMs: Date.parse('2026-03-01T00:00:00.000Z') });
    const all = timeline(clock, [0, 30, 60, 90, 120]);
    clock.advance(120 * MINUTE);
    expect(selectByTime(all, clock, 2 * HOUR).dropped).toEqual([]);
    clock.advance(45 * MINUTE);
    expect(keys(selectByTime(all, clock, 2 * HOUR).dropped)).toEqual(keys(all.slice(0, 1)));
  });

  it('keeps the newest restore point when every one is older than the window', () => {
    const clock = new FakeClock({ wallMs: Date.parse('2026-03-01T00:00:00.000Z') });
    const all = timeline(clock, [0, 10, 20]);
    clock.advance(48 * HOUR);
    const selection = selectByTime(all, clock, HOUR);
    expect(keys(selection.kept)).toEqual(keys(all.slice(2)));
    expect(keys(selection.dropped)).toEqual(keys(all.slice(0, 2)));
  });

  it('counts a createdAt that does not read as a time as inside the window', () => {
    const clock = new FakeClock({ wallMs: Date.parse('2026-03-01T00:00:00.000Z') });
    // A leap second passes the manifest's own RFC 3339 check but is no Date.
    const all = timeline(clock, [0, 10, '2026-02-28T23:59:60Z', 30, 240]);
    clock.advance(240 * MINUTE);
    const selection = selectByTime(all, clock, HOUR);
    expect(keys(selection.kept)).toEqual(keys(all.slice(1)));
    expect(keys(selection.dropped)).toEqual(keys(all.slice(0, 1)));
  });

  it('counts a createdAt ahead of the clock as inside the window', () => {
    const clock = new FakeClock({ wallMs: Date.parse('2026-03-01T00:00:00.000Z') });
    // The third was written by a host whose clock ran a day ahead.
    const all = timeline(clock, [0, 10, 24 * 60 + 20, 30, 240]);
    clock.advance(240 * MINUTE);
    const selection = selectByTime(all, clock, HOUR);
    expect(keys(selection.kept)).toEqual(keys(all.slice(1)));
    expect(keys(selection.dropped)).toEqual(keys(all.slice(0, 1)));
  });

  it('keeps, with a count too, what either keeps', () => {
    const clock = new FakeClock({ wallMs: Date.parse('2026-03-01T00:00:00.000Z') });
    const all = timeline(clock, [0, 20, 40, 60, 80, 100, 119, 121, 140, 160, 180]);
    clock.advance(180 * MINUTE);
    // The window keeps the newest 5; a count of 8 keeps more.
    expect(keys(selectByTime(all, clock, HOUR, 8).kept)).toEqual(keys(all.slice(3)));
    // A count of 2 keeps fewer: the window's 5 are kept.
    expect(keys(selectByTime(all, clock, HOUR, 2).kept)).toEqual(keys(all.slice(6)));
  });

  it("still keeps LATEST's target outside the window, and ignores another lineage's createdAt", () => {
    const clock = new FakeClock({ wallMs: Date.parse('2026-03-01T00:00:00.000Z') });
    const all = timeline(clock, [0, 10, 20, 200, 240]);
    const foreign = restorePoint(7, 100, { lineage: 'lineage-b', createdAt: 'not a time' });
    clock.advance(240 * MINUTE);
    const selection = selectManifests({
      manifests: [...all, foreign],
      lineage: OURS,
      retainFor: HOUR,
      wallNow: clock.wallNow(),
      justWritten: all[4]!.key,
      latestTarget: all[0]!.key,
    });
    expect(keys(selection.kept)).toEqual(keys([all[0]!, all[2]!, all[3]!, all[4]!]));
    expect(keys(selection.dropped)).toEqual(keys(all.slice(1, 2)));
  });

  it('keeps everything without a clock reading, or with neither rule', () => {
    const all = [restorePoint(0, 1), restorePoint(0, 2), restorePoint(0, 3)];
    const common = { manifests: all, lineage: OURS, justWritten: all[2]!.key, latestTarget: null };
    expect(selectManifests({ ...common, retainFor: HOUR }).dropped).toEqual([]);
    expect(selectManifests({ ...common }).dropped).toEqual([]);
  });
});

describe('retentionPolicy', () => {
  it('is the 24 h window when neither option is given, else what was given (both: both)', () => {
    expect(DEFAULT_RETAIN_FOR_MS).toBe(24 * HOUR);
    const always = {
      exactWindowMs: DEFAULT_EXACT_WINDOW_MS,
      keepReplacedFineMs: DEFAULT_EXACT_WINDOW_MS + 30_000,
      intervalMs: 60_000,
    };
    expect(retentionPolicy({})).toEqual({ windowMs: DEFAULT_RETAIN_FOR_MS, ...always });
    expect(retentionPolicy({ retain: 5 })).toEqual({ count: 5, ...always });
    expect(retentionPolicy({ retainFor: HOUR })).toEqual({ windowMs: HOUR, ...always });
    expect(retentionPolicy({ retain: 5, retainFor: HOUR })).toEqual({
      count: 5,
      windowMs: HOUR,
      ...always,
    });
  });

  it('passes at most once per four manifest intervals (every manifest with an interval of 0)', () => {
    expect(retentionPolicy({ manifestIntervalMs: 10_000 }).intervalMs).toBe(40_000);
    expect(retentionPolicy({ manifestIntervalMs: 0 }).intervalMs).toBe(0);
  });

  it('keeps compacted-away fine segments for the exact window (5 min by default), 0 not at all', () => {
    expect(DEFAULT_EXACT_WINDOW_MS).toBe(300_000);
    expect(retentionPolicy({ exactWindowMs: 0 }).exactWindowMs).toBe(0);
    // And one level-1 window beyond: the oldest input of a level-1 object inside the window.
    expect(
      retentionPolicy({ exactWindowMs: 60_000, compactionLevels: [10_000] }).keepReplacedFineMs,
    ).toBe(70_000);
    expect(retentionPolicy({ exactWindowMs: 0 }).keepReplacedFineMs).toBe(0);
    for (const bad of [-1, 1.5, Number.NaN])
      expect(() => retentionPolicy({ exactWindowMs: bad })).toThrow(/invalid exactWindowMs/);
  });

  it('runs no retention with retain 0 (keeps all), even beside a window', () => {
    expect(retentionRuns(retentionPolicy({ retain: 0 }))).toBe(false);
    expect(retentionRuns(retentionPolicy({ retain: 0, retainFor: HOUR }))).toBe(false);
    expect(retentionRuns(retentionPolicy({}))).toBe(true);
  });

  it('refuses a value that is no count or no window, naming the option', () => {
    for (const [options, named] of [
      [{ retain: -1 }, 'invalid retain -1'],
      [{ retain: 1.5 }, 'invalid retain 1.5'],
      [{ retainFor: 0 }, 'invalid retainFor 0'],
      [{ retainFor: Number.NaN }, 'invalid retainFor NaN'],
      [{ retainFor: Number.POSITIVE_INFINITY }, 'invalid retainFor Infinity'],
    ] as const) {
      let thrown: unknown;
      try {
        retentionPolicy(options);
      } catch (error) {
        thrown = error;
      }
      expect(BackupError.isInstance(thrown), named).toBe(true);
      expect((thrown as Error).message).toContain(named);
    }
  });
});

describe('retiringGenerations', () => {
  it('retires owned generations older than every kept one, except the current and the retired', () => {
    const all = [restorePoint(0, 1), restorePoint(1, 2), restorePoint(2, 3), restorePoint(4, 4)];
    const selection = select(all, 1);
    const plan = retiringGenerations({
      selection,
      allocated: new Set([3, 5]),
      current: 5,
      retired: new Set([1]),
    });
    expect([...plan.owned].sort()).toEqual([0, 1, 2, 3, 4, 5]);
    expect(plan.retiring).toEqual([0, 2, 3]);
    expect(plan.referenced.has(snapshotKey(P, 4, 0))).toBe(true);
    expect(plan.referenced.has(snapshotKey(P, 2, 0))).toBe(false);
  });
});

describe('planDeletions', () => {
  it('deletes what only dropped restore points name, never what a kept or foreign one names', () => {
    const foreign = restorePoint(9, 1, { lineage: 'lineage-b', side: 'cccccccc' });
    const old = restorePoint(0, 2, { side: 'bbbbbbbb', segments: [[0, 10]] });
    const kept = restorePoint(1, 3, { segments: [[0, 10]] });
    const selection = select([foreign, old, kept], 1);
    const generations = retiringGenerations({
      selection,
      allocated: new Set(),
      current: 1,
      retired: new Set(),
    });
    const doomed = planDeletions({
      prefix: P,
      selection,
      generations,
      baseObjects: [
        snapshotKey(P, 0, 0),
        snapshotKey(P, 1, 0),
        snapshotKey(P, 9, 0), // another lineage's generation: not owned
        archiveKey(P, 0, 1),
        archiveKey(P, 1, 1),
      ],
      ownSideNames: new Set(['roles.json']),
      segmentObjects: new Map([[0, [segmentKey(P, 0, 0, 10), segmentKey(P, 0, 10, 20)]]]),
    });
    expect(doomed).toEqual([
      snapshotKey(P, 0, 0),
      archiveKey(P, 0, 1),
      sideKey(P, 'roles.json', 'bbbbbbbb', 1),
      segmentKey(P, 0, 0, 10),
      segmentKey(P, 0, 10, 20),
    ]);
  });

  it('keeps a side file a kept restore point still names, and names the source does not write', () => {
    const old = restorePoint(0, 1, { side: 'aaaaaaaa' });
    old.manifest!.files.push(file('custom.bin', sideKey(P, 'custom.bin', 'dddddddd', 1)));
    const kept = restorePoint(0, 2, { side: 'aaaaaaaa' });
    const selection = select([old, kept], 1);
    const generations = retiringGenerations({
      selection,
      allocated: new Set(),
      current: 0,
      retired: new Set(),
    });
    const doomed = planDeletions({
      prefix: P,
      selection,
      generations,
      baseObjects: [],
      ownSideNames: new Set(['roles.json']),
      segmentObjects: new Map(),
    });
    expect(doomed).toEqual([]);
  });

  it('never deletes an object a foreign manifest names, even in an owned generation', () => {
    const old = restorePoint(0, 1);
    const kept = restorePoint(1, 2);
    const foreign = restorePoint(0, 3, { lineage: 'lineage-b' });
    const selection = select([old, kept, foreign], 1, kept.key);
    const generations = retiringGenerations({
      selection,
      allocated: new Set(),
      current: 1,
      retired: new Set(),
    });
    const doomed = planDeletions({
      prefix: P,
      selection,
      generations,
      baseObjects: [snapshotKey(P, 0, 0), archiveKey(P, 0, 1)],
      ownSideNames: new Set(),
      segmentObjects: new Map([[0, [segmentKey(P, 0, 0, 10)]]]),
    });
    expect(doomed).toEqual([]);
  });
});

describe('exactWindowSplit', () => {
  const fine = (start: number, end: number) =>
    `${P}/wal/${String(1).padStart(20, '0')}/${String(start).padStart(20, '0')}-${String(end).padStart(20, '0')}.seg`;
  const compacted = `${P}/wal/${String(1).padStart(20, '0')}/${String(0).padStart(20, '0')}-${String(200).padStart(20, '0')}.L1.${String(1).padStart(20, '0')}-${String(20).padStart(20, '0')}.seg`;

  it('keeps a fine segment until the window after its shipping has passed, a compacted object not at all', () => {
    const compactedAway = new Map([
      [fine(0, 100), 1_000],
      [fine(100, 200), 2_000],
      [compacted, 2_000],
    ]);
    const at = (wallNow: number) =>
      exactWindowSplit({ prefix: P, compactedAway, wallNow, keepMs: 60_000 });
    expect([...at(60_999).kept]).toEqual([fine(0, 100), fine(100, 200)]);
    expect([...at(60_999).due]).toEqual([compacted]);
    expect([...at(61_000).due]).toEqual([fine(0, 100), compacted]);
    expect([...at(62_000).kept]).toEqual([]);
    expect([
      ...exactWindowSplit({ prefix: P, compactedAway, wallNow: 2_000, keepMs: 0 }).kept,
    ]).toEqual([]);
  });
});
