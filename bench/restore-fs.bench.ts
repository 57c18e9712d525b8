/**
 * Restore throughput of a 1 GiB framed WAL from FsStore (target ≥ 300 MB/s).
 *
 * Setup (not measured): an FsStore in the harness's temp directory holding
 * one restore point — a 4 MiB snapshot, a side file and 1 GiB of WAL in 64
 * segments of 16 MiB, frames of 1–8 KiB payload. Each run restores it into a
 * fresh directory: every object streamed with its size and CRC-32 checked,
 * `wal.bin` rebuilt and cut by frames, files fsynced and renamed into place.
 * Throughput = bytes restored / wall time, in MB/s (10^6 bytes). The store's
 * objects were just written, so they are likely in the page cache: this
 * measures restore, not the disk under the bucket. The resident set is
 * sampled every 20 ms during the run; its growth shows memory stays bounded
 * (objects stream).
 *
 * `pnpm bench restore-fs` (or `--runs N`).
 */

import { randomFillSync } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import {
  crc32Hex,
  type FileEntry,
  latestKey,
  type Manifest,
  manifestKey,
  type SegmentEntry,
  segmentKey,
  serializeLatest,
  serializeManifest,
  sideKey,
  snapshotKey,
} from '@x/manifest';
import { restoreFramedStore } from '@x/source-framed';
import { FsStore } from '@x/store';
import { encodeFrame } from '@x/wal-segment';
import { defineBenchmark, type Measurement, megabytesPerSecond } from './harness.ts';

const MiB = 1024 * 1024;
const PREFIX = 'bench/restore';
const LINEAGE = 'benchlineage';
const WAL_BYTES = 1024 * MiB;
const SEGMENT_BYTES = 16 * MiB;

interface State {
  store: FsStore;
  directory: string;
  bytes: number;
  frames: number;
  run: number;
}

/** One segment's bytes: whole frames, about `size` bytes, payloads cut from `pool`. */
function segmentBytes(
  size: number,
  pool: Uint8Array,
  seed: number,
): { bytes: Uint8Array; frames: number } {
  const frames: Uint8Array[] = [];
  let total = 0;
  let state = seed;
  while (total < size) {
    state = (state * 1103515245 + 12345) >>> 0;
    const length = Math.min(1024 + (state % 7168), size - total - 8);
    if (length <= 0) break;
    const offset = state % (pool.byteLength - length);
    const frame = encodeFrame(pool.subarray(offset, offset + length));
    frames.push(frame);
    total += frame.byteLength;
  }
  return { bytes: Buffer.concat(frames), frames: frames.length };
}

export const benchmark = defineBenchmark<State>({
  name: 'restore-fs',
  description:
    'restore of a restore point with 1 GiB of framed WAL (64 segments) from FsStore into a fresh directory, every object CRC-checked',
  async setup(context) {
    const store = new FsStore({ root: join(context.tempDir, 'bucket') });
    const pool = randomFillSync(new Uint8Array(4 * MiB));
    const snapshot = randomFillSync(new Uint8Array(4 * MiB));
    const roles = new TextEncoder().encode('{"roles":["primary"]}');
    const files: FileEntry[] = [];
    const snapshotObjectKey = snapshotKey(PREFIX, 0, 0);
    await store.put(snapshotObjectKey, snapshot, { mode: 'create' });
    files.push({
      name: 'snapshot.bin',
      key: snapshotObjectKey,
      size: snapshot.byteLength,
      crc32: crc32Hex(snapshot),
      frames: 0,
      lineage: LINEAGE,
    });
    const rolesKey = sideKey(PREFIX, 'roles.json', crc32Hex(roles), roles.byteLength);
    await store.put(rolesKey, roles, { mode: 'create' });
    files.push({
      name: 'roles.json',
      key: rolesKey,
      size: roles.byteLength,
      crc32: crc32Hex(roles),
      frames: 0,
      lineage: LINEAGE,
    });

    const segments: SegmentEntry[] = [];
    let offset = 0;
    let frames = 0;
    for (let index = 0; index < WAL_BYTES / SEGMENT_BYTES; index += 1) {
      const segment = segmentBytes(SEGMENT_BYTES, pool, index + 1);
      const key = segmentKey(PREFIX, 0, offset, offset + segment.bytes.byteLength);
      await store.put(key, segment.bytes, { mode: 'create' });
      segments.push({
        key,
        size: segment.bytes.byteLength,
        crc32: crc32Hex(segment.bytes),
        frames: segment.frames,
        lineage: LINEAGE,
      });
      offset += segment.bytes.byteLength;
      frames += segment.frames;
    }
    context.log(`restore-fs: ${segments.length} segments, ${frames} frames written`);
    const manifest: Manifest = {
      formatVersion: 1,
      lineage: LINEAGE,
      createdAt: new Date().toISOString(),
      commitSeq: frames,
      oldestCommitSeq: 0,
      walGeneration: 0,
      files,
      segments,
    };
    const key = manifestKey(PREFIX, frames);
    await store.put(key, new TextEncoder().encode(serializeManifest(manifest)), {
      mode: 'create',
    });
    await store.put(latestKey(PREFIX), new TextEncoder().encode(serializeLatest(key)), {
      mode: 'create',
    });
    return {
      store,
      directory: context.tempDir,
      bytes: offset + snapshot.byteLength + roles.byteLength,
      frames,
      run: 0,
    };
  },
  async run(state): Promise<Record<string, Measurement>> {
    const target = join(state.directory, `target-${state.run}`);
    state.run += 1;
    const startRss = process.memoryUsage.rss();
    let peakRss = startRss;
    const sampler = setInterval(() => {
      peakRss = Math.max(peakRss, process.memoryUsage.rss());
    }, 20);
    try {
      const started = process.hrtime.bigint();
      const result = await restoreFramedStore(state.store, PREFIX, target);
      const elapsed = process.hrtime.bigint() - started;
      if (result.commitSeq !== state.frames || result.bytes !== state.bytes) {
        throw new Error(
          `restore returned ${result.commitSeq} commits / ${result.bytes} bytes, expected ${state.frames} / ${state.bytes}`,
        );
      }
      return {
        throughput: megabytesPerSecond(state.bytes, elapsed),
        // Growth over the run, not the process's total: setup's buffers are
        // garbage by now but may still be counted in the resident set.
        rssGrowth: { value: (peakRss - startRss) / MiB, unit: 'MiB', higherIsBetter: false },
      };
    } finally {
      clearInterval(sampler);
      await rm(target, { recursive: true, force: true });
    }
  },
});
