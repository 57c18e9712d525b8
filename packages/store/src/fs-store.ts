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
 */
import { randomBytes } from 'node:crypto';
import { type Dirent, constants as fsConstants } from 'node:fs';
import {
  type FileHandle,
  link,
  lstat,
  mkdir,
  open,
  readdir,
  rename,
  rmdir,
  stat,
  unlink,
} from 'node:fs/promises';
import { hostname } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { chunksOf, isAbortError, throwIfAborted } from './abort.ts';
import {
  AlreadyExistsError,
  ConflictError,
  InvalidKeyError,
  PreconditionFailedError,
  StoreError,
} from './errors.ts';
import { compareKeys, validateKey } from './keys.ts';
import { collectListPages, DEFAULT_LIST_PAGE_SIZE, pageSizeOf } from './list-pages.ts';
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
  PutMode,
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

const OBJECT_SUFFIX = '~obj';
const LOCK_SUFFIX = '~lock';
const TEMP_PREFIX = '~tmp.';
const STALE_PREFIX = '~stale.';
/** Longest encoded segment: 255 (NAME_MAX) minus the longest suffix we append. */
const MAX_SEGMENT_BYTES = 255 - LOCK_SUFFIX.length;

const HEADER_BYTES = 64;
const MAGIC = 'xstore-object/1 ';
const VERSION_HEX_LENGTH = 32;
const READ_CHUNK_BYTES = 1024 * 1024;
const LIST_READ_CONCURRENCY = 32;
/** Bounded retries when a directory vanishes under us (removed by a concurrent tidy). */
const DIRECTORY_RETRIES = 50;

/** A directory name we wrote: segments with `~` escaped and no other `~`. */
const DIRECTORY_NAME = /^(?:[^~]|~7e)+$/;
const OBJECT_NAME = /^((?:[^~]|~7e)+)~obj$/;

function encodeSegment(segment: string): string {
  return segment.replaceAll('~', '~7e');
}

function decodeSegment(name: string): string {
  return name.replaceAll('~7e', '~');
}

function errorCode(error: unknown): string | undefined {
  return typeof error === 'object' && error !== null && 'code' in error
    ? String((error as { code: unknown }).code)
    : undefined;
}

function newVersionId(): string {
  return randomBytes(VERSION_HEX_LENGTH / 2).toString('hex');
}

function encodeHeader(versionId: string): Buffer {
  const text = `${MAGIC}${versionId}`;
  return Buffer.from(`${text.padEnd(HEADER_BYTES - 1, ' ')}\n`, 'latin1');
}

/** `FileHandle.write` may write less than asked (rare for files, but allowed): loop until done. */
async function writeAll(handle: FileHandle, bytes: Uint8Array): Promise<void> {
  let offset = 0;
  while (offset < bytes.byteLength) {
    const { bytesWritten } = await handle.write(bytes, offset, bytes.byteLength - offset);
    if (bytesWritten <= 0) throw new Error('write made no progress');
    offset += bytesWritten;
  }
}

function versionOf(versionId: string): ObjectVersion {
  return { etag: `"${versionId}"` };
}

interface KeyPath {
  readonly key: string;
  /** Encoded directory names from the root down. */
  readonly directories: readonly string[];
  /** Encoded last segment (without suffix). */
  readonly name: string;
}

interface Staged {
  readonly tempPath: string;
  readonly versionId: string;
  readonly size: number;
}

interface LockRecord {
  readonly pid: number;
  readonly host: string;
  readonly nonce: string;
  readonly createdAt: number;
}

interface HeldLock {
  readonly path: string;
  readonly nonce: string;
  readonly acquiredAt: number;
}

/** Per-process queues keyed by lock path, shared by every FsStore in the process. */
const localQueues = new Map<string, Promise<void>>();

async function withLocalMutex<T>(name: string, run: () => Promise<T>): Promise<T> {
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

function processIsAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: the process exists but belongs to someone else.
    return errorCode(error) === 'EPERM';
  }
}

