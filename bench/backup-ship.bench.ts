/**
 * Shipping throughput of a 1 GiB framed WAL: one backup step that uploads a
 * store directory whose `wal.bin` holds 1 GiB of durable frames (1–8 KiB
 * payloads), as 32 MiB segments, plus the manifest and LATEST.
 *
 * Setup (not timed): the store directory, and versitygw started through
 * @x/test-servers' `startTestServers` (the S3 measurement is skipped with a
 * message when versitygw is not installed: `pnpm servers:install`).
 * Each run (timed, separately): a fresh worker ships everything to a fresh
 * FsStore directory, then to a fresh prefix on versitygw. Throughput = WAL
 * bytes / wall time of the step (the step includes resume and the manifest).
 * The WAL was just written, so it is likely in the page cache: this measures
 * the worker and the store, not the source disk.
 */
import { randomFillSync } from 'node:crypto';
import { mkdir, mkdtemp, open, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { BackupWorker } from '@x/backup-worker';
import { FramedDirSource, identifyFramedFiles } from '@x/source-framed';
import { FsStore, type ObjectStore } from '@x/store';
import { S3Store } from '@x/store-s3';
import { type StartedTestServers, startTestServers } from '@x/test-servers/harness';
import { encodeFrame } from '@x/wal-segment';
import { defineBenchmark, type Measurement, megabytesPerSecond } from './harness.ts';

const MiB = 1024 * 1024;
const WAL_BYTES = 1024 * MiB;

/** Writes `bytes` (about) of frames with 1–8 KiB payloads to `path`; returns the exact length and frame count. */
export async function writeFramedWal(
  path: string,
  bytes: number,
): Promise<{ length: number; frames: number }> {
  const pool = new Uint8Array(16 * MiB);
  randomFillSync(pool);
  const handle = await open(path, 'w');
  let length = 0;
  let frames = 0;
  let seed = 1;
  try {
    while (length < bytes) {
      const batch: Uint8Array[] = [];
      let batchBytes = 0;
      while (batchBytes < 8 * MiB && length + batchBytes < bytes) {
        seed = (seed * 1103515245 + 12345) >>> 0;
        const size = 1024 + (seed % (7 * 1024));
        const offset = seed % (pool.byteLength - size);
        const frame = encodeFrame(pool.subarray(offset, offset + size));
        batch.push(frame);
        batchBytes += frame.byteLength;
        frames += 1;
      }
      await handle.write(Buffer.concat(batch));
      length += batchBytes;
    }
    await handle.sync();
  } finally {
    await handle.close();
  }
  return { length, frames };
}

/** Ships `directory` (WAL fully durable) to `store` under `prefix` in one step; returns elapsed ns. */
export async function shipOnce(
  directory: string,
  wal: { length: number; frames: number },
  store: ObjectStore,
  prefix: string,
): Promise<bigint> {
  const identities = await identifyFramedFiles(directory);
  const worker = new BackupWorker({
    store,
    prefix,
    source: new FramedDirSource({
      directory,
      engine: {
        durablePosition: () => ({
          engineGeneration: '0',
          snapshot: identities.snapshot,
          wal: identities.wal,
          durableLength: wal.length,
          commitCount: wal.frames,
          snapshotInProgress: false,
        }),
      },
    }),
    manifestIntervalMs: 0,
  });
  const started = process.hrtime.bigint();
  await worker.runOnce();
  const elapsed = process.hrtime.bigint() - started;
  if (worker.health().errorCount !== 0) throw new Error('the step failed');
  return elapsed;
}

interface State {
  directory: string;
  wal: { length: number; frames: number };
  servers: StartedTestServers | null;
  s3: { store: S3Store } | null;
  run: number;
}

export const benchmark = defineBenchmark<State>({
  name: 'backup-ship',
  description:
    'one backup step shipping a 1 GiB framed WAL (32 MiB segments) to FsStore and to S3 on versitygw',
  runs: 3,
  async setup(context) {
    const directory = join(context.tempDir, 'store');
    await mkdir(directory);
    context.log('writing a 1 GiB framed WAL');
    const wal = await writeFramedWal(join(directory, 'wal.bin'), WAL_BYTES);
    const servers = await startTestServers({ only: ['versitygw'] }).catch(() => null);
    const server = servers?.servers.s3.find((s) => s.name === 'versitygw');
    if (!server)
      context.log('versitygw is not running: the S3 measurement is skipped (pnpm servers:install)');
    const s3 = server
      ? {
          store: new S3Store({
            bucket: server.bucket,
            endpoint: server.endpoint,
            region: server.region,
            forcePathStyle: true,
            credentials: {
              accessKeyId: server.accessKeyId,
              secretAccessKey: server.secretAccessKey,
            },
          }),
        }
      : null;
    return { directory, wal, servers, s3, run: 0 };
  },
  async run(state, context) {
    state.run += 1;
    const measured: Record<string, Measurement> = {};
    const root = await mkdtemp(join(context.tempDir, 'bucket-'));
    try {
      const elapsed = await shipOnce(state.directory, state.wal, new FsStore({ root }), 'bench/db');
      measured.FsStore = megabytesPerSecond(state.wal.length, elapsed);
    } finally {
      await rm(root, { recursive: true, force: true });
    }
    if (state.s3) {
      const elapsed = await shipOnce(
        state.directory,
        state.wal,
        state.s3.store,
        `bench-ship-${Date.now()}-${state.run}`,
      );
      measured['S3 (versitygw)'] = megabytesPerSecond(state.wal.length, elapsed);
    }
    return measured;
  },
  async teardown(state) {
    await state.servers?.stop();
  },
});
