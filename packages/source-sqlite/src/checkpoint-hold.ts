/**
 * The checkpoint-lock hold: while commits land, the tap holds SQLite's
 * checkpoint lock, so the application's own checkpoints answer busy at once
 * instead of running, and the tap's checkpoints (checkpoints.ts) are the
 * only ones.
 *
 * # Why
 *
 * With the tap's reader held, the WAL is seldom below the application's
 * auto-checkpoint size (1000 frames by default) under a steady load, and past
 * it SQLite checkpoints after every commit. Each such checkpoint takes the
 * checkpoint lock, tries the read marks and lets go: about four `fcntl` calls
 * per commit, which cost an application committing back to back (80 k
 * commits/s at `synchronous=NORMAL`) a fifth of its rate. With the lock held
 * here, such a checkpoint is one `fcntl` that fails; measured, the
 * application kept 0.99–1.05 of its rate alone (medians; see the README).
 *
 * # Guarantees and limits
 *
 * - A performance measure only. What may be checkpointed or overwritten rests
 *   on the tap's held reader (see tap.ts); the hold changes neither, and losing
 *   it at any moment loses nothing.
 * - A shared POSIX record lock on the `-shm` file's checkpoint byte (SQLite's
 *   unix VFS places it at byte 121), taken with `fcntl(F_SETLK)` through the
 *   `koffi` foreign-function package. Shared, so the read-only descriptor
 *   suffices; it still conflicts with the exclusive lock every checkpoint takes.
 * - The lock belongs to this process: the tap's own SQLite connections
 *   checkpoint through it without conflict, and their unlock drops it, so
 *   {@link CheckpointLockHold.take} asks the kernel again at every call
 *   (a call on a lock already held is one cheap system call).
 * - Never waits: each take tries a bounded number of times back to back and
 *   gives up until the next call when another process is checkpointing.
 * - Linux on x64 and arm64 only (the `struct flock` layout and `F_SETLK`
 *   value are those of 64-bit Linux). Elsewhere, or when `koffi` cannot load,
 *   or the kernel refuses the call for another reason than a conflict, the
 *   hold is `unavailable` with the reason, and the tap works as without it.
 */

import { createRequire } from 'node:module';

/** Byte of the `-shm` file SQLite's unix VFS locks as the checkpoint lock (120 + WAL_CKPT_LOCK). */
export const CHECKPOINT_LOCK_BYTE = 121;

/**
 * Tries per {@link CheckpointLockHold.take} before giving up until the next
 * call. An application past its auto-checkpoint size holds the lock for a
 * few microseconds per commit; a hundred tries back to back span more than
 * one of its commits.
 */
export const TAKE_ATTEMPTS = 100;

/** One `fcntl(F_SETLK)` on one byte: 0 when done, else the errno. */
export type ByteLockCall = (fd: number, kind: 'shared' | 'unlock', byte: number) => number;

/** Where the hold stands. */
export type CheckpointLockState = 'held' | 'let-go' | 'unavailable';

const LINUX_F_SETLK = 6;
const LINUX_F_RDLCK = 0;
const LINUX_F_UNLCK = 2;
const SEEK_SET = 0;
/** The conflict answers of F_SETLK (POSIX allows either). */
const EAGAIN = 11;
const EACCES = 13;

/** What loading the `fcntl` call gave: the call, or why there is none. */
export type ByteLockLoad = { readonly call: ByteLockCall } | { readonly unavailable: string };

/** This process's answer of {@link loadByteLockCall} (koffi's type names are process-wide). */
let loaded: ByteLockLoad | null = null;

/**
 * Loads `fcntl` from this process (the C library Node itself links) through
 * `koffi`, once per process; never throws.
 */
export function loadByteLockCall(): ByteLockLoad {
  loaded ??= loadOnce(process.platform, process.arch);
  return loaded;
}

