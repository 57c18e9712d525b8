/**
 * A baseline bucket with a compacted commit log, for the hostile table of
 * compacted objects, and the ways to damage or forge one.
 *
 * The baseline is the framed store of `bucket.ts` backed up by a worker that
 * compacts (one level of 30 s, a fake clock moved 10 s a step), keeping every
 * restore point (`retain: 0`), so the fine segments a compaction replaced
 * stay in the bucket, named by the restore points before it:
 *
 * | manifest | names |
 * |---|---|
 * | 2, 3, 4 | the fine segments `0-32` (commits 1–2), `32-48` (3), `48-64` (4) |
 * | 5 | `0-64.L1.0-4` (commits 1–4, compacted), `64-80` (5) |
 * | 6 (LATEST) | `0-64.L1.0-4`, `64-80`, `80-96` (6) |
 *
 * {@link buildCompactedBaseline} checks that the bucket is exactly that
 * before any row plants on it, so a row cannot pass on a baseline that
 * compacted otherwise (or not at all). Every planter here throws when what
 * it damages is not where it expects it.
 */
import { crc32 } from 'node:zlib';
import { BackupWorker } from '@x/backup-worker';
import { FakeClock } from '@x/lease';
import {
  compactedSegmentKey,
  crc32Hex,
  latestKey,
  manifestKey,
  parseLatest,
  parseManifest,
  parseManifestKey,
  parseSegmentKey,
  segmentObjectKey,
} from '@x/manifest';
import { FramedDirSource } from '@x/source-framed';
import type { ObjectStore } from '@x/store';
import {
  decodeSegmentObject,
  encodeFrame,
  encodeSegmentObject,
  type SegmentObjectFields,
  segmentObjectFieldsOf,
} from '@x/wal-segment';
import { appendCommits, NOW_MS, PREFIX, prepareCase } from './bucket.ts';
import { headerBytes, refixHeaderCrc } from './envelope.ts';
import type { Planter } from './plant.ts';

/** The compacted object: bytes 0..64 of generation 0, commits 1–4, level 1. */
export const COMPACTED = compactedSegmentKey(PREFIX, 0, 0, 64, 1, 0, 4);
/** The fine segments of generation 0, by their byte ranges. */
export const FINE = {
  '0-32': segmentObjectKey(PREFIX, 0, 0, 32),
  '32-48': segmentObjectKey(PREFIX, 0, 32, 48),
  '48-64': segmentObjectKey(PREFIX, 0, 48, 64),
  '64-80': segmentObjectKey(PREFIX, 0, 64, 80),
  '80-96': segmentObjectKey(PREFIX, 0, 80, 96),
} as const;
/** LATEST's restore point: commit 6. */
export const LATEST_MANIFEST = manifestKey(PREFIX, 6);

/** What each manifest of the baseline names, in order. */
const EXPECTED_LAYOUT: Record<number, readonly string[]> = {
  2: [FINE['0-32']],
  3: [FINE['0-32'], FINE['32-48']],
  4: [FINE['0-32'], FINE['32-48'], FINE['48-64']],
  5: [COMPACTED, FINE['64-80']],
  6: [COMPACTED, FINE['64-80'], FINE['80-96']],
};

/**
 * Builds the baseline of the module comment in `root` (the case layout of
 * `bucket.ts`), and checks it.
 */
