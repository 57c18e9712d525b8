/**
 * `FsStore`: objects as files under a root directory — the embedded default
 * backend (`file://`). Conditional writes are atomic across processes on one
 * host (and on any filesystem with POSIX `link`, `rename` and `O_EXCL`).
 *
 * Layout. Key `a/b/c.json` lives at `<root>/a/b/c.json~obj`. Directory names
 * are the key's segments; an object's file name is its last segment plus the
 * suffix `~obj`, so key `a` and key `a/b` can both exist (`a~obj` beside the
 * directory `a`). A `~` inside a segment is written as `~7e`, so a name with
 * any other `~` sequence is never an object or a key directory: temp files
 * (`~tmp.*`), lock files (`*~lock`) and displaced stale locks (`~stale.*`)
 * can never be mistaken for objects and are never listed.
 *
 * Object files. Each file holds a 64-byte header — `xstore-object/1 `, a
 * 128-bit random version id in hex, padding, `\n` — then the object's bytes
 * (`tail -c +65` prints them). The version lives inside the file because a
 * file is replaced as one inode by `rename`: a reader that opened the file
 * reads a header and a body of the same write, and a fresh random id per write
 * makes the version change on every write, also when the bytes and the size
 * do not (inode numbers, mtimes and sizes can all repeat).
 *
 * Writes and their atomicity:
 * - Every write first stages the whole object in a temp file in the target
 *   directory (`~tmp.<random>`, created with `O_EXCL`), streams the bytes in
 *   bounded memory, `fsync`s it, and only then makes it visible. Readers never
 *   see a partial object.
 * - `create` publishes the temp file with `link(temp, final)`: the kernel
 *   refuses (`EEXIST`) when the name exists, so of any number of concurrent
 *   creates in any number of processes exactly one wins. No lock is needed.
 * - `overwrite`, `{ ifMatch }` and `delete` (with or without `ifMatch`) run
 *   under a per-key lock file (`<name>~lock`, created with `O_CREAT|O_EXCL`):
 *   read the current version, compare, then `rename(temp, final)` or
 *   `unlink(final)`. Unconditional writes take the lock too, so that an
 *   overwrite or delete can never slip between another writer's check and its
 *   write; `create` needs no lock because while the object exists it cannot
 *   succeed, and the object only disappears under the lock.
 * - Within one process, operations on one key queue on an in-memory mutex
 *   first, so the lock file is only contended between processes.
 *
 * Stale locks. A lock file records `{ pid, host, nonce, createdAt }`. Holders
 * keep it for milliseconds (the bytes are staged before it is taken). A
 * waiter treats a lock as stale when its holder is a dead process on this
 * host, or when it is older than `staleLockMs` (default 30 s; the only test
 * for holders on other hosts). A stale lock is removed by renaming it to a
 * unique name and checking that what was moved is the lock judged stale (same
 * nonce, inode and mtime); if a live lock was moved by mistake it is linked
 * back. A holder re-reads its lock just before it commits and gives up with
 * `ConflictError` (retryable) when the lock is no longer its own or it has
 * held it longer than half of `staleLockMs`. Limit: after a holder crashed,
 * two waiters breaking its lock at the same moment while a third acquires in
 * the microseconds between a mistaken move and the link back could overlap;
 * this needs a crash plus a three-way race inside a window of a few system
 * calls. Without crashes, exclusion rests on `O_EXCL` alone. The dead-process
 * test assumes that processes reporting the same host name share one pid
 * namespace (containers sharing a volume should have distinct host names).
 * POSIX only (`O_NOFOLLOW`, `link`); not for Windows.
 *
 * Durability. The temp file is `fsync`ed before it is published and the
 * directory after every link, rename, unlink or new directory, so a write that
 * resolved survives a power loss (on filesystems that honour `fsync`).
 * `fsync: false` skips this (tests, tmpfs).
 *
 * Containment. Keys are validated (`validateKey`); segments are used as
 * literal names, never as paths. Every directory below the root is checked
 * with `lstat` as it is walked, and files are opened with `O_NOFOLLOW`: a
 * symbolic link anywhere inside the root is refused with a `StoreError`, so
 * no call reads, writes or deletes outside the root, even when someone
 * plants links in it. (The root itself may be a link.)
 *
 * Limits. A segment may hold at most 250 bytes once `~` is escaped
 * (filesystems cap names at 255 bytes); longer ones get `InvalidKeyError`.
 * The filesystem must be case-sensitive and must not normalise Unicode
 * (Linux ext4/xfs/btrfs are fine; macOS APFS by default is not: `A` and `a`
 * would be one object). `list` is not a snapshot: objects written or deleted
 * while it walks may or may not appear. `upload`'s `partSize` is ignored.
 * Empty directories are removed after deletes on a best-effort basis; temp
 * files left by a crashed process are never listed and may be deleted by hand.
 *
 * The parts live beside this file: fs-layout.ts (names and the object
 * header), fs-paths.ts (path safety), fs-write.ts (atomic writes),
 * fs-locks.ts (the per-key lock) and fs-list.ts (listing in key order).
 */
