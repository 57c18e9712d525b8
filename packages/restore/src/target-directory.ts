/**
 * The target directory of a restore: checks before anything is written, a
 * staging directory inside it, and the move of verified files into place.
 * Files are created by plain name in staging (exclusive, never following a
 * link) and renamed into the target on the same filesystem, so each appears
 * whole or not at all. Until {@link commitStaged} starts, {@link discardStaging}
 * restores the target as it was (removing it when restore created it). Each
 * file is fsynced before its rename, the directory after; the parent record
 * goes last. Not one atomic step for all files, nor guarded against a
 * concurrent restore: package README, _Guarantees and limits_.
 */
import { constants } from 'node:fs';
import { lstat, mkdir, mkdtemp, open, readdir, rename, rm, rmdir, unlink } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { RestoreTargetNotEmptyError, RestoreTargetUnsafeError } from './restore-errors.ts';
import { placedNameProblem } from './restore-point-checks.ts';

/** Staging directories are named with this and a random suffix. */
export const STAGING_PREFIX = '.restore-staging-';

/** Create-exclusive, write-only, never through a symbolic link. */
const CREATE_FLAGS =
  constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;
/** Restored files may hold a database's data: owner read/write only. */
const FILE_MODE = 0o600;

export interface PreparedTarget {
  /** Absolute path of the target directory. */
  readonly directory: string;
  /** Whether the directory exists yet (restore creates it when staging starts). */
  readonly exists: boolean;
  /** Entries found in it (with `force`). */
  readonly entries: readonly string[];
}

/**
 * Checks the target before anything is read from the bucket: it is a
 * directory (or does not exist yet), not a symbolic link, and empty — or,
 * with `force`, holds no symbolic link.
 * @throws RestoreTargetUnsafeError, RestoreTargetNotEmptyError
 */
export async function prepareTarget(
  targetDir: string,
  force: boolean,
  /** For a layout that shares its directory: the names that count (see `RestoreMaterializer.sharesDirectory`). */
  occupies?: (name: string) => boolean,
  /** The layout's companion directory: its entries count as `<companion>/<name>`. */
  companion?: string,
): Promise<PreparedTarget> {
  const directory = resolve(targetDir);
  let stats: Awaited<ReturnType<typeof lstat>>;
  try {
    stats = await lstat(directory);
  } catch (error) {
    if (isCode(error, 'ENOENT')) return { directory, exists: false, entries: [] };
    throw error;
  }
  if (stats.isSymbolicLink()) {
    throw new RestoreTargetUnsafeError(
      directory,
      'it is a symbolic link; pass the directory it points to',
    );
  }
  if (!stats.isDirectory()) throw new RestoreTargetUnsafeError(directory, 'it is not a directory');
  const all = await readdir(directory, { withFileTypes: true });
  let entries = all.map((entry) => ({ name: entry.name, link: entry.isSymbolicLink() }));
  const companionEntry = all.find((entry) => entry.name === companion);
  if (companion !== undefined && companionEntry !== undefined) {
    if (!companionEntry.isDirectory())
      throw new RestoreTargetUnsafeError(
        directory,
        `${companion} in it is ${companionEntry.isSymbolicLink() ? 'a symbolic link' : 'not a directory'}, which a restore could write through`,
      );
    entries = entries.filter((entry) => entry.name !== companion);
    for (const entry of await readdir(join(directory, companion), { withFileTypes: true }))
      entries.push({ name: `${companion}/${entry.name}`, link: entry.isSymbolicLink() });
  }
  if (occupies) entries = entries.filter((entry) => occupies(entry.name));
  if (entries.length > 0 && !force) {
    throw new RestoreTargetNotEmptyError(directory, entries.map((entry) => entry.name).sort());
  }
  const links = entries.filter((entry) => entry.link).map((entry) => entry.name);
  if (links.length > 0) {
    throw new RestoreTargetUnsafeError(
      directory,
      `it holds symbolic links (${links.slice(0, 10).join(', ')}), which a restore could write through`,
    );
  }
  return { directory, exists: true, entries: entries.map((entry) => entry.name) };
}

export interface Staging {
  readonly target: PreparedTarget;
  readonly directory: string;
  /** The layout's companion directory (see `RestoreMaterializer.companionDirectory`). */
  readonly companion?: string;
  /** Whether restore created the target directory (and removes it again on failure). */
  readonly createdTarget: boolean;
}

