/**
 * The suites that hold a set of fixture prefixes written by an earlier
 * release (`fixtures/<set>/`, see `fixtures/README.md`) to what that
 * release's own `backupd ls` and `backupd restore` said: restored with the
 * current code to the same hashes, verified deep, listed alike, refused
 * when one stored byte changed, and continued by the current worker. An
 * encrypted set is read with the committed test key it was written to.
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
import { type AgeIdentity, parseIdentityFile } from '@x/age-envelope';
import { BackupWorker, type EncryptionOptions } from '@x/backup-worker';
import { FakeClock } from '@x/lease';
import { parseManifest } from '@x/manifest';
import { listRestorePoints, ObjectCorruptError, restore, verify } from '@x/restore';
import { restoreFramedStore } from '@x/source-framed';
import { SqliteSource, sqliteContentHash, sqliteMaterializer } from '@x/source-sqlite';
import { FsStore } from '@x/store';
import { readSegmentObjectHeader, type SegmentObjectHeader } from '@x/wal-segment';
import { afterEach, describe, expect, it } from 'vitest';

const BACKUPD_BIN = fileURLToPath(new URL('../../../apps/backupd/bin/backupd.js', import.meta.url));

interface RestorePointRecord {
  readonly manifestKey: string;
  readonly commitSeq: number;
  readonly restorableFrom: number;
  readonly walGeneration: number;
  readonly latest: boolean;
}

interface SqliteState {
  readonly commitSeq: number;
  readonly rows: number;
  readonly contentHash: string;
}

interface SqliteExpected {
  readonly release: string;
  readonly prefix: string;
  readonly restorePoints: readonly RestorePointRecord[];
  readonly latest: SqliteState;
  readonly earlier: SqliteState;
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
  /** `backupd restore --commit N` of a commit strictly inside a compacted object, when the set has one. */
  readonly insideCompacted?: FramedState;
}

/** What kind of stored object a file of the `FsStore` layout holds, by its key's ending. */
type KeyKind = 'segment' | 'snapshot' | 'seg' | 'snap' | 'L1' | 'L2';

function keyKindOf(file: string): KeyKind | undefined {
  const compacted = /\.L(\d)\.\d{20}-\d{20}\.seg~obj$/.exec(file);
  if (compacted) return `L${compacted[1]}` as KeyKind;
  const match = /\.(segment|snapshot|seg|snap)~obj$/.exec(file);
  return match ? (match[1] as KeyKind) : undefined;
}

function filesUnder(directory: string): string[] {
  return readdirSync(directory, { recursive: true, encoding: 'utf8' }).sort();
}

export interface ReleasePrefixSet {
  /** The directory under `fixtures/`: `old-release`, `pre-patch-release`, `encrypted`. */
  readonly set: string;
  /** The commit whose code wrote the set (recorded in each expected.json). */
  readonly release: string;
  /** How the set is named in test titles: `the previous release`. */
  readonly title: string;
  /** The key kinds each prefix holds: the layout the set pins. */
  readonly sqliteKeyKinds: readonly KeyKind[];
  /** Absent: the set has no framed prefix (the framed engine cannot encrypt). */
  readonly framedKeyKinds?: readonly KeyKind[];
  /**
   * Whether the latest restore point of each prefix names a compacted
   * object, so the restores of the latest state read one.
   */
  readonly latestNamesCompacted: boolean;
  /**
   * The age identity file (`age-keygen`'s format) in the set's directory
   * that opens its encrypted objects; every read and the continuing worker
   * use it. Absent: the objects are in clear.
   */
  readonly identityFile?: string;
}

/** The age identities of a set's identity file, and the file's path. */
export function releaseIdentities(
  set: string,
  identityFile: string,
): {
  path: string;
  identities: AgeIdentity[];
} {
  const path = fileURLToPath(new URL(`../fixtures/${set}/${identityFile}`, import.meta.url));
  return { path, identities: parseIdentityFile(readFileSync(path, 'utf8'), path) };
}

/**
 * The header of every snapshot and log envelope (`.snap`, `.seg`, compacted
 * ones included) under `prefix` of an `FsStore` root, by key, read through
 * the store (its files carry a header line of their own).
 */
