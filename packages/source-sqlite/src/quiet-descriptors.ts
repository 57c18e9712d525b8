/**
 * Reading the application's files without touching their metadata.
 *
 * The application's commits fsync the `-wal` file (node's SQLite calls
 * `fsync`, not `fdatasync`). On a journaling filesystem an fsync of a file
 * whose inode is dirty commits the journal, and two things backupd would
 * otherwise do many times a second dirty it:
 *
 * - a `read` updates the access time (`relatime` updates it whenever the
 *   file was modified since the last access, which for a WAL is always);
 * - a `stat` marks the file's timestamps as seen, after which kernels with
 *   fine-grained timestamps (Linux 6.13 and later) give the application's
 *   next write a new modification time even within the same clock tick.
 *
 * Either can turn one of the application's fsyncs into a journal commit (the
 * overhead benchmark could not tell the difference from its noise; see the
 * README). So the tap opens the files it reads with `O_NOATIME` where the kernel
 * allows it (the file's owner or `CAP_FOWNER`; otherwise it opens them
 * normally), keeps the `-wal` file open instead of reopening and `fstat`ing
 * it at every capture, and notices a replaced `-wal` file through
 * `/proc/self/fd` (no `stat` of the file).
 */
import { constants, openSync, readlinkSync } from 'node:fs';

const O_NOATIME: number = (constants as { O_NOATIME?: number }).O_NOATIME ?? 0;

/** Opens files for reading, with `O_NOATIME` until the kernel refuses it once. */
export class QuietOpener {
  #noAtime = O_NOATIME !== 0;

  /** A read-only descriptor of `path`. @throws like `openSync` (ENOENT included). */
  open(path: string): number {
    if (this.#noAtime) {
      try {
        return openSync(path, constants.O_RDONLY | O_NOATIME);
      } catch (error) {
        // EPERM: neither the owner nor CAP_FOWNER. Nothing was opened.
        if ((error as NodeJS.ErrnoException).code !== 'EPERM') throw error;
        this.#noAtime = false;
      }
    }
    return openSync(path, 'r');
  }

  /** `open`, but `null` when the file does not exist. */
  openIfExists(path: string): number | null {
    try {
      return this.open(path);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw error;
    }
  }
}

/**
 * Whether the file behind `fd` may no longer be the one at its path: `false`
 * only when `/proc/self/fd` shows it still linked. Where `/proc` cannot
 * answer, `true` (the caller reopens and compares inodes, as a `stat` would).
 */
export function maybeUnlinked(fd: number): boolean {
  try {
    return readlinkSync(`/proc/self/fd/${fd}`).endsWith(' (deleted)');
  } catch {
    return true;
  }
}