/** Creates the target (when missing) and a fresh staging directory inside it. */
export async function createStaging(target: PreparedTarget, companion?: string): Promise<Staging> {
  let createdTarget = false;
  if (!target.exists) {
    // Creates missing parents too; `undefined` when the directory already existed.
    const first = await mkdir(target.directory, { recursive: true });
    createdTarget = first !== undefined;
    // The entries of the directories created must survive a crash too, or a
    // completed restore could vanish with them: fsync each created level's parent.
    if (first !== undefined) {
      for (let created = target.directory; ; created = dirname(created)) {
        await syncDirectory(dirname(created));
        if (created === first || dirname(created) === created) break;
      }
    }
  }
  const directory = await mkdtemp(join(target.directory, STAGING_PREFIX));
  return { target, directory, createdTarget, ...(companion === undefined ? {} : { companion }) };
}

function checkedName(name: string, companion: string | undefined): string {
  const problem = placedNameProblem(name, companion);
  if (problem !== undefined) {
    // Names are checked when the restore point is accepted; this is the
    // last line, for names a materializer produced.
    throw new RestoreTargetUnsafeError('(staging)', `file name ${JSON.stringify(name)} ${problem}`);
  }
  return name;
}

/** A staged file being written: append, then `finish` (fsync + close) or `abandon`. */
export interface StagedFileWriter {
  write(chunk: Uint8Array): Promise<void>;
  finish(): Promise<void>;
  abandon(): Promise<void>;
}

/**
 * Bytes written between two early flushes of a staged file. Without them the
 * kernel may keep a whole large file dirty until the final fsync, which then
 * waits for all of it; flushing as it goes overlaps the disk with the download.
 */
const EARLY_FLUSH_BYTES = 32 * 1024 * 1024;

/** Creates `name` in the staging directory, exclusively. */
export async function createStagedFile(staging: Staging, name: string): Promise<StagedFileWriter> {
  const path = join(staging.directory, checkedName(name, staging.companion));
  if (dirname(path) !== staging.directory) await mkdir(dirname(path), { recursive: true });
  const handle = await open(path, CREATE_FLAGS, FILE_MODE);
  let closed = false;
  let unflushed = 0;
  let flushing: Promise<void> | undefined;
  let flushError: unknown;
  return {
    async write(chunk) {
      let offset = 0;
      while (offset < chunk.byteLength) {
        const { bytesWritten } = await handle.write(chunk, offset, chunk.byteLength - offset);
        offset += bytesWritten;
      }
      unflushed += chunk.byteLength;
      if (unflushed >= EARLY_FLUSH_BYTES && flushing === undefined) {
        unflushed = 0;
        // Not awaited: it runs beside the next writes. Its outcome is
        // collected by finish(), which fsyncs again anyway.
        flushing = handle.datasync().then(
          () => {
            flushing = undefined;
          },
          (error: unknown) => {
            flushError = error;
            flushing = undefined;
          },
        );
      }
    },
    async finish() {
      await flushing;
      if (flushError !== undefined) throw flushError;
      await handle.sync();
      closed = true;
      await handle.close();
    },
    async abandon() {
      if (closed) return;
      closed = true;
      await flushing;
      await handle.close().catch(() => {
        // The staging directory is removed next; a failed close changes nothing.
      });
    },
  };
}

/** Fsyncs a file already in the staging directory (one a materializer wrote). */
export async function syncStagedFile(staging: Staging, name: string): Promise<void> {
  const path = join(staging.directory, checkedName(name, staging.companion));
  const stats = await lstat(path);
  if (!stats.isFile()) {
    throw new RestoreTargetUnsafeError(staging.directory, `staged ${name} is not a regular file`);
  }
  const handle = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW);
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

