/**
 * Formats are forever: prefixes written by the previous release (commit
 * 390b4a8, its own `backupd replicate` and BackupWorker; see
 * `fixtures/README.md`) restore with the current code to exactly what that
 * release's restore produced, verify clean, list the same restore points, and
 * take new commits from the current worker.
 *
 * Each test works on a copy of the committed prefix: nothing here writes to
 * the fixture.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { fileURLToPath } from 'node:url';
import { BackupWorker } from '@x/backup-worker';
import { FakeClock } from '@x/lease';
import { listRestorePoints, ObjectCorruptError, restore, verify } from '@x/restore';
import { restoreFramedStore } from '@x/source-framed';
import { SqliteSource, sqliteContentHash, sqliteMaterializer } from '@x/source-sqlite';
import { FsStore } from '@x/store';
import { afterEach, describe, expect, it } from 'vitest';

const FIXTURES = fileURLToPath(new URL('../fixtures/old-release/', import.meta.url));
const BACKUPD_BIN = fileURLToPath(new URL('../../../apps/backupd/bin/backupd.js', import.meta.url));

interface RestorePointRecord {
  readonly manifestKey: string;
  readonly commitSeq: number;
  readonly restorableFrom: number;
  readonly walGeneration: number;
  readonly latest: boolean;
}

interface SqliteExpected {
  readonly release: string;
  readonly prefix: string;
  readonly restorePoints: readonly RestorePointRecord[];
  readonly latest: {
    readonly commitSeq: number;
    readonly rows: number;
    readonly contentHash: string;
  };
  readonly earlier: {
    readonly commitSeq: number;
    readonly rows: number;
    readonly contentHash: string;
  };
}

interface FramedState {
  readonly manifestKey: string;
  readonly commitSeq: number;
  /** sha256 of each file the old release's restore wrote, `backup.parent` aside. */
  readonly files: Readonly<Record<string, string>>;
  readonly parent: {
    readonly lineage: string;
    readonly manifestKey: string;
    readonly commitSeq: number;
  };
}

interface FramedExpected {
  readonly release: string;
  readonly prefix: string;
  readonly restorePoints: readonly RestorePointRecord[];
  readonly latest: FramedState;
  readonly earlier: FramedState;
}

function expected<T>(engine: 'sqlite' | 'framed'): T {
  return JSON.parse(readFileSync(join(FIXTURES, engine, 'expected.json'), 'utf8')) as T;
}

const directories: string[] = [];
afterEach(() => {
  for (const directory of directories.splice(0))
    rmSync(directory, { recursive: true, force: true });
});

function tempDir(label: string): string {
  const directory = mkdtempSync(join(tmpdir(), `old-release-${label}-`));
  directories.push(directory);
  return directory;
}

/** A private copy of a fixture prefix's store root, and a store on it. */
function copyOfPrefix(engine: 'sqlite' | 'framed'): { root: string; store: FsStore } {
  const root = join(tempDir(`${engine}-prefix`), 'root');
  cpSync(join(FIXTURES, engine, 'prefix'), root, { recursive: true });
  return { root, store: new FsStore({ root }) };
}

function hashOfDatabase(path: string): { rows: number; contentHash: string } {
  const database = new DatabaseSync(path, { readOnly: true });
  try {
    const { n } = database.prepare('SELECT count(*) AS n FROM item').get() as { n: number };
    return { rows: n, contentHash: sqliteContentHash(database) };
  } finally {
    database.close();
  }
}

function sha256(path: string): string {
  return createHash('sha256').update(readFileSync(path)).digest('hex');
}

/** The files of a restored framed directory with their hashes, the parent record aside. */
function restoredFiles(directory: string): Record<string, string> {
  return Object.fromEntries(
    readdirSync(directory)
      .filter((name) => name !== 'backup.parent')
      .sort()
      .map((name) => [name, sha256(join(directory, name))]),
  );
}

/**
 * The object file of the second WAL segment of `walGeneration` in the copy
 * (the FsStore keeps key `k` at `k~obj`).
 */
