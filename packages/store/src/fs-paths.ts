/**
 * Path safety of `FsStore`: walking from the root to a key's directory with
 * `lstat` at every step, refusing a symbolic link anywhere inside the root
 * (so no call reads, writes or deletes outside it), opening object files
 * with `O_NOFOLLOW`, and `fsync`ing directories after they change.
 */
import { constants as fsConstants } from 'node:fs';
import { type FileHandle, lstat, mkdir, open, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { isAbortError, throwIfAborted } from './abort.ts';
import { StoreError } from './errors.ts';
import {
  DIRECTORY_RETRIES,
  errorCode,
  type FsContext,
  HEADER_BYTES,
  type KeyPath,
  readHeader,
  versionOf,
} from './fs-layout.ts';
import type { ObjectInfo } from './object-store.ts';

export function symlinkError(context: FsContext, path: string, key: string): StoreError {
  return new StoreError(
    `refusing a symbolic link inside the store root: ${path.slice(context.root.length + 1)}`,
    { key },
  );
}

/**
 * Walks from the root to the key's directory, refusing symbolic links.
 * Returns its path, or `null` when it does not exist and `create` is false.
 */
export async function keyDirectory(
  context: FsContext,
  keyPath: KeyPath,
  create: boolean,
  signal: AbortSignal | undefined,
): Promise<string | null> {
  if (create) {
    await mkdir(context.root, { recursive: true });
  } else {
    try {
      const rootStat = await stat(context.root);
      if (!rootStat.isDirectory())
        throw new StoreError(`store root is not a directory: ${context.root}`);
    } catch (error) {
      if (errorCode(error) === 'ENOENT') return null;
      throw error;
    }
  }
  walk: for (let attempt = 0; ; attempt++) {
    let current = context.root;
    for (const name of keyPath.directories) {
      throwIfAborted(signal);
      const next = join(current, name);
      let info = await lstat(next).catch((error: unknown) => {
        if (errorCode(error) === 'ENOENT') return null;
        throw error;
      });
      if (info === null) {
        if (!create) return null;
        try {
          await mkdir(next);
          await syncDirectory(context, current);
        } catch (error) {
          const code = errorCode(error);
          // ENOENT: a concurrent delete tidied the parent away just now; walk again.
          if (code === 'ENOENT' && attempt < DIRECTORY_RETRIES) continue walk;
          if (code !== 'EEXIST') throw error;
        }
        info = await lstat(next).catch((error: unknown) => {
          if (errorCode(error) === 'ENOENT') return null;
          throw error;
        });
        if (info === null && attempt < DIRECTORY_RETRIES) continue walk;
        if (info === null) throw new StoreError(`directory keeps vanishing: ${next}`);
      }
      if (info.isSymbolicLink()) throw symlinkError(context, next, keyPath.key);
      if (!info.isDirectory())
        throw new StoreError(`not a directory inside the store root: ${next}`, {
          key: keyPath.key,
        });
      current = next;
    }
    return current;
  }
}

export async function syncDirectory(context: FsContext, path: string): Promise<void> {
  if (!context.fsync) return;
  const handle = await open(path, fsConstants.O_RDONLY | fsConstants.O_DIRECTORY);
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** Opens an object file for reading, refusing a symbolic link; `null` when absent. */
export async function openObject(
  context: FsContext,
  path: string,
  key: string,
): Promise<FileHandle | null> {
  try {
    return await open(path, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW);
  } catch (error) {
    const code = errorCode(error);
    if (code === 'ENOENT') return null;
    if (code === 'ELOOP') throw symlinkError(context, path, key);
    throw error;
  }
}

/** The current version id at `path`, or `null` when there is no object. */
export async function currentVersionId(
  context: FsContext,
  path: string,
  key: string,
): Promise<string | null> {
  const handle = await openObject(context, path, key);
  if (!handle) return null;
  try {
    return await readHeader(handle, path, key);
  } finally {
    await handle.close();
  }
}

export async function objectInfo(
  context: FsContext,
  path: string,
  key: string,
): Promise<ObjectInfo | null> {
  const handle = await openObject(context, path, key);
  if (!handle) return null;
  try {
    const versionId = await readHeader(handle, path, key);
    const size = (await handle.stat()).size - HEADER_BYTES;
    return { key, size, version: versionOf(versionId) };
  } finally {
    await handle.close();
  }
}

/** A thrown value as the store reports it: store and abort errors as they are, anything else a `StoreError` naming the key and the root. */
export function fsError(
  context: FsContext,
  error: unknown,
  key: string,
  signal: AbortSignal | undefined,
): unknown {
  if (StoreError.isInstance(error)) return error;
  if (signal?.aborted && error === signal.reason) return error;
  if (isAbortError(error)) return error;
  const code = errorCode(error);
  return new StoreError(
    `filesystem error${code ? ` ${code}` : ''} for ${key || '(list)'} under ${context.root}`,
    { key, cause: error },
  );
}