import { type FileHandle, unlink } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join, resolve } from 'node:path';
import { throwIfAborted } from './abort.ts';
import { PreconditionFailedError, StoreError } from './errors.ts';
import {
  errorCode,
  type FsContext,
  HEADER_BYTES,
  keyPathOf,
  OBJECT_SUFFIX,
  READ_CHUNK_BYTES,
  readHeader,
  versionOf,
} from './fs-layout.ts';
import { fsListPages } from './fs-list.ts';
import { confirmLock, underLock } from './fs-locks.ts';
import {
  currentVersionId,
  fsError,
  keyDirectory,
  objectInfo,
  openObject,
  syncDirectory,
} from './fs-paths.ts';
import { tidy, writeObject } from './fs-write.ts';
import { collectListPages } from './list-pages.ts';
import type {
  CallOptions,
  DeleteOptions,
  GetResult,
  GetStreamResult,
  ListOptions,
  ListPage,
  ListPagesOptions,
  ListResult,
  ObjectInfo,
  ObjectStore,
  ObjectVersion,
  PutOptions,
  StoreCapabilities,
  UploadOptions,
  UploadSource,
} from './object-store.ts';
import { sameVersion } from './object-store.ts';

export interface FsStoreOptions {
  /** The directory objects live under; created on the first write. */
  readonly root: string;
  /**
   * Age after which a lock file is considered abandoned even when its holder
   * cannot be checked (another host). Default 30 000 ms. Holders give up when
   * they have held a lock for half of this.
   */
  readonly staleLockMs?: number;
  /** `fsync` files and directories so resolved writes survive power loss. Default `true`. */
  readonly fsync?: boolean;
}

export class FsStore implements ObjectStore {
  readonly description: string;
  readonly capabilities: StoreCapabilities = {
    conditionalPut: true,
    conditionalDelete: true,
    multipartCreate: true,
    distinctVersions: true,
  };
  /** The absolute root directory. */
  readonly root: string;
  readonly #context: FsContext;