function aSegmentFile(root: string, prefix: string, walGeneration: number): string {
  const generation = join(root, prefix, 'wal', String(walGeneration).padStart(20, '0'));
  const name = readdirSync(generation)
    .filter((entry) => entry.endsWith('.segment~obj'))
    .sort()[1];
  if (!name) throw new Error(`no segment under ${generation}`);
  return join(generation, name);
}

/** Flips one byte near the end of an object file (its payload, past the store's header). */
function corruptOneByte(path: string): void {
  const bytes = readFileSync(path);
  const at = bytes.length - 3;
  bytes[at] = (bytes[at] ?? 0) ^ 0xff;
  writeFileSync(path, bytes);
}

describe('a SQLite prefix of the previous release', () => {
  const want = expected<SqliteExpected>('sqlite');
  const materializer = sqliteMaterializer({ databaseName: 'app.db' });

  it('restores the latest state and an earlier commit to the hashes that release restored', async () => {
    const { store } = copyOfPrefix('sqlite');

    const latestDir = tempDir('sqlite-latest');
    const latest = await restore(store, want.prefix, latestDir, { materializer });
    expect(latest.commitSeq).toBe(want.latest.commitSeq);
    expect(hashOfDatabase(join(latestDir, 'app.db'))).toEqual({
      rows: want.latest.rows,
      contentHash: want.latest.contentHash,
    });

    const earlierDir = tempDir('sqlite-earlier');
    const earlier = await restore(store, want.prefix, earlierDir, {
      commitSeq: want.earlier.commitSeq,
      materializer,
    });
    expect(earlier.commitSeq).toBe(want.earlier.commitSeq);
    expect(hashOfDatabase(join(earlierDir, 'app.db'))).toEqual({
      rows: want.earlier.rows,
      contentHash: want.earlier.contentHash,
    });
  });

  it('verifies deep without a problem and lists the restore points that release listed', async () => {
    const { store } = copyOfPrefix('sqlite');
    const report = await verify(store, want.prefix, { deep: true });
    expect(report.problems).toEqual([]);
    expect(report.latest.problems).toEqual([]);
    expect(report.manifests.filter((m) => m.status !== 'ok')).toEqual([]);
    expect(report.ok).toBe(true);

    const points = await listRestorePoints(store, want.prefix);
    expect(
      points.map(({ manifestKey, commitSeq, restorableFrom, walGeneration, latest, status }) => ({
        manifestKey,
        commitSeq,
        restorableFrom,
        walGeneration,
        latest,
        status,
      })),
    ).toEqual(want.restorePoints.map((point) => ({ ...point, status: 'ok' })));
    // Two generations: the fixture covers a second snapshot, not only one log.
    expect(new Set(points.map((point) => point.walGeneration)).size).toBeGreaterThan(1);
  });

  it('restores through the backupd command', () => {
    const { root } = copyOfPrefix('sqlite');
    const target = join(tempDir('sqlite-cli'), 'restored.db');
    const env: Record<string, string | undefined> = {};
    for (const [name, value] of Object.entries(process.env))
      if (!/^(AWS_|AZURE_|GOOGLE_|GCLOUD_|BACKUPD_)/.test(name)) env[name] = value;
    env.BACKUPD_CPU_PRIORITY = 'normal';
    const result = spawnSync(process.execPath, [BACKUPD_BIN, 'restore', `file://${root}`, target], {
      env,
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(result.status, `${result.stdout}\n${result.stderr}`).toBe(0);
    expect(hashOfDatabase(target).contentHash).toBe(want.latest.contentHash);
  });

  it('refuses a copy with one byte of a segment changed, leaving the target empty', async () => {
    const { root, store } = copyOfPrefix('sqlite');
    const latestPoint = want.restorePoints.find((point) => point.latest)!;
    corruptOneByte(aSegmentFile(root, want.prefix, latestPoint.walGeneration));
    const target = tempDir('sqlite-corrupt');
    const refusal = await restore(store, want.prefix, target, { materializer }).catch(
      (error: unknown) => error,
    );
    expect(ObjectCorruptError.isInstance(refusal), String(refusal)).toBe(true);
    expect(readdirSync(target)).toEqual([]);
    const report = await verify(store, want.prefix, { deep: true });
    expect(report.ok).toBe(false);
  });

  it('is continued by the current worker from a database restored from it', async () => {
    const { store } = copyOfPrefix('sqlite');
    const directory = tempDir('sqlite-continue');
    const restored = await restore(store, want.prefix, directory, { materializer });
    const path = join(directory, 'app.db');

    const source = SqliteSource.open({ path, captureIntervalMs: 0 });
    const worker = new BackupWorker({
      store,
      prefix: want.prefix,
      source,
      clock: new FakeClock(),
      manifestIntervalMs: 0,
    });
    const application = new DatabaseSync(path, { timeout: 5000 });
    let newState: { rows: number; contentHash: string };
    try {
      await worker.runOnce();
      for (let commit = 0; commit < 3; commit += 1) {
        application
          .prepare('INSERT INTO item (commit_no, label, body) VALUES (?, ?, ?)')
          .run(1000 + commit, `after-${commit}`, new Uint8Array([commit, 1, 2, 3]));
        await worker.runOnce();
      }
      await worker.runOnce();
      newState = { rows: want.latest.rows + 3, contentHash: sqliteContentHash(application) };
    } finally {
      application.close();
      await source.close?.();
    }

    // The prefix now restores to the new state, under a lineage adopted from
    // the old one (its parent record names the old latest restore point).
    const again = tempDir('sqlite-continued');
    const result = await restore(store, want.prefix, again, { materializer });
    // A new generation counts one commit for its break (the source's
    // documented rule), then the three commits.
    expect(result.commitSeq).toBe(want.latest.commitSeq + 1 + 3);
    expect(hashOfDatabase(join(again, 'app.db'))).toEqual(newState);
    // Adopted, not overwritten: the new restore points have a lineage of
    // their own beside the old release's, which all still list as they did.
    const points = await listRestorePoints(store, want.prefix);
    const newest = points.find((point) => point.latest)!;
    expect(newest.lineage).toBeDefined();
    expect(newest.lineage).not.toBe(restored.lineage);
    expect(
      points.filter((point) => point.lineage === restored.lineage).map((p) => p.manifestKey),
    ).toEqual(want.restorePoints.map((point) => point.manifestKey));
    // The old restore points still restore.
    const old = tempDir('sqlite-old-still');
    await restore(store, want.prefix, old, { commitSeq: want.earlier.commitSeq, materializer });
    expect(hashOfDatabase(join(old, 'app.db')).contentHash).toBe(want.earlier.contentHash);
  });
});

describe('a framed prefix of the previous release', () => {
  const want = expected<FramedExpected>('framed');

  for (const which of ['latest', 'earlier'] as const) {
    it(`restores the ${which} restore point to the files that release restored`, async () => {
      const { store } = copyOfPrefix('framed');
      const state = want[which];
      const target = tempDir(`framed-${which}`);
      const result = await restoreFramedStore(
        store,
        want.prefix,
        target,
        which === 'latest' ? {} : { manifestKey: state.manifestKey },
      );
      expect(result.manifestKey).toBe(state.manifestKey);
      expect(result.commitSeq).toBe(state.commitSeq);
      expect(restoredFiles(target)).toEqual(state.files);
      const parent = JSON.parse(readFileSync(join(target, 'backup.parent'), 'utf8')) as object;
      expect(parent).toMatchObject(state.parent);
    });
  }

  it('verifies deep without a problem and lists the restore points that release listed', async () => {
    const { store } = copyOfPrefix('framed');
    const report = await verify(store, want.prefix, { deep: true });
    expect(report.ok, JSON.stringify(report.manifests)).toBe(true);
    const points = await listRestorePoints(store, want.prefix);
    expect(points.map((point) => [point.manifestKey, point.commitSeq, point.latest])).toEqual(
      want.restorePoints.map((point) => [point.manifestKey, point.commitSeq, point.latest]),
    );
  });
});
