/**
 * The bucket the hostile-contents table starts from, and the tools to plant
 * hostile objects in it and to see exactly what an operation changed.
 *
 * Layout of one case's scratch directory (everything a case may touch is in
 * it, so a snapshot of it before and after shows any write outside the
 * places an operation is allowed to write):
 *
 * ```
 * <case>/store/            FsStore root (`file://<case>/store`): prefix `backup`, plus `other/…` outside it
 * <case>/source/           the framed store directory the workers back up
 * <case>/restore/target    restore's target (missing until a restore creates it)
 * <case>/restore/etc/passwd, <case>/victim   bait files a name such as ../../etc/passwd would reach
 * ```
 */
import {
  appendFile,
  copyFile,
  lstat,
  mkdir,
  readdir,
  readlink,
  symlink,
  utimes,
  writeFile,
} from 'node:fs/promises';
import { join, relative } from 'node:path';
import { BackupWorker } from '@x/backup-worker';
import { FakeClock } from '@x/lease';
import { latestKey, type Manifest, parseLatest, parseManifest } from '@x/manifest';
import { FramedDirSource } from '@x/source-framed';
import { FsStore, type ObjectStore } from '@x/store';
import { encodeFrame } from '@x/wal-segment';

export const PREFIX = 'backup';
/** An object outside the prefix that nothing may read into a restore, change or delete. */
export const OUTSIDE_KEY = 'other/secret';
export const OUTSIDE_BYTES = new TextEncoder().encode('not part of any backup\n');
/** The baseline's lineage id (written into the source directory before the first backup). */
export const LINEAGE = 'hostile-test-lineage';
/** A fixed wall-clock time for the fake clocks: 2026-11-29T00:00:00Z. */
export const NOW_MS = Date.UTC(2026, 10, 29);

export interface CasePaths {
  readonly root: string;
  readonly storeRoot: string;
  readonly source: string;
  readonly restoreParent: string;
  readonly target: string;
  readonly storeUrl: string;
}

export function casePaths(root: string): CasePaths {
  const storeRoot = join(root, 'store');
  return {
    root,
    storeRoot,
    source: join(root, 'source'),
    restoreParent: join(root, 'restore'),
    target: join(root, 'restore', 'target'),
    storeUrl: `file://${storeRoot}`,
  };
}

/** Commit `n`'s frame: payload `commit-n`. */
export function frame(n: number): Uint8Array {
  return encodeFrame(new TextEncoder().encode(`commit-${n}`));
}

/** Appends commits `from..to` to the source's `wal.bin`. */
export async function appendCommits(source: string, from: number, to: number): Promise<void> {
  const frames: Uint8Array[] = [];
  for (let n = from; n <= to; n += 1) frames.push(frame(n));
  await appendFile(join(source, 'wal.bin'), Buffer.concat(frames));
}

/** A worker on the case's source, out of process (the position comes from the disk), no lease. */
export function newWorker(store: ObjectStore, source: string, retain: number): BackupWorker {
  return new BackupWorker({
    store,
    prefix: PREFIX,
    source: new FramedDirSource({ directory: source }),
    clock: new FakeClock({ wallMs: NOW_MS }),
    manifestIntervalMs: 0,
    retain,
    operationTimeoutMs: 10_000,
  });
}

/** Commits in the baseline: 2 before the first backup, then one more before each of two later steps. */
export const BASELINE_COMMITS = 4;

/**
 * Builds the baseline in `root`: a framed store directory with a snapshot,
 * side files and WAL, backed up in three steps (three restore points,
 * commits 2, 3 and 4), LATEST naming the newest; and one object outside the
 * prefix.
 */
export async function buildBaseline(root: string): Promise<void> {
  const { paths, store } = await prepareCase(root);
  const worker = newWorker(store, paths.source, 0);
  await worker.runOnce();
  await appendCommits(paths.source, 3, 3);
  await worker.runOnce();
  await appendCommits(paths.source, 4, 4);
  await worker.runOnce();
}

/**
 * The case directory before any backup: the framed store directory (its
 * lineage, snapshot, side files and commits 1 and 2), the bait files, and
 * the store holding only the object outside the prefix.
 */
