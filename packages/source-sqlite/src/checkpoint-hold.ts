/**
 * The checkpoint-lock hold: while commits land, the tap holds SQLite's
 * checkpoint lock, so the application's per-commit checkpoints answer busy
 * at once and the tap's (checkpoints.ts) are the only ones. A performance
 * measure only: what may be checkpointed or overwritten rests on the held
 * reader (tap.ts); losing the hold loses nothing. A shared `fcntl(F_SETLK)`
 * lock, through `koffi`, on the `-shm` checkpoint byte (shared: the read-only
 * descriptor suffices). It is this process's, so the tap's own checkpoints
 * drop it and each take asks the kernel again (one cheap call when held).
 * Never waits; 64-bit Linux only, else `unavailable` with the reason. Why,
 * and what it measured: package README, _The checkpoint lock_.
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
    const available = 'call' in load;
    this.#call = available ? load.call : null;
    this.#state = available ? 'let-go' : 'unavailable';
    this.#unavailableReason = available ? null : load.unavailable;
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