export async function envelopeHeaders(
  root: string,
  prefix: string,
): Promise<Map<string, SegmentObjectHeader>> {
  const store = new FsStore({ root });
  const headers = new Map<string, SegmentObjectHeader>();
  for (const file of filesUnder(join(root, prefix))) {
    if (!/\.(seg|snap)~obj$/.test(file)) continue;
    const key = `${prefix}/${file.slice(0, -'~obj'.length)}`;
    headers.set(key, readSegmentObjectHeader((await store.get(key))!.body));
  }
  return headers;
}

/** Registers the SQLite suite, and the framed one when the set has a framed prefix, for one set. */
export function describeReleasePrefixes(options: ReleasePrefixSet): void {
  const fixtures = fileURLToPath(new URL(`../fixtures/${options.set}/`, import.meta.url));
  const key =
    options.identityFile === undefined
      ? undefined
      : releaseIdentities(options.set, options.identityFile);
  // Spread into every read: nothing when the set is in clear.
  const keyOptions: { identities?: AgeIdentity[] } =
    key === undefined ? {} : { identities: key.identities };

  function expected<T>(engine: 'sqlite' | 'framed'): T {
    return JSON.parse(readFileSync(join(fixtures, engine, 'expected.json'), 'utf8')) as T;
  }

  const directories: string[] = [];
  afterEach(() => {
    for (const directory of directories.splice(0))
      rmSync(directory, { recursive: true, force: true });
  });

  function tempDir(label: string): string {
    const directory = mkdtempSync(join(tmpdir(), `${options.set}-${label}-`));
    directories.push(directory);
    return directory;
  }

  /** A private copy of a fixture prefix's store root, and a store on it. */
  function copyOfPrefix(engine: 'sqlite' | 'framed'): { root: string; store: FsStore } {
    const root = join(tempDir(`${engine}-prefix`), 'root');
    cpSync(join(fixtures, engine, 'prefix'), root, { recursive: true });
    return { root, store: new FsStore({ root }) };
  }

  /** The key kinds of the objects under a prefix, and whether its latest restore point names a compacted one. */
  async function layoutOf(
    engine: 'sqlite' | 'framed',
    prefix: string,
  ): Promise<{ kinds: KeyKind[]; latestNamesCompacted: boolean }> {
    const root = join(fixtures, engine, 'prefix');
    const kinds = new Set<KeyKind>();
    for (const file of filesUnder(join(root, prefix))) {
      const kind = keyKindOf(file);
      if (kind) kinds.add(kind);
    }
    const store = new FsStore({ root });
    const latest = (await listRestorePoints(store, prefix, keyOptions)).find(
      (point) => point.latest,
    )!;
    const manifest = parseManifest((await store.get(latest.manifestKey))!.body, { prefix });
    return {
      kinds: [...kinds].sort(),
      latestNamesCompacted: manifest.segments.some((segment) => /\.L\d\./.test(segment.key)),
    };
  }

  /**
   * The file names (`…~obj`) of the log objects the latest restore point
   * names: a changed byte elsewhere (a fine segment a compacted object
   * replaced, kept for the exact window) is not read by a restore of it.
   */
  async function latestSegmentKeys(store: FsStore, prefix: string): Promise<Set<string>> {
    const latest = (await listRestorePoints(store, prefix, keyOptions)).find(
      (point) => point.latest,
    )!;
    const manifest = parseManifest((await store.get(latest.manifestKey))!.body, { prefix });
    return new Set(manifest.segments.map((segment) => `${segment.key.split('/').pop()}~obj`));
  }

  it(`${options.title}: the fixtures are of ${options.release} and hold its layout`, async () => {
    const engines: ['sqlite' | 'framed', readonly KeyKind[]][] = [
      ['sqlite', options.sqliteKeyKinds],
    ];
    if (options.framedKeyKinds) engines.push(['framed', options.framedKeyKinds]);
    for (const [engine, kinds] of engines) {
      const want = expected<SqliteExpected | FramedExpected>(engine);
      expect(want.release).toBe(options.release);
      expect(await layoutOf(engine, want.prefix), engine).toEqual({
        kinds: [...kinds].sort(),
        latestNamesCompacted: options.latestNamesCompacted,
      });
    }
  });

  describe(`a SQLite prefix of ${options.title}`, () => {
    const want = expected<SqliteExpected>('sqlite');
    const materializer = sqliteMaterializer({ databaseName: 'app.db' });

    it('restores the latest state and an earlier commit to the hashes that release restored', async () => {
      const { store } = copyOfPrefix('sqlite');

      const latestDir = tempDir('sqlite-latest');
      const latest = await restore(store, want.prefix, latestDir, { materializer, ...keyOptions });
      expect(latest.commitSeq).toBe(want.latest.commitSeq);
      expect(hashOfDatabase(join(latestDir, 'app.db'))).toEqual({
        rows: want.latest.rows,
        contentHash: want.latest.contentHash,
      });

      const earlierDir = tempDir('sqlite-earlier');
      const earlier = await restore(store, want.prefix, earlierDir, {
        target: { kind: 'commit', commitSeq: want.earlier.commitSeq },
        materializer,
        ...keyOptions,
      });
      expect(earlier.commitSeq).toBe(want.earlier.commitSeq);
      expect(hashOfDatabase(join(earlierDir, 'app.db'))).toEqual({
        rows: want.earlier.rows,
        contentHash: want.earlier.contentHash,
      });
    });

    it('verifies deep without a problem and lists the restore points that release listed', async () => {
      const { store } = copyOfPrefix('sqlite');
      const report = await verify(store, want.prefix, { deep: true, ...keyOptions });
      expect(report.problems).toEqual([]);
      expect(report.latest.problems).toEqual([]);
      expect(report.manifests.filter((m) => m.status !== 'ok')).toEqual([]);
      expect(report.ok).toBe(true);

      const points = await listRestorePoints(store, want.prefix, keyOptions);
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
      const keyArguments = key === undefined ? [] : ['--age-identity-file', key.path];
      const result = spawnSync(
        process.execPath,
        [BACKUPD_BIN, 'restore', `file://${root}`, target, ...keyArguments],
        { env, encoding: 'utf8', timeout: 60_000 },
      );
      expect(result.status, `${result.stdout}\n${result.stderr}`).toBe(0);
      expect(hashOfDatabase(target).contentHash).toBe(want.latest.contentHash);
    });

    const latestGeneration = want.restorePoints.find((point) => point.latest)!.walGeneration;
    const corruptible: [string, (name: string) => boolean][] = [
      ['a segment', (name) => /\.seg(ment)?~obj$/.test(name) && !/\.L\d\./.test(name)],
    ];
    if (options.latestNamesCompacted)
      corruptible.push(['a compacted object', (name) => /\.L\d\..*\.seg~obj$/.test(name)]);
    for (const [what, pick] of corruptible)
      it(`refuses a copy with one byte of ${what} changed, leaving the target empty`, async () => {
        const { root, store } = copyOfPrefix('sqlite');
        const named = await latestSegmentKeys(store, want.prefix);
        corruptOneByte(
          anObjectFile(
            root,
            want.prefix,
            latestGeneration,
            (name) => pick(name) && named.has(name),
          ),
        );
        const target = tempDir('sqlite-corrupt');
        const refusal = await restore(store, want.prefix, target, {
          materializer,
          ...keyOptions,
        }).catch((error: unknown) => error);
        expect(ObjectCorruptError.isInstance(refusal), String(refusal)).toBe(true);
        expect(readdirSync(target)).toEqual([]);
        const report = await verify(store, want.prefix, { deep: true, ...keyOptions });
        expect(report.ok).toBe(false);
      });

    it('is continued by the current worker from a database restored from it', async () => {
      const { root, store } = copyOfPrefix('sqlite');
      const directory = tempDir('sqlite-continue');
      const restored = await restore(store, want.prefix, directory, {
        materializer,
        ...keyOptions,
      });
      const path = join(directory, 'app.db');

      // An encrypted set is continued encrypted to its own recipient, so the
      // same key reads the old objects and the new.
      const encryption: { encryption?: EncryptionOptions } =
        key === undefined
          ? {}
          : {
              encryption: {
                recipients: key.identities.map((identity) => identity.recipient),
                identities: key.identities,
              },
            };
      const source = SqliteSource.open({ path, captureIntervalMs: 0 });
      const worker = new BackupWorker({
        store,
        prefix: want.prefix,
        source,
        clock: new FakeClock(),
        manifestIntervalMs: 0,
        ...encryption,
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
      const result = await restore(store, want.prefix, again, { materializer, ...keyOptions });
      // A new generation counts one commit for its break (the source's
      // documented rule), then the three commits.
      expect(result.commitSeq).toBe(want.latest.commitSeq + 1 + 3);
      expect(hashOfDatabase(join(again, 'app.db'))).toEqual(newState);
      // Adopted, not overwritten: the new restore points have a lineage of
      // their own beside the old release's, which all still list as they did.
      const points = await listRestorePoints(store, want.prefix, keyOptions);
      const newest = points.find((point) => point.latest)!;
      expect(newest.lineage).toBeDefined();
      expect(newest.lineage).not.toBe(restored.lineage);
      expect(newest.walGeneration).toBeGreaterThan(latestGeneration);
      expect(
        points.filter((point) => point.lineage === restored.lineage).map((p) => p.manifestKey),
      ).toEqual(want.restorePoints.map((point) => point.manifestKey));
      // The old restore points still restore.
      const old = tempDir('sqlite-old-still');
      await restore(store, want.prefix, old, {
        target: { kind: 'commit', commitSeq: want.earlier.commitSeq },
        materializer,
        ...keyOptions,
      });
      expect(hashOfDatabase(join(old, 'app.db')).contentHash).toBe(want.earlier.contentHash);
      if (key !== undefined) {
        // The new generation's snapshot and log are sealed to the set's recipient too.
        const newObjects = [...(await envelopeHeaders(root, want.prefix))].filter(
          ([, header]) => header.generation === newest.walGeneration,
        );
        expect(newObjects.length).toBeGreaterThan(0);
        for (const [name, header] of newObjects)
          expect(
            [header.encryption, header.recipients.map((recipient) => recipient.text)],
            name,
          ).toEqual(['age-x25519', key.identities.map((identity) => identity.recipient.text)]);
      }
    });
  });

  if (options.framedKeyKinds === undefined) return;
  describe(`a framed prefix of ${options.title}`, () => {
    const want = expected<FramedExpected>('framed');

    const states: ['latest' | 'earlier' | 'insideCompacted', FramedState][] = [
      ['latest', want.latest],
      ['earlier', want.earlier],
    ];
    if (want.insideCompacted) states.push(['insideCompacted', want.insideCompacted]);
    for (const [which, state] of states)
      it(`restores the ${which} state to the files that release restored`, async () => {
        const { store } = copyOfPrefix('framed');
        const target = tempDir(`framed-${which}`);
        const result = await restoreFramedStore(
          store,
          want.prefix,
          target,
          which === 'latest'
            ? {}
            : which === 'earlier'
              ? { target: { kind: 'restore-point', manifestKey: state.manifestKey } }
              : { target: { kind: 'commit', commitSeq: state.commitSeq } },
        );
        expect(result.manifestKey).toBe(state.manifestKey);
        expect(result.commitSeq).toBe(state.commitSeq);
        expect(restoredFiles(target)).toEqual(state.files);
        const parent = JSON.parse(readFileSync(join(target, 'backup.parent'), 'utf8')) as object;
        expect(parent).toMatchObject(state.parent);
      });

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
 * The object file of the second commit-log object `pick` accepts in
 * `walGeneration` of the copy (the FsStore keeps key `k` at `k~obj`).
 */
function anObjectFile(
  root: string,
  prefix: string,
  walGeneration: number,
  pick: (name: string) => boolean,
): string {
  const generation = join(root, prefix, 'wal', String(walGeneration).padStart(20, '0'));
  const names = readdirSync(generation).filter(pick).sort();
  const name = names[1] ?? names[0];
  if (!name) throw new Error(`no such object under ${generation}`);
  return join(generation, name);
}

/** Flips one byte near the end of an object file (its payload, past the store's header). */
function corruptOneByte(path: string): void {
  const bytes = readFileSync(path);
  const at = bytes.length - 3;
  bytes[at] = (bytes[at] ?? 0) ^ 0xff;
  writeFileSync(path, bytes);
}
