/**
 * Reading the application's files without touching their metadata: an
 * access-time update or a `stat` between two of the application's `-wal`
 * fsyncs can turn the next into a journal commit. So the tap opens what it
 * reads with `O_NOATIME` where allowed (owner or `CAP_FOWNER`), keeps the
 * `-wal` file open rather than reopening and `fstat`ing it per capture, and
 * notices a replaced one through `/proc/self/fd`. Why:
 * docs/decisions/2026-12-06-quiet-reads.md.
 */
import {
  closeSync,
  constants,
  fstatSync,
  openSync,
  readdirSync,
  readlinkSync,
  statSync,
} from 'node:fs';

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

/** A descriptor from {@link LockedFileDescriptors}: read through `fd`, give it back once. */
export interface SharedDescriptor {
  readonly fd: number;
  /** Gives the descriptor back; a second call does nothing. */
  release(): void;
}

interface Entry {
  readonly key: string;
  /** Every descriptor this registry opened on the file (a race at open may add one). */
  readonly fds: number[];
  users: number;
}

/**
 * This process's read-only descriptors of the files SQLite keeps POSIX locks
 * on (the database and its `-shm`), shared by every tap of the process.
 * Closing any descriptor of a file drops every lock the process holds on it,
 * an embedding application's included, so one given back while the file has
 * another descriptor open (`/proc/self/fd`, else `/dev/fd`) is parked for the
 * next tap of that file and closed at a later call once none is; without a
 * listing it stays open until exit. Why:
 * docs/decisions/2026-12-05-embedding-restart-faults-replaced.md.
 */
export class LockedFileDescriptors {
  readonly #opener = new QuietOpener();
  readonly #entries = new Map<string, Entry>();
  readonly #listing: () => Map<string, number> | null;

  /** `listing`: this process's open descriptors counted by file identity (tests replace it). */
  constructor(listing: () => Map<string, number> | null = openDescriptorsByFile) {
    this.#listing = listing;
  }

  /**
   * A descriptor of the file at `path`: the one already held for that file,
   * or a new one. @throws like `openSync` (ENOENT included).
   */
  acquire(path: string): SharedDescriptor {
    this.#sweep();
    const atPath = identityKey(statSync(path));
    let entry = this.#entries.get(atPath);
    if (entry === undefined) {
      const fd = this.#opener.open(path);
      const key = identityKey(fstatSync(fd));
      // Replaced between the stat and the open: file it under what was opened.
      entry = this.#entries.get(key);
      if (entry === undefined) {
        entry = { key, fds: [fd], users: 0 };
        this.#entries.set(key, entry);
      } else entry.fds.push(fd);
    }
    entry.users += 1;
    const held = entry;
    let released = false;
    return {
      fd: held.fds[0] as number,
      release: () => {
        if (released) return;
        released = true;
        held.users -= 1;
        this.#sweep();
      },
    };
  }

  /** Descriptors this registry keeps open (in use or parked). */
  get openCount(): number {
    let count = 0;
    for (const entry of this.#entries.values()) count += entry.fds.length;
    return count;
  }

  /** Closes each unused entry whose file no other descriptor of the process has open. */
  #sweep(): void {
    const unused = [...this.#entries.values()].filter((entry) => entry.users === 0);
    if (unused.length === 0) return;
    const open = this.#listing();
    if (open === null) return;
    for (const entry of unused) {
      if ((open.get(entry.key) ?? 0) > entry.fds.length) continue;
      this.#entries.delete(entry.key);
      for (const fd of entry.fds) closeSync(fd);
    }
  }
}

function identityKey(stat: { dev: number; ino: number }): string {
  return `${stat.dev}:${stat.ino}`;
}

/**
 * This process's open descriptors counted by the identity of the file
 * behind each; `null` when no listing can be read.
 */
export function openDescriptorsByFile(): Map<string, number> | null {
  for (const directory of ['/proc/self/fd', '/dev/fd']) {
    let names: string[];
    try {
      names = readdirSync(directory);
    } catch {
      continue;
    }
    const counts = new Map<string, number>();
    for (const name of names) {
      try {
        const key = identityKey(statSync(`${directory}/${name}`));
        counts.set(key, (counts.get(key) ?? 0) + 1);
      } catch {
        // Closed since the listing (the listing's own descriptor among them).
      }
    }
    return counts;
  }
  return null;
}

/** The process-wide registry every tap takes its database and `-shm` descriptors from. */
export const lockedFileDescriptors = new LockedFileDescriptors();
