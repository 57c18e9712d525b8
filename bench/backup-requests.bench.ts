/**
 * Requests per minute by operation (PUT, GET, HEAD, LIST, DELETE; `upload`
 * counted as PUT) of a running worker with the default settings (WAL interval
 * 1 s, manifest interval 10 s, lease TTL 30 s, retain 24), against FsStore:
 *
 * - idle: the store takes no commits; the only requests should be lease
 *   renewals (one PUT every TTL/3 = 10 s);
 * - under load: 10 durable commits per second (1 KiB each).
 *
 * Each run (30 s idle, then 30 s under load, after a warm-up that takes the
 * lease and uploads the first restore point) counts requests at the store
 * and scales them to a minute. Uses the real clock: it takes a minute a run.
 */

import { appendFile, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { BackupWorker } from '@x/backup-worker';
import type { DurablePosition } from '@x/engine';
import { FramedDirSource, identifyFramedFiles } from '@x/source-framed';
import {
  type CallOptions,
  type DeleteOptions,
  FsStore,
  type ListOptions,
  type ObjectStore,
  type PutOptions,
  type UploadOptions,
  type UploadSource,
} from '@x/store';
import { encodeFrame } from '@x/wal-segment';
import { defineBenchmark, type Measurement } from './harness.ts';

const WINDOW_MS = 30_000;
const OPERATIONS = ['PUT', 'GET', 'HEAD', 'LIST', 'DELETE'] as const;
type Operation = (typeof OPERATIONS)[number];

function countingStore(inner: ObjectStore, counts: Record<Operation, number>): ObjectStore {
  return {
    description: inner.description,
    capabilities: inner.capabilities,
    get: (key: string, options?: CallOptions) => {
      counts.GET += 1;
      return inner.get(key, options);
    },
    getStream: (key: string, options?: CallOptions) => {
      counts.GET += 1;
      return inner.getStream(key, options);
    },
    head: (key: string, options?: CallOptions) => {
      counts.HEAD += 1;
      return inner.head(key, options);
    },
    put: (key: string, body: Uint8Array, options?: PutOptions) => {
      counts.PUT += 1;
      return inner.put(key, body, options);
    },
    delete: (key: string, options?: DeleteOptions) => {
      counts.DELETE += 1;
      return inner.delete(key, options);
    },
    list: (prefix: string, options?: ListOptions) => {
      counts.LIST += 1;
      return inner.list(prefix, options);
    },
    upload: (key: string, source: UploadSource, options?: UploadOptions) => {
      counts.PUT += 1;
      return inner.upload(key, source, options);
    },
  };
}

/** A minimal in-process engine: appends durable 1 KiB commits to wal.bin. */
class Engine {
  readonly directory: string;
  length = 0;
  commits = 0;
  constructor(directory: string) {
    this.directory = directory;
  }
  async commit(): Promise<void> {
    this.commits += 1;
    const frame = encodeFrame(new Uint8Array(1024).fill(this.commits & 0xff));
    await appendFile(join(this.directory, 'wal.bin'), frame);
    this.length += frame.byteLength;
  }
  async durablePosition(): Promise<DurablePosition> {
    const { snapshot, wal } = await identifyFramedFiles(this.directory);
    return {
      engineGeneration: '0',
      snapshot,
      wal,
      durableLength: this.length,
      commitCount: this.commits,
      snapshotInProgress: false,
    };
  }
}

function zero(): Record<Operation, number> {
  return { PUT: 0, GET: 0, HEAD: 0, LIST: 0, DELETE: 0 };
}

export const benchmark = defineBenchmark<{ tempDir: string }>({
  name: 'backup-requests',
  description:
    'requests per minute by operation of a running worker (defaults) against FsStore, idle and at 10 commits/s',
  runs: 1,
  async setup(context) {
    return { tempDir: context.tempDir };
  },
  async run(state, context) {
    const directory = await mkdtemp(join(state.tempDir, 'store-'));
    const root = join(state.tempDir, `bucket-${Date.now()}`);
    await mkdir(root);
    const engine = new Engine(directory);
    await appendFile(join(directory, 'wal.bin'), new Uint8Array(0));
    for (let i = 0; i < 10; i += 1) await engine.commit();
    const counts = zero();
    const worker = new BackupWorker({
      store: countingStore(new FsStore({ root }), counts),
      prefix: 'bench/db',
      source: new FramedDirSource({ directory, engine }),
    });
    const handle = worker.start();
    try {
      // Warm-up: lease taken, first restore point written.
      for (let i = 0; i < 100 && !(handle.health().leaseHeld && counts.PUT >= 4); i += 1)
        await sleep(100);
      await sleep(2_000);
      if (!handle.health().healthy) throw new Error(`unhealthy: ${handle.health().reason}`);
      context.log('idle window');
      Object.assign(counts, zero());
      await sleep(WINDOW_MS);
      const idle = { ...counts };
      context.log('load window');
      Object.assign(counts, zero());
      let writing = true;
      const writer = (async () => {
        while (writing) {
          await engine.commit();
          await sleep(100);
        }
      })();
      await sleep(WINDOW_MS);
      writing = false;
      await writer;
      const load = { ...counts };
      if (!handle.health().healthy) throw new Error(`unhealthy: ${handle.health().reason}`);
      const perMinute = 60_000 / WINDOW_MS;
      const measured: Record<string, Measurement> = {};
      for (const operation of OPERATIONS)
        measured[`idle ${operation}`] = {
          value: idle[operation] * perMinute,
          unit: 'req/min',
          higherIsBetter: false,
        };
      for (const operation of OPERATIONS)
        measured[`load ${operation}`] = {
          value: load[operation] * perMinute,
          unit: 'req/min',
          higherIsBetter: false,
        };
      return measured;
    } finally {
      await handle.shutdown();
      await rm(directory, { recursive: true, force: true });
      await rm(root, { recursive: true, force: true });
    }
  },
});