async function syncDirectory(directory: string): Promise<void> {
  const handle = await open(directory, constants.O_RDONLY | constants.O_DIRECTORY);
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** Writes a small file atomically into the target: staged, fsynced, renamed, directory fsynced. */
async function writeFileAtomically(
  staging: Staging,
  name: string,
  bytes: Uint8Array,
): Promise<void> {
  const writer = await createStagedFile(staging, name);
  try {
    await writer.write(bytes);
    await writer.finish();
  } catch (error) {
    await writer.abandon();
    throw error;
  }
  const placed = join(staging.target.directory, name);
  await rename(join(staging.directory, name), placed);
  await syncDirectory(dirname(placed));
}

export interface CommitPlan {
  /** Staged names to move into the target. */
  readonly names: readonly string[];
  /** The parent record written last. */
  readonly parentRecord: { readonly name: string; readonly bytes: Uint8Array };
  /** With `force`: names the layout owns, to remove when not restored. */
  readonly ownsName?: (name: string) => boolean;
  readonly force: boolean;
}

/**
 * Checks, changing nothing, that every file can be moved into place: each
 * name is free in the target, or (with `force`) a regular file. Run just
 * before {@link commitStaged}, so a target that changed since
 * {@link prepareTarget} is refused while it is still as it was.
 * @throws RestoreTargetNotEmptyError, RestoreTargetUnsafeError
 */
export async function checkCommit(staging: Staging, plan: CommitPlan): Promise<void> {
  const target = staging.target.directory;
  const occupied: string[] = [];
  await checkCompanion(staging);
  for (const name of [...plan.names, plan.parentRecord.name]) {
    let stats: Awaited<ReturnType<typeof lstat>>;
    try {
      stats = await lstat(join(target, checkedName(name, staging.companion)));
    } catch (error) {
      if (isCode(error, 'ENOENT')) continue;
      throw error;
    }
    if (!stats.isFile()) {
      throw new RestoreTargetUnsafeError(
        target,
        `${name} in it is ${stats.isSymbolicLink() ? 'a symbolic link' : stats.isDirectory() ? 'a directory' : 'not a regular file'}`,
      );
    }
    occupied.push(name);
  }
  if (!plan.force && occupied.length > 0) {
    // Empty when the restore began: another writer is using the directory.
    throw new RestoreTargetNotEmptyError(target, occupied);
  }
}

/** The companion directory in the target, when there is one, is a directory and no link. */
async function checkCompanion(staging: Staging): Promise<void> {
  if (staging.companion === undefined) return;
  let stats: Awaited<ReturnType<typeof lstat>>;
  try {
    stats = await lstat(join(staging.target.directory, staging.companion));
  } catch (error) {
    if (isCode(error, 'ENOENT')) return;
    throw error;
  }
  if (!stats.isDirectory())
    throw new RestoreTargetUnsafeError(
      staging.target.directory,
      `${staging.companion} in it is ${stats.isSymbolicLink() ? 'a symbolic link' : 'not a directory'}`,
    );
}

/**
 * Moves the staged files into the target, then writes the parent record,
 * then removes the staging directory. With `force`, first removes the old
 * parent record, store files the restore does not write, and staging
 * directories left by an earlier interrupted restore.
 */
export async function commitStaged(staging: Staging, plan: CommitPlan): Promise<void> {
  const target = staging.target.directory;
  const companion = staging.companion;
  const restored = new Set([...plan.names, plan.parentRecord.name]);
  await checkCompanion(staging);
  if (plan.force) {
    await unlinkIfPresent(join(target, plan.parentRecord.name));
    for (const entry of await readdir(target, { withFileTypes: true })) {
      const path = join(target, entry.name);
      if (entry.isDirectory() && entry.name.startsWith(STAGING_PREFIX)) {
        if (path !== staging.directory) await rm(path, { recursive: true, force: true });
      } else if (entry.isDirectory() && entry.name === companion) {
        for (const inner of await readdir(path, { withFileTypes: true })) {
          const name = `${companion}/${inner.name}`;
          if (inner.isFile() && !restored.has(name) && plan.ownsName?.(name))
            await unlinkIfPresent(join(target, name));
        }
      } else if (entry.isFile() && !restored.has(entry.name) && plan.ownsName?.(entry.name)) {
        await unlinkIfPresent(path);
      }
    }
  }
  const placesCompanion = [...restored].some((name) => dirname(name) !== '.');
  if (companion !== undefined && placesCompanion) {
    // Created once, with its entry in the target made durable.
    if ((await mkdir(join(target, companion), { recursive: true })) !== undefined)
      await syncDirectory(target);
  }
  for (const name of plan.names) {
    const staged = checkedName(name, companion);
    await rename(join(staging.directory, staged), join(target, staged));
  }
  await syncDirectory(target);
  if (companion !== undefined && placesCompanion) await syncDirectory(join(target, companion));
  await writeFileAtomically(
    staging,
    checkedName(plan.parentRecord.name, companion),
    plan.parentRecord.bytes,
  );
  // What is left is what a materializer's last step did not keep.
  await rm(staging.directory, { recursive: true, force: true });
}

/** Removes the staging directory, and the target when restore created it. */
export async function discardStaging(staging: Staging): Promise<void> {
  await rm(staging.directory, { recursive: true, force: true });
  if (staging.createdTarget) {
    // Only when still empty: never remove anything restore did not create.
    await rmdir(staging.target.directory).catch(() => {});
  }
}

async function unlinkIfPresent(path: string): Promise<void> {
  try {
    await unlink(path);
  } catch (error) {
    if (!isCode(error, 'ENOENT')) throw error;
  }
}

function isCode(error: unknown, code: string): boolean {
  return typeof error === 'object' && error !== null && (error as { code?: unknown }).code === code;
}