async function abortableSleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  try {
    await sleep(ms, undefined, signal ? { signal } : undefined);
  } catch (error) {
    // timers/promises rejects with its own AbortError; callers expect the signal's reason.
    throwIfAborted(signal);
    throw error;
  }
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
  readonly #staleLockMs: number;
  readonly #fsync: boolean;
  readonly #host = hostname();

  constructor(options: FsStoreOptions) {
    if (typeof options?.root !== 'string' || options.root === '')
      throw new StoreError('FsStore needs a root directory (options.root)');
    this.root = resolve(options.root);
    this.#staleLockMs = options.staleLockMs ?? 30_000;
    this.#fsync = options.fsync ?? true;
    this.description = `file://${this.root}`;
  }

  // ---------------------------------------------------------------- paths

  #keyPath(key: string): KeyPath {
    validateKey(key);
    const encoded = key.split('/').map(encodeSegment);
    for (const segment of encoded) {
      if (Buffer.byteLength(segment, 'utf8') > MAX_SEGMENT_BYTES)
        throw new InvalidKeyError(
          key,
          `a path segment longer than ${MAX_SEGMENT_BYTES} bytes cannot be stored by FsStore`,
        );
    }
    return { key, directories: encoded.slice(0, -1), name: encoded.at(-1)! };
  }

  #symlinkError(path: string, key: string): StoreError {
    return new StoreError(
      `refusing a symbolic link inside the store root: ${path.slice(this.root.length + 1)}`,
      { key },
    );
  }

  /**
   * Walks from the root to the key's directory, refusing symbolic links.
   * Returns its path, or `null` when it does not exist and `create` is false.
   */
  async #directory(
    keyPath: KeyPath,
    create: boolean,
    signal: AbortSignal | undefined,
  ): Promise<string | null> {
    if (create) {
      await mkdir(this.root, { recursive: true });
    } else {
      try {
        const rootStat = await stat(this.root);
        if (!rootStat.isDirectory())
          throw new StoreError(`store root is not a directory: ${this.root}`);
      } catch (error) {
        if (errorCode(error) === 'ENOENT') return null;
        throw error;
      }
    }
    walk: for (let attempt = 0; ; attempt++) {
      let current = this.root;
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
            await this.#syncDirectory(current);
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
        if (info.isSymbolicLink()) throw this.#symlinkError(next, keyPath.key);
        if (!info.isDirectory())
          throw new StoreError(`not a directory inside the store root: ${next}`, {
            key: keyPath.key,
          });
        current = next;
      }
      return current;
    }
  }

  async #syncDirectory(path: string): Promise<void> {
    if (!this.#fsync) return;
    const handle = await open(path, fsConstants.O_RDONLY | fsConstants.O_DIRECTORY);
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
  }

  /** Opens an object file for reading, refusing a symbolic link; `null` when absent. */
  async #openObject(path: string, key: string): Promise<FileHandle | null> {
    try {
      return await open(path, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW);
    } catch (error) {
      const code = errorCode(error);
      if (code === 'ENOENT') return null;
      if (code === 'ELOOP') throw this.#symlinkError(path, key);
      throw error;
    }
  }

  async #readHeader(handle: FileHandle, path: string, key: string): Promise<string> {
    const header = Buffer.alloc(HEADER_BYTES);
    const { bytesRead } = await handle.read(header, 0, HEADER_BYTES, 0);
    const text = header.toString('latin1', 0, bytesRead);
    const versionId = text.slice(MAGIC.length, MAGIC.length + VERSION_HEX_LENGTH);
    if (
      bytesRead !== HEADER_BYTES ||
      !text.startsWith(MAGIC) ||
      !/^[0-9a-f]{32}$/.test(versionId) ||
      !text.endsWith('\n')
    )
      throw new StoreError(`not an FsStore object file (bad header): ${path}`, { key });
    return versionId;
  }

  /** The current version id at `path`, or `null` when there is no object. */
  async #currentVersionId(path: string, key: string): Promise<string | null> {
    const handle = await this.#openObject(path, key);
    if (!handle) return null;
    try {
      return await this.#readHeader(handle, path, key);
    } finally {
      await handle.close();
    }
  }

  // ---------------------------------------------------------------- errors

  #wrap(error: unknown, key: string, signal: AbortSignal | undefined): unknown {
    if (StoreError.isInstance(error)) return error;
    if (signal?.aborted && error === signal.reason) return error;
    if (isAbortError(error)) return error;
    const code = errorCode(error);
    return new StoreError(
      `filesystem error${code ? ` ${code}` : ''} for ${key || '(list)'} under ${this.root}`,
      { key, cause: error },
    );
  }

  // ---------------------------------------------------------------- reads

  async get(key: string, options: CallOptions = {}): Promise<GetResult | null> {
    const { signal } = options;
    const keyPath = this.#keyPath(key);
    try {
      throwIfAborted(signal);
      const directory = await this.#directory(keyPath, false, signal);
      if (!directory) return null;
      const path = join(directory, keyPath.name + OBJECT_SUFFIX);
      const handle = await this.#openObject(path, key);
      if (!handle) return null;
      try {
        const versionId = await this.#readHeader(handle, path, key);
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
      throw this.#wrap(error, key, signal);
    }
  }

  async getStream(key: string, options: CallOptions = {}): Promise<GetStreamResult | null> {
    const { signal } = options;
    const keyPath = this.#keyPath(key);
    let handle: FileHandle | null = null;
    try {
      throwIfAborted(signal);
      const directory = await this.#directory(keyPath, false, signal);
      if (!directory) return null;
      const path = join(directory, keyPath.name + OBJECT_SUFFIX);
      handle = await this.#openObject(path, key);
      if (!handle) return null;
      const versionId = await this.#readHeader(handle, path, key);
      const size = (await handle.stat()).size - HEADER_BYTES;
      const opened = handle;
      const wrap = (error: unknown) => this.#wrap(error, key, signal);
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
      throw this.#wrap(error, key, signal);
    }
  }

  async head(key: string, options: CallOptions = {}): Promise<ObjectInfo | null> {
    const { signal } = options;
    const keyPath = this.#keyPath(key);
    try {
      throwIfAborted(signal);
      const directory = await this.#directory(keyPath, false, signal);
      if (!directory) return null;
      return await this.#info(join(directory, keyPath.name + OBJECT_SUFFIX), key);
    } catch (error) {
      throw this.#wrap(error, key, signal);
    }
  }

  async #info(path: string, key: string): Promise<ObjectInfo | null> {
    const handle = await this.#openObject(path, key);
    if (!handle) return null;
    try {
      const versionId = await this.#readHeader(handle, path, key);
      const size = (await handle.stat()).size - HEADER_BYTES;
      return { key, size, version: versionOf(versionId) };
    } finally {
      await handle.close();
    }
  }

  // ---------------------------------------------------------------- list

  async list(prefix: string, options: ListOptions = {}): Promise<ListResult> {
    return collectListPages(this.listPages(prefix, options));
  }

  /**
   * Walks the directories in key order, so memory is bounded by a page plus
   * the names of one directory per level (the widest directory's names, not
   * the whole tree). Each page's objects are read (`head`) 32 at a time.
   */
  async *listPages(prefix: string, options: ListPagesOptions = {}): AsyncIterable<ListPage> {
    const { signal, delimiter } = options;
    try {
      throwIfAborted(signal);
      const pageSize = pageSizeOf(options, DEFAULT_LIST_PAGE_SIZE);
      let kept: { key: string; path: string }[] = [];
      let commonPrefixes: string[] = [];
      let lastPrefix: string | undefined;
      const page = async (): Promise<ListPage> => {
        const infos: (ObjectInfo | null)[] = new Array(kept.length).fill(null);
        let next = 0;
        const entries = kept;
        const worker = async () => {
          while (next < entries.length) {
            const index = next++;
            const entry = entries[index]!;
            throwIfAborted(signal);
            // A file deleted since the walk is simply not listed.
            infos[index] = await this.#info(entry.path, entry.key);
          }
        };
        await Promise.all(
          Array.from({ length: Math.min(LIST_READ_CONCURRENCY, entries.length) }, worker),
        );
        const result = {
          objects: infos.filter((info): info is ObjectInfo => info !== null),
          commonPrefixes,
        };
        kept = [];
        commonPrefixes = [];
        return result;
      };
      for await (const entry of this.#walk(prefix, signal)) {
        const at = delimiter ? entry.key.indexOf(delimiter, prefix.length) : -1;
        if (at === -1) kept.push(entry);
        else {
          // Keys come in order, so the keys sharing a rolled-up prefix are consecutive.
          const rolled = entry.key.slice(0, at + delimiter!.length);
          if (rolled === lastPrefix) continue;
          lastPrefix = rolled;
          commonPrefixes.push(rolled);
        }
        if (kept.length + commonPrefixes.length >= pageSize) {
          const full = await page();
          if (full.objects.length > 0 || full.commonPrefixes.length > 0) yield full;
        }
      }
      if (kept.length + commonPrefixes.length > 0) {
        const last = await page();
        if (last.objects.length > 0 || last.commonPrefixes.length > 0) yield last;
      }
    } catch (error) {
      throw this.#wrap(error, '', signal);
    }
  }

  /** Every object key starting with `prefix`, with its file path, in UTF-8 byte order of keys. */
  async *#walk(
    prefix: string,
    signal: AbortSignal | undefined,
  ): AsyncIterable<{ key: string; path: string }> {
    const slash = prefix.lastIndexOf('/');
    const directoryPart = slash === -1 ? '' : prefix.slice(0, slash);
    const rest = prefix.slice(slash + 1);
    let start = this.root;
    if (directoryPart !== '') {
      // The prefix fixes these directories; a prefix that is no valid key path matches nothing.
      let keyPath: KeyPath;
      try {
        keyPath = this.#keyPath(`${directoryPart}/x`);
      } catch (error) {
        if (InvalidKeyError.isInstance(error)) return;
        throw error;
      }
      try {
        const directory = await this.#directory(keyPath, false, signal);
        if (!directory) return;
        start = directory;
      } catch (error) {
        // A symbolic link on the way: nothing under it is listed.
        if (StoreError.isInstance(error)) return;
        throw error;
      }
    }
    // Within a directory, object `s` has the key `<dir>/s` and every key under
    // the sub-directory `s` starts with `<dir>/s/`; since a segment holds no
    // `/`, ordering the entries by `s` and `s/` respectively and descending in
    // that order yields the keys in order.
    type Entry = { order: string; segment: string; path: string; directory: boolean };
    const visit = async function* (
      directory: string,
      keyPrefix: string,
      filter: string,
    ): AsyncIterable<{ key: string; path: string }> {
      throwIfAborted(signal);
      let dirents: Dirent[];
      try {
        dirents = await readdir(directory, { withFileTypes: true });
      } catch (error) {
        const code = errorCode(error);
        // Gone (tidied after a delete) or not a directory: nothing to list there.
        if (code === 'ENOENT' || code === 'ENOTDIR') return;
        throw error;
      }
      const entries: Entry[] = [];
      for (const dirent of dirents) {
        const name = dirent.name;
        let isDirectory = dirent.isDirectory();
        let isFile = dirent.isFile();
        if (!isDirectory && !isFile && !dirent.isSymbolicLink()) {
          // Some filesystems do not report types in readdir.
          const info = await lstat(join(directory, name)).catch(() => null);
          isDirectory = info?.isDirectory() ?? false;
          isFile = info?.isFile() ?? false;
        }
        if (isDirectory && DIRECTORY_NAME.test(name)) {
          const segment = decodeSegment(name);
          if (!segment.startsWith(filter)) continue;
          entries.push({
            order: `${segment}/`,
            segment,
            path: join(directory, name),
            directory: true,
          });
        } else if (isFile) {
          const match = OBJECT_NAME.exec(name);
          if (!match) continue;
          const segment = decodeSegment(match[1]!);
          if (!segment.startsWith(filter)) continue;
          entries.push({ order: segment, segment, path: join(directory, name), directory: false });
        }
        // Symbolic links and foreign names are never listed or followed.
      }
      dirents.length = 0;
      entries.sort((a, b) => compareKeys(a.order, b.order));
      for (const entry of entries) {
        if (entry.directory) yield* visit(entry.path, `${keyPrefix}${entry.segment}/`, '');
        else yield { key: `${keyPrefix}${entry.segment}`, path: entry.path };
      }
    };
    if (directoryPart === '' && !(await stat(this.root).catch(() => null))?.isDirectory()) return;
    yield* visit(start, directoryPart === '' ? '' : `${directoryPart}/`, rest);
  }

  // ---------------------------------------------------------------- writes

  /** Writes header and body to a fresh temp file in the key's directory and fsyncs it. */
  async #stage(
    keyPath: KeyPath,
    source: UploadSource,
    signal: AbortSignal | undefined,
  ): Promise<Staged & { directory: string }> {
    for (let attempt = 0; ; attempt++) {
      throwIfAborted(signal);
      const directory = (await this.#directory(keyPath, true, signal))!;
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
          if (this.#fsync) await handle.sync();
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

  async put(
    key: string,
    body: Uint8Array,
    options: PutOptions = {},
  ): Promise<{ version: ObjectVersion }> {
    const { signal } = options;
    const keyPath = this.#keyPath(key);
    if (!(body instanceof Uint8Array))
      throw new StoreError('put needs the body as a Uint8Array', { key });
    try {
      throwIfAborted(signal);
      const { version } = await this.#write(keyPath, body, options.mode ?? 'overwrite', signal);
      return { version };
    } catch (error) {
      throw this.#wrap(error, key, signal);
    }
  }

  async upload(
    key: string,
    source: UploadSource,
    options: UploadOptions = {},
  ): Promise<{ version: ObjectVersion; size: number }> {
    const { signal } = options;
    const keyPath = this.#keyPath(key);
    const mode = options.mode ?? 'overwrite';
    if (mode !== 'create' && mode !== 'overwrite')
      throw new StoreError(`upload mode must be 'create' or 'overwrite'`, { key });
    try {
      throwIfAborted(signal);
      return await this.#write(keyPath, source, mode, signal);
    } catch (error) {
      throw this.#wrap(error, key, signal);
    }
  }

  async #write(
    keyPath: KeyPath,
    source: UploadSource,
    mode: PutMode,
    signal: AbortSignal | undefined,
  ): Promise<{ version: ObjectVersion; size: number }> {
    if (typeof mode === 'object') {
      // Fail fast before staging when the version is already wrong; the check
      // under the lock below is the one that counts.
      const directory = await this.#directory(keyPath, false, signal);
      const current = directory
        ? await this.#currentVersionId(join(directory, keyPath.name + OBJECT_SUFFIX), keyPath.key)
        : null;
      if (current === null)
        throw new PreconditionFailedError(keyPath.key, { detail: 'no object at the key' });
      if (!sameVersion(versionOf(current), mode.ifMatch))
        throw new PreconditionFailedError(keyPath.key);
    }
    const staged = await this.#stage(keyPath, source, signal);
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
        await this.#syncDirectory(staged.directory);
      } else {
        await this.#underLock(keyPath, staged.directory, signal, async (lock) => {
          if (typeof mode === 'object') {
            const current = await this.#currentVersionId(finalPath, keyPath.key);
            if (current === null)
              throw new PreconditionFailedError(keyPath.key, { detail: 'no object at the key' });
            if (!sameVersion(versionOf(current), mode.ifMatch))
              throw new PreconditionFailedError(keyPath.key);
          }
          throwIfAborted(signal);
          await this.#confirmLock(lock, keyPath.key);
          await rename(staged.tempPath, finalPath);
          await this.#syncDirectory(staged.directory);
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

  async delete(key: string, options: DeleteOptions = {}): Promise<void> {
    const { signal, ifMatch } = options;
    const keyPath = this.#keyPath(key);
    try {
      throwIfAborted(signal);
      const directory = await this.#directory(keyPath, false, signal);
      if (!directory) {
        if (ifMatch) throw new PreconditionFailedError(key, { detail: 'no object at the key' });
        return;
      }
      const finalPath = join(directory, keyPath.name + OBJECT_SUFFIX);
      let removed = false;
      const acquired = await this.#underLock(
        keyPath,
        directory,
        signal,
        async (lock) => {
          if (ifMatch) {
            const current = await this.#currentVersionId(finalPath, key);
            if (current === null)
              throw new PreconditionFailedError(key, { detail: 'no object at the key' });
            if (!sameVersion(versionOf(current), ifMatch)) throw new PreconditionFailedError(key);
          }
          throwIfAborted(signal);
          await this.#confirmLock(lock, key);
          try {
            await unlink(finalPath);
            removed = true;
          } catch (error) {
            if (errorCode(error) !== 'ENOENT') throw error;
          }
          if (removed) await this.#syncDirectory(directory);
        },
        false,
      );
      if (acquired === 'directory-gone') {
        // The directory vanished: the object is gone too.
        if (ifMatch) throw new PreconditionFailedError(key, { detail: 'no object at the key' });
        return;
      }
      if (removed) await this.#tidy(keyPath);
    } catch (error) {
      throw this.#wrap(error, key, signal);
    }
  }

  /** Removes the key's now-empty directories, deepest first; stops at the first non-empty one. */
  async #tidy(keyPath: KeyPath): Promise<void> {
    for (let depth = keyPath.directories.length; depth > 0; depth--) {
      const path = join(this.root, ...keyPath.directories.slice(0, depth));
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

  // ---------------------------------------------------------------- locks

  /**
   * Runs `critical` holding the key's lock (in-process mutex, then lock file).
   * With `createDirectory` false, returns `'directory-gone'` instead when the
   * directory disappears (the object cannot exist then).
   */
  async #underLock(
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
        lock = await this.#acquireFileLock(lockPath, signal);
        if (lock !== null) break;
        // ENOENT: the directory was tidied away.
        if (!createDirectory || attempt >= DIRECTORY_RETRIES) return 'directory-gone';
        await this.#directory(keyPath, true, signal);
      }
      try {
        await critical(lock);
      } finally {
        await this.#releaseFileLock(lock);
      }
      return 'done';
    });
  }

  /** Takes the lock file; `null` when its directory does not exist. */
  async #acquireFileLock(
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
        await this.#breakIfStale(lockPath);
        const delay = Math.min(25, 0.25 * 2 ** Math.min(attempt, 7)) * (0.5 + Math.random());
        await abortableSleep(delay, signal);
        continue;
      }
      const record: LockRecord = {
        pid: process.pid,
        host: this.#host,
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

  async #readLock(
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

  async #breakIfStale(lockPath: string): Promise<void> {
    const seen = await this.#readLock(lockPath);
    if (!seen) return;
    const ageMs = Date.now() - Number(seen.mtimeNs / 1_000_000n);
    const holderDead =
      seen.record !== null &&
      seen.record.host === this.#host &&
      seen.record.pid !== process.pid &&
      !processIsAlive(seen.record.pid);
    if (!holderDead && ageMs <= this.#staleLockMs) return;
    const displaced = join(lockPath, '..', `${STALE_PREFIX}${randomBytes(12).toString('hex')}`);
    try {
      await rename(lockPath, displaced);
    } catch {
      // Someone else released or broke it first.
      return;
    }
    const moved = await this.#readLock(displaced);
    const same =
      moved !== null &&
      moved.ino === seen.ino &&
      moved.mtimeNs === seen.mtimeNs &&
      moved.record?.nonce === seen.record?.nonce;
    if (!same) {
      // We moved a live lock taken after our look: put it back.
      await link(displaced, lockPath).catch(() => {
        // Someone took the free name in between (see the module comment's limit).
      });
    }
    await unlink(displaced).catch(() => {
      // Already gone: nothing to clean.
    });
  }

  /** Just before committing: the lock must still be ours, and not held for too long. */
  async #confirmLock(lock: HeldLock, key: string): Promise<void> {
    const heldMs = performance.now() - lock.acquiredAt;
    const seen = await this.#readLock(lock.path);
    if (seen?.record?.nonce !== lock.nonce || heldMs > this.#staleLockMs / 2)
      throw new ConflictError(key, {
        cause: new Error(`lock lost or held too long (${Math.round(heldMs)} ms); retry`),
      });
  }

  async #releaseFileLock(lock: HeldLock): Promise<void> {
    const seen = await this.#readLock(lock.path);
    // Only remove our own lock; one that was broken and retaken is someone else's.
    if (seen?.record?.nonce !== lock.nonce) return;
    await unlink(lock.path).catch(() => {
      // Already gone: nothing to release.
    });
  }
}