/** {@link loadByteLockCall} on `platform`/`arch`, without the cache. */
export function loadOnce(platform: string, arch: string): ByteLockLoad {
  if (platform !== 'linux' || (arch !== 'x64' && arch !== 'arm64'))
    return { unavailable: `not supported on ${platform}/${arch} (64-bit Linux only)` };
  try {
    const koffi = createRequire(import.meta.url)('koffi') as typeof import('koffi');
    // Anonymous: a named koffi type could be declared once per process only.
    const flock = koffi.struct({
      l_type: 'short',
      l_whence: 'short',
      l_start: 'int64',
      l_len: 'int64',
      l_pid: 'int',
    });
    const fcntl = koffi.load(null).func('int fcntl(int fd, int cmd, ...)');
    const pointer = koffi.pointer(flock);
    return {
      call: (fd, kind, byte) => {
        const result = fcntl(fd, LINUX_F_SETLK, pointer, {
          l_type: kind === 'shared' ? LINUX_F_RDLCK : LINUX_F_UNLCK,
          l_whence: SEEK_SET,
          l_start: byte,
          l_len: 1,
          l_pid: 0,
        }) as number;
        return result === 0 ? 0 : koffi.errno();
      },
    };
  } catch (error) {
    return {
      unavailable: `cannot call fcntl: ${error instanceof Error ? error.message.split('\n')[0] : String(error)}`,
    };
  }
}

export class CheckpointLockHold {
  readonly #fd: number;
  /** `null` exactly while the hold is unavailable. */
  #call: ByteLockCall | null;
  #state: CheckpointLockState;
  #unavailableReason: string | null;
  #taken = 0;
  #missed = 0;

  /**
   * `shmFd`: a descriptor of the `-shm` file the caller keeps open for as
   * long as its SQLite connections (closing it would drop every POSIX lock
   * this process holds on the file, the read marks included).
   */
  constructor(shmFd: number, load: ByteLockLoad = loadByteLockCall()) {
    this.#fd = shmFd;
    if ('call' in load) {
      this.#call = load.call;
      this.#state = 'let-go';
      this.#unavailableReason = null;
    } else {
      this.#call = null;
      this.#state = 'unavailable';
      this.#unavailableReason = load.unavailable;
    }
  }

  /** `held` after a take that got the lock (until {@link letGo}, or SQLite's own unlock in this process). */
  get state(): CheckpointLockState {
    return this.#state;
  }

  /** Why the hold is unavailable; `null` while it is available. */
  get unavailableReason(): string | null {
    return this.#unavailableReason;
  }

  /** Takes that got the lock, and takes that gave up on another process's checkpoint; never drained. */
  get counts(): { readonly taken: number; readonly missed: number } {
    return { taken: this.#taken, missed: this.#missed };
  }

  /**
   * Takes the lock, asking the kernel even when it is believed held (the
   * tap's own checkpoints drop it). False when another process is
   * checkpointing through all {@link TAKE_ATTEMPTS} tries, or unavailable.
   */
  take(): boolean {
    const call = this.#call;
    if (call === null) return false;
    for (let attempt = 0; attempt < TAKE_ATTEMPTS; attempt += 1) {
      const errno = call(this.#fd, 'shared', CHECKPOINT_LOCK_BYTE);
      if (errno === 0) {
        this.#state = 'held';
        this.#taken += 1;
        return true;
      }
      if (errno !== EAGAIN && errno !== EACCES) {
        this.#disable(`fcntl(F_SETLK) failed with errno ${errno}`);
        return false;
      }
    }
    this.#state = 'let-go';
    this.#missed += 1;
    return false;
  }

  /** Lets the lock go: the application's own checkpoints run again. */
  letGo(): void {
    const call = this.#call;
    if (call === null || this.#state !== 'held') return;
    // An unlock of a lock SQLite's own unlock already dropped is harmless.
    const errno = call(this.#fd, 'unlock', CHECKPOINT_LOCK_BYTE);
    if (errno !== 0) this.#disable(`fcntl(F_SETLK, F_UNLCK) failed with errno ${errno}`);
    else this.#state = 'let-go';
  }

  #disable(reason: string): void {
    this.#call = null;
    this.#state = 'unavailable';
    this.#unavailableReason = reason;
  }
}
