/**
 * `FsStore`: objects as files under a root directory, the embedded default
 * backend (`file://`). Conditional writes are atomic across processes on one
 * host or a filesystem with POSIX `link`, `rename` and `O_EXCL`: `create`
 * publishes a staged temp file with `link`; every other write and every
 * delete runs under a per-key lock file. Known limit: breaking the stale lock
 * of a crashed holder has a narrow race (two breakers and an acquirer within a
 * few system calls). Layout, guarantees, limits: package README; the design
 * and the race: docs/decisions/2026-12-06-fs-store-locking.md. Parts:
 * fs-layout.ts, fs-paths.ts, fs-write.ts, fs-locks.ts, fs-list.ts.
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
