/**
 * `FsStore`'s listing: walks the directories in key order (memory bounded by
 * a page plus one directory's names per level), skips every name that is not
 * an object or a key directory (temp, lock and stale files, symbolic links),
 * and reads each page's objects' headers 32 at a time.
 */
import type { Dirent } from 'node:fs';
import { lstat, readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { throwIfAborted } from './abort.ts';
import { InvalidKeyError, StoreError } from './errors.ts';
import {
  DIRECTORY_NAME,
  decodeSegment,
  errorCode,
  type FsContext,
  type KeyPath,
  keyPathOf,
  LIST_READ_CONCURRENCY,
  OBJECT_NAME,
} from './fs-layout.ts';
import { fsError, keyDirectory, objectInfo } from './fs-paths.ts';
import { compareKeys } from './keys.ts';
import { DEFAULT_LIST_PAGE_SIZE, pageSizeOf } from './list-pages.ts';
import type { ListPage, ListPagesOptions, ObjectInfo } from './object-store.ts';

/**
 * Walks the directories in key order, so memory is bounded by a page plus
 * the names of one directory per level (the widest directory's names, not
 * the whole tree). Each page's objects are read (`head`) 32 at a time.
 */
export async function* fsListPages(
  context: FsContext,
  prefix: string,
  options: ListPagesOptions = {},
): AsyncIterable<ListPage> {
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
          infos[index] = await objectInfo(context, entry.path, entry.key);
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
    for await (const entry of walk(context, prefix, signal)) {
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
    throw fsError(context, error, '', signal);
  }
}

/** Every object key starting with `prefix`, with its file path, in UTF-8 byte order of keys. */
export async function* walk(
  context: FsContext,
  prefix: string,
  signal: AbortSignal | undefined,
): AsyncIterable<{ key: string; path: string }> {
  const slash = prefix.lastIndexOf('/');
  const directoryPart = slash === -1 ? '' : prefix.slice(0, slash);
  const rest = prefix.slice(slash + 1);
  let start = context.root;
  if (directoryPart !== '') {
    // The prefix fixes these directories; a prefix that is no valid key path matches nothing.
    let keyPath: KeyPath;
    try {
      keyPath = keyPathOf(`${directoryPart}/x`);
    } catch (error) {
      if (InvalidKeyError.isInstance(error)) return;
      throw error;
    }
    try {
      const directory = await keyDirectory(context, keyPath, false, signal);
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
  if (directoryPart === '' && !(await stat(context.root).catch(() => null))?.isDirectory()) return;
  yield* visit(start, directoryPart === '' ? '' : `${directoryPart}/`, rest);
}