export async function buildCompactedBaseline(root: string): Promise<void> {
  const { paths, store } = await prepareCase(root);
  const clock = new FakeClock({ wallMs: NOW_MS - 60_000 });
  const events: string[] = [];
  const record = (event: string): void => {
    events.push(event);
  };
  const worker = new BackupWorker({
    store,
    prefix: PREFIX,
    source: new FramedDirSource({ directory: paths.source }),
    clock,
    manifestIntervalMs: 0,
    retain: 0,
    compactionLevels: [30_000],
    operationTimeoutMs: 10_000,
    logger: { debug: record, info: record, warn: record, error: record },
  });
  // Commits 1 and 2 are in the source already; 3 and 4 follow, 10 s apart,
  // all inside one 30 s window.
  await worker.runOnce();
  for (const commit of [3, 4]) {
    clock.advance(10_000);
    await appendCommits(paths.source, commit, commit);
    await worker.runOnce();
  }
  // The window has ended: the step that ships commit 5 starts the
  // compaction of the three fine segments; a later step applies it.
  clock.advance(10_000);
  await appendCommits(paths.source, 5, 5);
  await worker.runOnce();
  for (let attempt = 0; !(await latestNames(store, COMPACTED)); attempt += 1) {
    if (attempt === 200)
      throw new Error(`the baseline never compacted; the worker said: ${events.join(', ')}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
    await worker.runOnce();
  }
  clock.advance(10_000);
  await appendCommits(paths.source, 6, 6);
  await worker.runOnce();
  await checkLayout(store);
}

async function latestNames(store: ObjectStore, key: string): Promise<boolean> {
  const latest = await store.get(latestKey(PREFIX));
  if (latest === null) return false;
  const manifest = await store.get(parseLatest(latest.body, { prefix: PREFIX }));
  return parseManifest(manifest!.body, { prefix: PREFIX }).segments.some((s) => s.key === key);
}

async function checkLayout(store: ObjectStore): Promise<void> {
  const layout: Record<number, string[]> = {};
  for (const { key } of (await store.list(`${PREFIX}/manifest/`)).objects) {
    const commit = parseManifestKey(PREFIX, key)!;
    const manifest = parseManifest((await store.get(key))!.body, { prefix: PREFIX });
    layout[commit] = manifest.segments.map((segment) => segment.key);
  }
  const latest = parseLatest((await store.get(latestKey(PREFIX)))!.body, { prefix: PREFIX });
  const wal = (await store.list(`${PREFIX}/wal/`)).objects.map((object) => object.key).sort();
  const expected = {
    layout: EXPECTED_LAYOUT,
    latest: LATEST_MANIFEST,
    wal: [COMPACTED, ...Object.values(FINE)].sort(),
  };
  const found = { layout, latest, wal };
  if (JSON.stringify(found) !== JSON.stringify(expected))
    throw new Error(
      `the compacted baseline is not what the table expects: ${JSON.stringify(found)}`,
    );
}

// ── Damage ──────────────────────────────────────────────────────────────────

const encoder = new TextEncoder();
const decoder = new TextDecoder();

interface ManifestJson {
  commitSeq: number;
  segments: { key: string; size: number; crc32: string; frames: number; lineage: string }[];
}

/**
 * Rewrites every manifest naming `key` with `edit` applied to its entry.
 * Throws when none names it.
 */
async function editEntries(
  store: ObjectStore,
  key: string,
  edit: (entry: ManifestJson['segments'][number]) => void,
): Promise<void> {
  let rewritten = 0;
  for (const { key: at } of (await store.list(`${PREFIX}/manifest/`)).objects) {
    if (parseManifestKey(PREFIX, at) === undefined) continue;
    const json = JSON.parse(decoder.decode((await store.get(at))!.body)) as ManifestJson;
    const entry = json.segments.find((segment) => segment.key === key);
    if (entry === undefined) continue;
    edit(entry);
    await store.put(at, encoder.encode(JSON.stringify(json, null, 2)));
    rewritten += 1;
  }
  if (rewritten === 0) throw new Error(`no manifest of the baseline names ${key}`);
}

/**
 * Replaces the compacted object by `change(stored)` and records the new size
 * and CRC-32 in every manifest naming it (5 and 6): the object passes the
 * download checks and reaches the decoder. Throws when `change` returned
 * the same bytes (a row that planted nothing).
 */
export function damagedCompacted(change: (stored: Uint8Array) => Uint8Array): Planter {
  return async (store) => {
    const stored = await store.get(COMPACTED);
    if (stored === null) throw new Error(`the baseline holds no ${COMPACTED}`);
    const damaged = change(Uint8Array.from(stored.body));
    if (Buffer.from(damaged).equals(Buffer.from(stored.body)))
      throw new Error(`the damage left ${COMPACTED} as it was`);
    await store.put(COMPACTED, damaged);
    await editEntries(store, COMPACTED, (entry) => {
      entry.size = damaged.byteLength;
      entry.crc32 = crc32Hex(damaged);
    });
  };
}

/** The compacted object with its zstd body's bytes after the first 4 overwritten: not a zstd frame any more. */
export const corruptedZstd = damagedCompacted((stored) => {
  stored.fill(0x55, headerBytes(stored) + 4);
  return stored;
});

/** The compacted object cut `bytes` short: a truncated zstd frame. */
export const cutShort = (bytes: number) =>
  damagedCompacted((stored) => stored.slice(0, stored.length - bytes));

/**
 * The compacted object with its header as it was but for `fields` (its
 * header CRC right), around `body(decoded)` compressed (its body CRC right):
 * an envelope every CRC agrees with.
 */
export function reencodedCompacted(
  body: (decoded: Uint8Array) => Uint8Array,
  fields: (old: SegmentObjectFields, body: Uint8Array) => Partial<SegmentObjectFields> = () => ({}),
): Planter {
  return damagedCompacted((stored) => {
    const { header, body: decoded } = decodeSegmentObject(stored);
    const replacement = body(decoded);
    const old = segmentObjectFieldsOf(header);
    return encodeSegmentObject(replacement, { ...old, ...fields(old, replacement) });
  });
}

/**
 * The compacted object with the header's decoded length kept and its body
 * replaced by zstd of `body(decoded)`, the body CRC fixed: the body decodes
 * to another length than the header says (built by hand: the encoder
 * refuses to write such an object).
 */
export function wrongLength(body: (decoded: Uint8Array) => Uint8Array): Planter {
  return damagedCompacted((stored) => {
    const { header, body: decoded } = decodeSegmentObject(stored);
    const replacement = body(decoded);
    const honest = encodeSegmentObject(replacement, {
      ...segmentObjectFieldsOf(header),
      decodedLength: replacement.length,
    });
    // The decoded length (right after the lineage) back to the old value.
    new DataView(honest.buffer, honest.byteOffset, honest.byteLength).setBigUint64(
      53 + header.lineage.length,
      BigInt(header.decodedLength),
      true,
    );
    return refixHeaderCrc(honest);
  });
}

/** Framed commits whose payloads are `payloads`, as one log. */
export function framesOf(...payloads: string[]): Uint8Array {
  return new Uint8Array(Buffer.concat(payloads.map((text) => encodeFrame(encoder.encode(text)))));
}

/**
 * Stores at `key` a compacted object built as the worker builds one from
 * the fine segments `inputs` (their bodies concatenated, the first one's
 * `previous`, the last one's stored CRC-32 as chain end), `body` applied to
 * the concatenation. Returns its manifest entry.
 */
export async function forgeCompacted(
  store: ObjectStore,
  key: string,
  inputs: readonly string[],
  body: (concatenated: Uint8Array) => Uint8Array = (concatenated) => concatenated,
): Promise<ManifestJson['segments'][number]> {
  const decoded: Uint8Array[] = [];
  let commits = 0;
  let first: ReturnType<typeof decodeSegmentObject>['header'] | undefined;
  let last: Uint8Array | undefined;
  for (const input of inputs) {
    const stored = await store.get(input);
    if (stored === null) throw new Error(`the baseline holds no ${input}`);
    const object = decodeSegmentObject(stored.body);
    first ??= object.header;
    decoded.push(object.body);
    commits += object.header.commits;
    last = stored.body;
  }
  const merged = body(new Uint8Array(Buffer.concat(decoded)));
  const range = parseSegmentKey(PREFIX, key);
  if (range?.layout !== 'compacted') throw new Error(`${key} is not a compacted key`);
  const object = encodeSegmentObject(merged, {
    codec: 'zstd',
    kind: 'compacted',
    generation: range.generation,
    start: range.start,
    end: range.end,
    commits,
    previousCrc32: first!.previousCrc32,
    lineage: first!.lineage,
    decodedLength: merged.length,
    chainEndCrc32: crc32(last!),
  });
  await store.put(key, object);
  return {
    key,
    size: object.byteLength,
    crc32: crc32Hex(object),
    frames: commits,
    lineage: first!.lineage,
  };
}

/**
 * LATEST's manifest (commit 6) with `segments` in place of its own and its
 * `commitSeq` made to add up, written at commit `at`'s key; LATEST names it.
 * (Where `at` is not that commit, the rows plant a manifest that does not
 * parse, which is refused before its key is compared.)
 */
export async function plantManifest(
  store: ObjectStore,
  at: number,
  segments: (own: ManifestJson['segments']) => ManifestJson['segments'],
): Promise<void> {
  const json = JSON.parse(decoder.decode((await store.get(LATEST_MANIFEST))!.body)) as ManifestJson;
  const own = json.segments;
  json.segments = segments(own.map((segment) => ({ ...segment })));
  json.commitSeq +=
    json.segments.reduce((sum, s) => sum + s.frames, 0) - own.reduce((sum, s) => sum + s.frames, 0);
  await store.put(manifestKey(PREFIX, at), encoder.encode(JSON.stringify(json, null, 2)));
  await store.put(latestKey(PREFIX), encoder.encode(manifestKey(PREFIX, at)));
}