  constructor(options: FsStoreOptions) {
    if (typeof options?.root !== 'string' || options.root === '')
      throw new StoreError('FsStore needs a root directory (options.root)');
    this.root = resolve(options.root);
    this.#context = {
      root: this.root,
      staleLockMs: options.staleLockMs ?? 30_000,
      fsync: options.fsync ?? true,
      host: hostname(),
    };
    this.description = `file://${this.root}`;
  }
  async get(key: string, options: CallOptions = {}): Promise<GetResult | null> {
    const { signal } = options;
    const keyPath = keyPathOf(key);
    try {
      throwIfAborted(signal);
      const directory = await keyDirectory(this.#context, keyPath, false, signal);
      if (!directory) return null;
      const path = join(directory, keyPath.name + OBJECT_SUFFIX);
      const handle = await openObject(this.#context, path, key);
      if (!handle) return null;
      try {
        const versionId = await readHeader(handle, path, key);
        const whole = await handle.readFile(signal ? { signal } : {});
        const body = new Uint8Array(
          whole.buffer,
          whole.byteOffset + HEADER_BYTES,
          whole.byteLength - HEADER_BYTES,
        );
        throwIfAborted(signal);
        return { key, body, size: body.byteLength, version: versionOf(versionId) };
      } finally {
        await handle.close();
      }
    } catch (error) {
      throw fsError(this.#context, error, key, signal);
    }
  }

  async getStream(key: string, options: CallOptions = {}): Promise<GetStreamResult | null> {
    const { signal } = options;
    const keyPath = keyPathOf(key);
    let handle: FileHandle | null = null;
    try {
      throwIfAborted(signal);
      const directory = await keyDirectory(this.#context, keyPath, false, signal);
      if (!directory) return null;
      const path = join(directory, keyPath.name + OBJECT_SUFFIX);
      handle = await openObject(this.#context, path, key);
      if (!handle) return null;
      const versionId = await readHeader(handle, path, key);
      const size = (await handle.stat()).size - HEADER_BYTES;
      const opened = handle;
      const wrap = (error: unknown) => fsError(this.#context, error, key, signal);
      // The handle is opened now, so the body is the version returned even if
      // the key is replaced before iteration; it is closed when iteration ends.
      async function* body(): AsyncIterable<Uint8Array> {
        try {
          let position = HEADER_BYTES;
          const end = HEADER_BYTES + size;
          while (position < end) {
            throwIfAborted(signal);
            const buffer = Buffer.allocUnsafe(Math.min(READ_CHUNK_BYTES, end - position));
            const { bytesRead } = await opened.read(buffer, 0, buffer.byteLength, position);
            if (bytesRead === 0) break;
            position += bytesRead;
            yield buffer.subarray(0, bytesRead);
          }
        } catch (error) {
          throw wrap(error);
        } finally {
          await opened.close();
        }
      }
      return { key, size, version: versionOf(versionId), body: body() };
    } catch (error) {
      await handle?.close();
      throw fsError(this.#context, error, key, signal);
    }
  }

  async head(key: string, options: CallOptions = {}): Promise<ObjectInfo | null> {
    const { signal } = options;
    const keyPath = keyPathOf(key);
    try {
      throwIfAborted(signal);
      const directory = await keyDirectory(this.#context, keyPath, false, signal);
      if (!directory) return null;
      return await objectInfo(this.#context, join(directory, keyPath.name + OBJECT_SUFFIX), key);
    } catch (error) {
      throw fsError(this.#context, error, key, signal);
    }
  }

  async put(
    key: string,
    body: Uint8Array,
    options: PutOptions = {},
  ): Promise<{ version: ObjectVersion }> {
    const { signal } = options;
    const keyPath = keyPathOf(key);
    if (!(body instanceof Uint8Array))
      throw new StoreError('put needs the body as a Uint8Array', { key });
    try {
      throwIfAborted(signal);
      const { version } = await writeObject(
        this.#context,
        keyPath,
        body,
        options.mode ?? 'overwrite',
        signal,
      );
      return { version };
    } catch (error) {
      throw fsError(this.#context, error, key, signal);
    }
  }

  async upload(
    key: string,
    source: UploadSource,
    options: UploadOptions = {},
  ): Promise<{ version: ObjectVersion; size: number }> {
    const { signal } = options;
    const keyPath = keyPathOf(key);
    const mode = options.mode ?? 'overwrite';
    if (mode !== 'create' && mode !== 'overwrite')
      throw new StoreError(`upload mode must be 'create' or 'overwrite'`, { key });
    try {
      throwIfAborted(signal);
      return await writeObject(this.#context, keyPath, source, mode, signal);
    } catch (error) {
      throw fsError(this.#context, error, key, signal);
    }
  }

  async delete(key: string, options: DeleteOptions = {}): Promise<void> {
    const { signal, ifMatch } = options;
    const keyPath = keyPathOf(key);
    try {
      throwIfAborted(signal);
      const directory = await keyDirectory(this.#context, keyPath, false, signal);
      if (!directory) {
        if (ifMatch) throw new PreconditionFailedError(key, { detail: 'no object at the key' });
        return;
      }
      const finalPath = join(directory, keyPath.name + OBJECT_SUFFIX);
      let removed = false;
      const acquired = await underLock(
        this.#context,
        keyPath,
        directory,
        signal,
        async (lock) => {
          if (ifMatch) {
            const current = await currentVersionId(this.#context, finalPath, key);
            if (current === null)
              throw new PreconditionFailedError(key, { detail: 'no object at the key' });
            if (!sameVersion(versionOf(current), ifMatch)) throw new PreconditionFailedError(key);
          }
          throwIfAborted(signal);
          await confirmLock(this.#context, lock, key);
          try {
            await unlink(finalPath);
            removed = true;
          } catch (error) {
            if (errorCode(error) !== 'ENOENT') throw error;
          }
          if (removed) await syncDirectory(this.#context, directory);
        },
        false,
      );
      if (acquired === 'directory-gone') {
        // The directory vanished: the object is gone too.
        if (ifMatch) throw new PreconditionFailedError(key, { detail: 'no object at the key' });
        return;
      }
      if (removed) await tidy(this.#context, keyPath);
    } catch (error) {
      throw fsError(this.#context, error, key, signal);
    }
  }

  async list(prefix: string, options: ListOptions = {}): Promise<ListResult> {
    return collectListPages(this.listPages(prefix, options));
  }

  /**
   * Walks the directories in key order, so memory is bounded by a page plus
   * the names of one directory per level (the widest directory's names, not
   * the whole tree). Each page's objects are read (`head`) 32 at a time.
   */
  listPages(prefix: string, options: ListPagesOptions = {}): AsyncIterable<ListPage> {
    return fsListPages(this.#context, prefix, options);
  }
}