export async function prepareCase(root: string): Promise<{ paths: CasePaths; store: FsStore }> {
  const paths = casePaths(root);
  await mkdir(paths.source, { recursive: true });
  await mkdir(paths.restoreParent, { recursive: true });
  await mkdir(join(paths.restoreParent, 'etc'), { recursive: true });
  await writeFile(join(paths.restoreParent, 'etc', 'passwd'), 'bait: must never be written\n');
  await writeFile(join(root, 'victim'), 'bait: must never be written\n');
  await writeFile(join(paths.source, 'backup.lineage'), `${LINEAGE}\n`);
  await writeFile(join(paths.source, 'snapshot.bin'), 'snapshot-at-0');
  await writeFile(join(paths.source, 'roles.json'), '{"roles":[]}');
  await writeFile(join(paths.source, 'keys.json'), '{"keys":[]}');
  await writeFile(join(paths.source, 'wal.genesis'), 'genesis-0');
  await writeFile(join(paths.source, 'wal.bin'), new Uint8Array(0));
  await appendCommits(paths.source, 1, 2);
  const store = new FsStore({ root: paths.storeRoot, fsync: false });
  await store.put(OUTSIDE_KEY, OUTSIDE_BYTES);
  return { paths, store };
}

/**
 * Copies a baseline (or any case) directory to a fresh one: directories,
 * files (with their modification times, which the framed source's file
 * identities use) and links. Faster than `fs.cp` for many small files.
 */
export async function copyCase(from: string, to: string): Promise<void> {
  await mkdir(to);
  await Promise.all(
    (await readdir(from, { withFileTypes: true })).map(async (entry) => {
      const source = join(from, entry.name);
      const target = join(to, entry.name);
      if (entry.isDirectory()) await copyCase(source, target);
      else if (entry.isSymbolicLink()) await symlink(await readlink(source), target);
      else {
        await copyFile(source, target);
        const stats = await lstat(source);
        await utimes(target, stats.atime, stats.mtime);
      }
    }),
  );
}

/** The manifest LATEST names, parsed, with its key. */
export async function latestManifest(
  store: ObjectStore,
): Promise<{ key: string; manifest: Manifest }> {
  const latest = await store.get(latestKey(PREFIX));
  if (latest === null) throw new Error('the baseline has no LATEST');
  const key = parseLatest(latest.body, { prefix: PREFIX });
  const object = await store.get(key);
  if (object === null) throw new Error(`the baseline's LATEST names ${key}, which is missing`);
  return { key, manifest: parseManifest(object.body, { prefix: PREFIX }) };
}

// ── Seeing what changed ──────────────────────────────────────────────────────

/**
 * Every object in the store: key → its version and size. Every write makes
 * a new version (the store interface's rule), so a changed value is a write.
 */
export async function storeContents(store: ObjectStore): Promise<Map<string, string>> {
  const listing = await store.list('');
  return new Map(
    listing.objects.map((object) => [
      object.key,
      `${object.version.etag ?? ''}/${object.version.generation ?? ''}/${object.size}`,
    ]),
  );
}

export interface StoreChanges {
  readonly created: string[];
  readonly modified: string[];
  readonly deleted: string[];
}

export function storeChanges(
  before: Map<string, string>,
  after: Map<string, string>,
): StoreChanges {
  const created: string[] = [];
  const modified: string[] = [];
  const deleted: string[] = [];
  for (const [key, hash] of after) {
    const was = before.get(key);
    if (was === undefined) created.push(key);
    else if (was !== hash) modified.push(key);
  }
  for (const key of before.keys()) if (!after.has(key)) deleted.push(key);
  return { created: created.sort(), modified: modified.sort(), deleted: deleted.sort() };
}

/**
 * Every entry under `root` (not following links): relative path → type and,
 * for files, inode, size and modification time (any write changes one of
 * them); for links, where they point.
 */
export async function treeSnapshot(root: string): Promise<Map<string, string>> {
  const entries = new Map<string, string>();
  const walk = async (directory: string): Promise<void> => {
    for (const name of await readdir(directory)) {
      const path = join(directory, name);
      const stats = await lstat(path, { bigint: true });
      const at = relative(root, path);
      if (stats.isSymbolicLink()) entries.set(at, `link ${await readlink(path)}`);
      else if (stats.isDirectory()) {
        entries.set(at, 'directory');
        await walk(path);
      } else if (stats.isFile())
        entries.set(at, `file ${stats.ino}:${stats.size}:${stats.mtimeNs}:${stats.ctimeNs}`);
      else entries.set(at, 'other');
    }
  };
  await walk(root);
  return entries;
}

/** Paths (relative to the case root) that were added, removed or changed. */
export function treeChanges(before: Map<string, string>, after: Map<string, string>): string[] {
  const changed = new Set<string>();
  for (const [path, what] of after) if (before.get(path) !== what) changed.add(path);
  for (const path of before.keys()) if (!after.has(path)) changed.add(path);
  return [...changed].sort();
}
