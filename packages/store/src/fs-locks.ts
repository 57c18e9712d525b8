/**
 * `FsStore`'s per-key lock: an in-process mutex first, then a lock file
 * (`<name>~lock`, created with `O_EXCL`) recording its holder. A waiter
 * breaks a stale lock (dead holder on this host, or older than
 * `staleLockMs`) by moving it aside and checking it moved the lock it judged;
 * a holder confirms the lock is still its own just before it commits. The
 * design and its one known race: docs/decisions/2026-12-06-fs-store-locking.md.
 */
import { randomBytes } from 'node:crypto';
import { constants as fsConstants } from 'node:fs';
import { type FileHandle, link, open, rename, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { throwIfAborted } from './abort.ts';
import { ConflictError } from './errors.ts';
import {
  DIRECTORY_RETRIES,
  errorCode,
  type FsContext,
  type KeyPath,
  LOCK_SUFFIX,
  STALE_PREFIX,
} from './fs-layout.ts';
import { keyDirectory } from './fs-paths.ts';

export interface LockRecord {
  readonly pid: number;
  readonly host: string;
  readonly nonce: string;
  readonly createdAt: number;
}

export interface HeldLock {
  readonly path: string;
  readonly nonce: string;
  readonly acquiredAt: number;
}

/** Per-process queues keyed by lock path, shared by every FsStore in the process. */
export const localQueues = new Map<string, Promise<void>>();

export async function withLocalMutex<T>(name: string, run: () => Promise<T>): Promise<T> {
  const previous = localQueues.get(name) ?? Promise.resolve();
  let release!: () => void;
  const current = new Promise<void>((resolvePromise) => {
    release = resolvePromise;
  });
  const tail = previous.then(() => current);
  localQueues.set(name, tail);
  try {
    await previous;
    return await run();
  } finally {
    release();
    if (localQueues.get(name) === tail) localQueues.delete(name);
  }
}

export function processIsAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: the process exists but belongs to someone else.
    return errorCode(error) === 'EPERM';
  }
}

export async function abortableSleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  try {
    await sleep(ms, undefined, signal ? { signal } : undefined);
  } catch (error) {
    // timers/promises rejects with its own AbortError; callers expect the signal's reason.
    throwIfAborted(signal);
    throw error;
  }
}

/**
 * Runs `critical` holding the key's lock (in-process mutex, then lock file).
 * With `createDirectory` false, returns `'directory-gone'` instead when the
 * directory disappears (the object cannot exist then).
 */
export async function underLock(
  context: FsContext,
  keyPath: KeyPath,
  directory: string,
  signal: AbortSignal | undefined,
  critical: (lock: HeldLock) => Promise<void>,
  createDirectory = true,
): Promise<'done' | 'directory-gone'> {
  const lockPath = join(directory, keyPath.name + LOCK_SUFFIX);
  return withLocalMutex(lockPath, async () => {
    let lock: HeldLock | null = null;
    for (let attempt = 0; lock === null; attempt++) {
      lock = await acquireFileLock(context, lockPath, signal);
      if (lock !== null) break;
      // ENOENT: the directory was tidied away.
      if (!createDirectory || attempt >= DIRECTORY_RETRIES) return 'directory-gone';
      await keyDirectory(context, keyPath, true, signal);
    }
    try {
      await critical(lock);
    } finally {
      await releaseFileLock(lock);
    }
    return 'done';
  });
}

/** Takes the lock file; `null` when its directory does not exist. */
export async function acquireFileLock(
  context: FsContext,
  lockPath: string,
  signal: AbortSignal | undefined,
): Promise<HeldLock | null> {
  for (let attempt = 0; ; attempt++) {
    throwIfAborted(signal);
    const nonce = randomBytes(12).toString('hex');
    let handle: FileHandle;
    try {
      handle = await open(
        lockPath,
        fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_EXCL | fsConstants.O_NOFOLLOW,
        0o644,
      );
    } catch (error) {
      const code = errorCode(error);
      if (code === 'ENOENT') return null;
      if (code !== 'EEXIST') throw error;
      await breakIfStale(context, lockPath);
      const delay = Math.min(25, 0.25 * 2 ** Math.min(attempt, 7)) * (0.5 + Math.random());
      await abortableSleep(delay, signal);
      continue;
    }
    const record: LockRecord = {
      pid: process.pid,
      host: context.host,
      nonce,
      createdAt: Date.now(),
    };
    try {
      await handle.write(JSON.stringify(record));
    } finally {
      await handle.close();
    }
    return { path: lockPath, nonce, acquiredAt: performance.now() };
  }
}

export async function readLock(
  path: string,
): Promise<{ record: LockRecord | null; ino: bigint; mtimeNs: bigint } | null> {
  let handle: FileHandle;
  try {
    handle = await open(path, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW);
  } catch {
    // Gone (released) or unreadable: nothing to judge now.
    return null;
  }
  try {
    const info = await handle.stat({ bigint: true });
    const text = await handle.readFile('utf8');
    let record: LockRecord | null = null;
    try {
      const parsed = JSON.parse(text) as LockRecord;
      if (typeof parsed.nonce === 'string' && typeof parsed.pid === 'number') record = parsed;
    } catch {
      // Empty or half-written: the holder is between open and write, or died there.
    }
    return { record, ino: info.ino, mtimeNs: info.mtimeNs };
  } finally {
    await handle.close();
  }
}

export async function breakIfStale(context: FsContext, lockPath: string): Promise<void> {
  const seen = await readLock(lockPath);
  if (!seen) return;
  const ageMs = Date.now() - Number(seen.mtimeNs / 1_000_000n);
  const holderDead =
    seen.record !== null &&
    seen.record.host === context.host &&
    seen.record.pid !== process.pid &&
    !processIsAlive(seen.record.pid);
  if (!holderDead && ageMs <= context.staleLockMs) return;
  const displaced = join(lockPath, '..', `${STALE_PREFIX}${randomBytes(12).toString('hex')}`);
  try {
    await rename(lockPath, displaced);
  } catch {
    // Someone else released or broke it first.
    return;
  }
  const moved = await readLock(displaced);
  const same =
    moved !== null &&
    moved.ino === seen.ino &&
    moved.mtimeNs === seen.mtimeNs &&
    moved.record?.nonce === seen.record?.nonce;
  if (!same) {
    // We moved a live lock taken after our look: put it back.
    await link(displaced, lockPath).catch(() => {
      // Someone took the free name in between (the known race, see above).
    });
  }
  await unlink(displaced).catch(() => {
    // Already gone: nothing to clean.
  });
}

/** Just before committing: the lock must still be ours, and not held for too long. */
export async function confirmLock(context: FsContext, lock: HeldLock, key: string): Promise<void> {
  const heldMs = performance.now() - lock.acquiredAt;
  const seen = await readLock(lock.path);
  if (seen?.record?.nonce !== lock.nonce || heldMs > context.staleLockMs / 2)
    throw new ConflictError(key, {
      cause: new Error(`lock lost or held too long (${Math.round(heldMs)} ms); retry`),
    });
}

export async function releaseFileLock(lock: HeldLock): Promise<void> {
  const seen = await readLock(lock.path);
  // Only remove our own lock; one that was broken and retaken is someone else's.
  if (seen?.record?.nonce !== lock.nonce) return;
  await unlink(lock.path).catch(() => {
    // Already gone: nothing to release.
  });
}
