/**
 * `FsStore`'s atomic writes: every write stages the whole object in a temp
 * file (`O_EXCL`, streamed in bounded memory, `fsync`ed) before it becomes
 * visible; `create` publishes it with `link` (exactly one concurrent create
 * wins, no lock), every other write renames it into place under the key's
 * lock after checking the version. Also the tidying of empty directories
 * after a delete.
 */
import { randomBytes } from 'node:crypto';
import { constants as fsConstants } from 'node:fs';
import { type FileHandle, link, open, rename, rmdir, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { chunksOf, throwIfAborted } from './abort.ts';
import { AlreadyExistsError, PreconditionFailedError } from './errors.ts';
import {
  DIRECTORY_RETRIES,
  encodeHeader,
  errorCode,
  type FsContext,
  type KeyPath,
  newVersionId,
  OBJECT_SUFFIX,
  TEMP_PREFIX,
  versionOf,
} from './fs-layout.ts';
import { confirmLock, underLock } from './fs-locks.ts';
import { currentVersionId, keyDirectory, syncDirectory } from './fs-paths.ts';
import {
  type ObjectVersion,
  type PutMode,
  sameVersion,
  type UploadSource,
} from './object-store.ts';

/** `FileHandle.write` may write less than asked (rare for files, but allowed): loop until done. */
async function writeAll(handle: FileHandle, bytes: Uint8Array): Promise<void> {
  let offset = 0;
  while (offset < bytes.byteLength) {
    const { bytesWritten } = await handle.write(bytes, offset, bytes.byteLength - offset);
    if (bytesWritten <= 0) throw new Error('write made no progress');
    offset += bytesWritten;
  }
}

export interface Staged {
  readonly tempPath: string;
  readonly versionId: string;
  readonly size: number;
}

/** Writes header and body to a fresh temp file in the key's directory and fsyncs it. */
export async function stageObject(
  context: FsContext,
  keyPath: KeyPath,
  source: UploadSource,
  signal: AbortSignal | undefined,
): Promise<Staged & { directory: string }> {
  for (let attempt = 0; ; attempt++) {
    throwIfAborted(signal);
    const directory = (await keyDirectory(context, keyPath, true, signal))!;
    const tempPath = join(directory, `${TEMP_PREFIX}${randomBytes(12).toString('hex')}`);
    let handle: FileHandle;
    try {
      handle = await open(
        tempPath,
        fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_EXCL | fsConstants.O_NOFOLLOW,
        0o644,
      );
    } catch (error) {
      // The directory was tidied away between the walk and the open: walk again.
      if (errorCode(error) === 'ENOENT' && attempt < DIRECTORY_RETRIES) continue;
      throw error;
    }
    const versionId = newVersionId();
    let size = 0;
    try {
      try {
        await writeAll(handle, encodeHeader(versionId));
        for await (const chunk of chunksOf(source)) {
          throwIfAborted(signal);
          if (chunk.byteLength === 0) continue;
          await writeAll(handle, chunk);
          size += chunk.byteLength;
        }
        throwIfAborted(signal);
        if (context.fsync) await handle.sync();
      } finally {
        await handle.close();
      }
    } catch (error) {
      await unlink(tempPath).catch(() => {
        // Best effort: a temp file left behind is never listed.
      });
      throw error;
    }
    return { tempPath, versionId, size, directory };
  }
}

export async function writeObject(
  context: FsContext,
  keyPath: KeyPath,
  source: UploadSource,
  mode: PutMode,
  signal: AbortSignal | undefined,
): Promise<{ version: ObjectVersion; size: number }> {
  if (typeof mode === 'object') {
    // Fail fast before staging when the version is already wrong; the check
    // under the lock below is the one that counts.
    const directory = await keyDirectory(context, keyPath, false, signal);
    const current = directory
      ? await currentVersionId(context, join(directory, keyPath.name + OBJECT_SUFFIX), keyPath.key)
      : null;
    if (current === null)
      throw new PreconditionFailedError(keyPath.key, { detail: 'no object at the key' });
    if (!sameVersion(versionOf(current), mode.ifMatch))
      throw new PreconditionFailedError(keyPath.key);
  }
  const staged = await stageObject(context, keyPath, source, signal);
  const finalPath = join(staged.directory, keyPath.name + OBJECT_SUFFIX);
  try {
    if (mode === 'create') {
      throwIfAborted(signal);
      try {
        await link(staged.tempPath, finalPath);
      } catch (error) {
        if (errorCode(error) === 'EEXIST') throw new AlreadyExistsError(keyPath.key);
        throw error;
      }
      await unlink(staged.tempPath);
      await syncDirectory(context, staged.directory);
    } else {
      await underLock(context, keyPath, staged.directory, signal, async (lock) => {
        if (typeof mode === 'object') {
          const current = await currentVersionId(context, finalPath, keyPath.key);
          if (current === null)
            throw new PreconditionFailedError(keyPath.key, { detail: 'no object at the key' });
          if (!sameVersion(versionOf(current), mode.ifMatch))
            throw new PreconditionFailedError(keyPath.key);
        }
        throwIfAborted(signal);
        await confirmLock(context, lock, keyPath.key);
        await rename(staged.tempPath, finalPath);
        await syncDirectory(context, staged.directory);
      });
    }
  } catch (error) {
    await unlink(staged.tempPath).catch(() => {
      // Already published (renamed) or already gone: nothing to clean.
    });
    throw error;
  }
  return { version: versionOf(staged.versionId), size: staged.size };
}

/** Removes the key's now-empty directories, deepest first; stops at the first non-empty one. */
export async function tidy(context: FsContext, keyPath: KeyPath): Promise<void> {
  for (let depth = keyPath.directories.length; depth > 0; depth--) {
    const path = join(context.root, ...keyPath.directories.slice(0, depth));
    try {
      // rmdir fails on a non-empty directory, so a concurrent writer whose
      // temp or lock file is inside keeps it; one that only created the
      // directory so far walks again when its open finds it gone.
      await rmdir(path);
    } catch {
      // Not empty, already gone, or replaced: tidying is best effort.
      return;
    }
  }
}
