/**
 * End to end: an application in its own process writes random transactions
 * (inserts, updates, deletes, overflow blobs, schema changes) and runs
 * checkpoints; the tap captures and ships; every restore of the latest commit
 * and of 20 random commits passes `integrity_check` and equals the
 * application's own record of that commit.
 */
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FsStore, MemoryStore, type ObjectStore } from '@x/store';
import { S3Store } from '@x/store-s3';
import { randomPrefix, testServers } from '@x/test-servers';
import { afterEach, describe, expect, it } from 'vitest';
import { sqliteContentHash as contentHash } from '../src/content-hash.ts';
import { integrityCheck } from '../src/rebuild-database.ts';
import { SqliteTap } from '../src/tap.ts';
import { createDatabase, hashOf, startWriter, TapShipper } from './harness.ts';

const directories: string[] = [];
afterEach(() => {
  for (const directory of directories.splice(0))
    rmSync(directory, { recursive: true, force: true });
});

function workDirectory(): string {
  const directory = mkdtempSync(join(tmpdir(), 'backupd-sqlite-'));
  directories.push(directory);
  return directory;
}

function s3Store(): ObjectStore | null {
  let servers: ReturnType<typeof testServers>;
  try {
    servers = testServers();
  } catch {
    return null;
  }
  const server =
    servers.s3.find((candidate) => candidate.honoursConditionalWrites) ?? servers.s3[0];
  if (!server) return null;
  return new S3Store({
    bucket: server.bucket,
    prefix: randomPrefix('sqlite-tap'),
    endpoint: server.endpoint,
    region: server.region,
    forcePathStyle: true,
    credentials: { accessKeyId: server.accessKeyId, secretAccessKey: server.secretAccessKey },
  });
}

/** Seeded choice of `count` distinct commits in 0..max. */
function sampleCommits(max: number, count: number, seed: number): number[] {
  let state = seed;
  const chosen = new Set<number>();
  while (chosen.size < Math.min(count, max + 1)) {
    state = (state * 1103515245 + 12345) >>> 0;
    chosen.add(state % (max + 1));
  }
  return [...chosen].sort((a, b) => a - b);
}

async function runScenario(options: {
  store: ObjectStore;
  checkpoints: 'random' | 'truncate-loop';
  transactions: number;
  seed: number;
}) {
  const directory = workDirectory();
  const database = join(directory, 'app.db');
  createDatabase(database);
  // Low thresholds, so the tap's own restarts happen many times in a short
  // run: the application's random RESTART/TRUNCATE checkpoints (about one
  // commit in 17) restart the WAL too, and with 256 frames (50 to 80
  // commits here) a run sometimes ended without one of the tap's.
  const tap = SqliteTap.open(database, {
    passiveCheckpointPages: 32,
    truncateCheckpointPages: 96,
  });
  try {
    const shipper = new TapShipper(options.store, 'backup', tap);
    await shipper.step();
    const writer = startWriter(database, {
      transactions: options.transactions,
      seed: options.seed,
      checkpoints: options.checkpoints,
    });
    let finished = false;
    let failure: unknown = null;
    writer.done.then(
      () => {
        finished = true;
      },
      (error: unknown) => {
        failure = error;
        finished = true;
      },
    );
    let peakWalBytes = 0;
    while (!finished) {
      await shipper.step();
      try {
        peakWalBytes = Math.max(peakWalBytes, statSync(`${database}-wal`).size);
      } catch {
        // No WAL file at this instant (truncated and not yet rewritten).
      }
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    if (failure) throw failure;
    await shipper.step();
    return { directory, shipper, writer, tap, peakWalBytes };
  } catch (error) {
    tap.close();
    throw error;
  }
}

async function expectRestoresMatch(
  scenario: Awaited<ReturnType<typeof runScenario>>,
  seed: number,
): Promise<number> {
  const { shipper, writer, directory } = scenario;
  const latest = writer.hashes.length - 1;
  // Every checkpoint of the application returned (a FULL/RESTART/TRUNCATE
  // waits for the tap's held reader and for a forced restart's write lock).
  // How long they waited depends on the machine's load, so it is not
  // asserted here: the app-overhead benchmark measures the application's
  // slowdown, and wal-bound.alone.test.ts the write lock's hold times.
  expect(Number.isFinite(writer.checkpoints.maxMs)).toBe(true);
  // One generation from the first commit: log commit k is the writer's commit k.
  expect(shipper.generations).toHaveLength(1);
  expect(shipper.shippedCommits).toBe(latest);
  const commits = [...sampleCommits(latest - 1, 20, seed), latest];
  for (const commit of commits) {
    const target = join(directory, `restored-${commit}.db`);
    const result = await shipper.restore(target, { commits: commit });
    expect(result.commitsApplied).toBe(commit);
    expect(integrityCheck(target)).toBe('ok');
    expect(hashOf(target, contentHash), `commit ${commit}`).toBe(writer.hashes[commit]);
  }
  return commits.length;
}

describe('SQLite tap with a writer in another process', () => {
  it('restores the latest and 20 random commits exactly (random checkpoints of every mode, FsStore)', async () => {
    const directory = workDirectory();
    const scenario = await runScenario({
      store: new FsStore({ root: join(directory, 'bucket') }),
      checkpoints: 'random',
      transactions: 400,
      seed: 11,
    });
    try {
      expect(await expectRestoresMatch(scenario, 11)).toBe(21);
      // The tap's own restart checkpoints ran and kept the WAL bounded.
      const restarts = scenario.shipper.checkpoints.filter((report) => report.walRestartable);
      expect(restarts.length).toBeGreaterThan(0);
      expect(scenario.peakWalBytes).toBeLessThan(8 * 1024 * 1024);
    } finally {
      scenario.tap.close();
    }
  });

  it('loses no commit while the application runs wal_checkpoint(TRUNCATE) continuously', async () => {
    const scenario = await runScenario({
      store: new MemoryStore(),
      checkpoints: 'truncate-loop',
      transactions: 300,
      seed: 23,
    });
    try {
      expect(await expectRestoresMatch(scenario, 23)).toBe(21);
    } finally {
      scenario.tap.close();
    }
  });

  const s3 = s3Store();
  it.skipIf(s3 === null)('ships to the local S3 server and restores exactly', async () => {
    const scenario = await runScenario({
      store: s3!,
      checkpoints: 'random',
      transactions: 150,
      seed: 5,
    });
    try {
      expect(await expectRestoresMatch(scenario, 5)).toBe(21);
    } finally {
      scenario.tap.close();
    }
  });

  it('meta: the comparison fails for a restore one commit off', async () => {
    const scenario = await runScenario({
      store: new MemoryStore(),
      checkpoints: 'random',
      transactions: 30,
      seed: 3,
    });
    try {
      const target = join(scenario.directory, 'off-by-one.db');
      await scenario.shipper.restore(target, { commits: 19 });
      expect(hashOf(target, contentHash)).not.toBe(scenario.writer.hashes[20]);
      expect(hashOf(target, contentHash)).toBe(scenario.writer.hashes[19]);
    } finally {
      scenario.tap.close();
    }
  });
});
