/**
 * Peak RSS of a backup step that uploads a 2 GiB snapshot (plus a small WAL)
 * to FsStore: the worker streams snapshots in bounded memory, so the peak
 * should not grow with the snapshot's size.
 *
 * Setup (not timed): a store directory with a 2 GiB `snapshot.bin` (random
 * bytes) and a 1 MiB framed `wal.bin`. Each run spawns a fresh Node process
 * (`--rss-child`) that backs the directory up to a fresh FsStore and reports
 * its peak resident set (`process.resourceUsage().maxRSS`, which includes
 * Node itself and the modules it loaded; the peak before the step is
 * reported too) and the upload throughput. A child
 * process keeps the harness's own memory out of the figure.
 */
import { spawn } from 'node:child_process';
import { randomFillSync } from 'node:crypto';
import { mkdir, mkdtemp, open, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
// The package index: the child loads it anyway through backup-ship.bench.ts
// (writeFramedWal), so the baseline is the whole package, as in backupd.
import { BackupWorker } from '@x/backup-worker';
import { FramedDirSource, identifyFramedFiles } from '@x/source-framed';
import { FsStore } from '@x/store';
import { writeFramedWal } from './backup-ship.bench.ts';
import { defineBenchmark, type Measurement } from './harness.ts';

const MiB = 1024 * 1024;
const SNAPSHOT_BYTES = 2048 * MiB;

async function writeRandomFile(path: string, bytes: number): Promise<void> {
  const buffer = new Uint8Array(8 * MiB);
  const handle = await open(path, 'w');
  try {
    for (let written = 0; written < bytes; written += buffer.byteLength) {
      randomFillSync(buffer);
      await handle.write(buffer, 0, Math.min(buffer.byteLength, bytes - written));
    }
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** In the child: one backup step of `directory` into a FsStore at `root`; prints JSON. */
async function child(directory: string, root: string): Promise<void> {
  const identities = await identifyFramedFiles(directory);
  const walHandle = await open(join(directory, 'wal.bin'));
  const length = (await walHandle.stat()).size;
  await walHandle.close();
  const worker = new BackupWorker({
    store: new FsStore({ root }),
    prefix: 'bench/db',
    source: new FramedDirSource({
      directory,
      engine: {
        durablePosition: () => ({
          engineGeneration: '0',
          snapshot: identities.snapshot,
          wal: identities.wal,
          durableLength: length,
          commitCount: null,
          snapshotInProgress: false,
        }),
      },
    }),
    manifestIntervalMs: 0,
  });
  // commitCount null defers the first step only when the prefix has restore
  // points; this prefix is empty.
  const baselineKiB = process.resourceUsage().maxRSS;
  const started = process.hrtime.bigint();
  await worker.runOnce();
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  if (worker.health().errorCount !== 0) throw new Error('the step failed');
  process.stdout.write(
    `${JSON.stringify({ baselineKiB, maxRssKiB: process.resourceUsage().maxRSS, seconds })}\n`,
  );
}

const self = fileURLToPath(import.meta.url);
if (process.argv[1] && pathToFileURL(process.argv[1]).href === import.meta.url) {
  const index = process.argv.indexOf('--rss-child');
  if (index !== -1) await child(process.argv[index + 1]!, process.argv[index + 2]!);
}

interface ChildResult {
  baselineKiB: number;
  maxRssKiB: number;
  seconds: number;
}

function runChild(directory: string, root: string): Promise<ChildResult> {
  return new Promise((resolve, reject) => {
    const processHandle = spawn(
      process.execPath,
      ['--conditions=@x/source', self, '--rss-child', directory, root],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    let output = '';
    processHandle.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    processHandle.on('error', reject);
    processHandle.on('exit', (code) => {
      if (code !== 0) reject(new Error(`the child exited with ${code}`));
      else resolve(JSON.parse(output.trim().split('\n').at(-1)!) as ChildResult);
    });
  });
}

interface State {
  directory: string;
}

export const benchmark = defineBenchmark<State>({
  name: 'backup-snapshot-rss',
  description:
    'peak RSS of a child process uploading a 2 GiB snapshot to FsStore in one backup step',
  runs: 3,
  async setup(context) {
    const directory = join(context.tempDir, 'store');
    await mkdir(directory);
    context.log('writing a 2 GiB snapshot');
    await writeRandomFile(join(directory, 'snapshot.bin'), SNAPSHOT_BYTES);
    await writeFramedWal(join(directory, 'wal.bin'), MiB);
    return { directory };
  },
  async run(state, context) {
    const root = await mkdtemp(join(context.tempDir, 'bucket-'));
    try {
      const { baselineKiB, maxRssKiB, seconds } = await runChild(state.directory, root);
      const measured: Record<string, Measurement> = {
        'peak RSS': { value: (maxRssKiB * 1024) / 1e6, unit: 'MB', higherIsBetter: false },
        'RSS before the step': {
          value: (baselineKiB * 1024) / 1e6,
          unit: 'MB',
          higherIsBetter: false,
        },
        'snapshot upload': { value: SNAPSHOT_BYTES / 1e6 / seconds, unit: 'MB/s' },
      };
      return measured;
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  },
});
