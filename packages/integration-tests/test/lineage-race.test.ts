/**
 * Several replicas of one store (two workers on one directory, each with its
 * own prefix) racing to create the lineage end with one lineage: the file on
 * disk, and every prefix's manifests, name the same one.
 */
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { BackupWorker } from '@x/backup-worker';
import { FakeClock } from '@x/lease';
import { FramedDirSource, LINEAGE_FILE } from '@x/source-framed';
import { SqliteSource, sqliteSidecarFiles } from '@x/source-sqlite';
import { MemoryStore } from '@x/store';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { checkBucket } from './helpers/check-bucket.ts';
import { FramedTestEngine } from './helpers/framed-engine.ts';

const ROUNDS = 50;

let root: string;

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'backup-worker-lineage-race-'));
});
afterEach(() => rm(root, { recursive: true, force: true }));

describe('FramedDirSource.createLineage', () => {
  it(`two concurrent creations with different ids agree on the id on disk (${ROUNDS} rounds)`, async () => {
    const engine = await FramedTestEngine.create(join(root, 'store'));
    const first = new FramedDirSource({ directory: engine.directory });
    const second = new FramedDirSource({ directory: engine.directory });
    for (let round = 0; round < ROUNDS; round += 1) {
      await rm(engine.path(LINEAGE_FILE), { force: true });
      await Promise.all([first.createLineage(`a-${round}`), second.createLineage(`b-${round}`)]);
      const onDisk = (await readFile(engine.path(LINEAGE_FILE), 'utf8')).trim();
      expect([`a-${round}`, `b-${round}`]).toContain(onDisk);
      expect(await first.readLineage()).toBe(onDisk);
      expect(await second.readLineage()).toBe(onDisk);
    }
    // No temporary file is left behind.
    expect((await readdir(engine.directory)).filter((name) => name.includes('.tmp'))).toEqual([]);
  });

  it('keeps a lineage already on disk', async () => {
    const engine = await FramedTestEngine.create(join(root, 'store'));
    const source = new FramedDirSource({ directory: engine.directory });
    await source.createLineage('first');
    await source.createLineage('second');
    expect(await source.readLineage()).toBe('first');
  });
});

describe('SqliteSource.createLineage', () => {
  it(`two concurrent creations with different ids agree on the id on disk (${ROUNDS} rounds)`, async () => {
    const path = join(root, 'app.db');
    const database = new DatabaseSync(path);
    database.exec('PRAGMA journal_mode=WAL; CREATE TABLE t (x);');
    const first = SqliteSource.open({ path, captureIntervalMs: 0 });
    const second = SqliteSource.open({ path, captureIntervalMs: 0 });
    try {
      for (let round = 0; round < ROUNDS; round += 1) {
        await rm(sqliteSidecarFiles(path).lineage, { force: true });
        await Promise.all([first.createLineage(`a-${round}`), second.createLineage(`b-${round}`)]);
        const onDisk = (await readFile(sqliteSidecarFiles(path).lineage, 'utf8')).trim();
        expect([`a-${round}`, `b-${round}`]).toContain(onDisk);
        expect(await first.readLineage()).toBe(onDisk);
        expect(await second.readLineage()).toBe(onDisk);
      }
      expect((await readdir(root)).filter((name) => name.includes('.tmp'))).toEqual([]);
    } finally {
      await first.close();
      await second.close();
      database.close();
    }
  });
});

/**
 * A FramedDirSource whose first `readLineage` waits until every replica has
 * read: each then sees no lineage and creates one, the race under test.
 */
function racingSources(directory: string, count: number): FramedDirSource[] {
  let arrived = 0;
  let release!: () => void;
  const allRead = new Promise<void>((resolve) => {
    release = resolve;
  });
  class RacingSource extends FramedDirSource {
    #first = true;
    override async readLineage(): Promise<string | null> {
      const lineage = await super.readLineage();
      if (this.#first) {
        this.#first = false;
        arrived += 1;
        if (arrived === count) release();
        await allRead;
      }
      return lineage;
    }
  }
  return Array.from({ length: count }, () => new RacingSource({ directory }));
}

describe('two workers on one store directory, two prefixes', () => {
  it("both prefixes' manifests name the lineage on disk", async () => {
    const engine = await FramedTestEngine.create(join(root, 'store'));
    await engine.commit(2);
    await engine.snapshot();
    await engine.commit(3);
    const store = new MemoryStore();
    const prefixes = ['backups/replica-a', 'backups/replica-b'];
    const sources = racingSources(engine.directory, prefixes.length);
    const workers = prefixes.map(
      (prefix, index) =>
        new BackupWorker({
          store,
          prefix,
          source: sources[index]!,
          clock: new FakeClock(),
          manifestIntervalMs: 0,
        }),
    );
    await Promise.all(workers.map((worker) => worker.runOnce()));
    const onDisk = (await readFile(engine.path(LINEAGE_FILE), 'utf8')).trim();
    for (const prefix of prefixes) {
      const check = await checkBucket(store, prefix);
      expect(check.latest, prefix).not.toBeNull();
      for (const manifest of check.manifests.values())
        expect(manifest.lineage, prefix).toBe(onDisk);
    }
  });
});
