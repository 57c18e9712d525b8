/**
 * One `replicate` per database on a host: a lock the kernel releases when
 * its holder dies, and the lease instance id kept with it across restarts.
 * Both live in the database's sidecar directory `.<db>-backupd/` (an earlier
 * release's `<db>-backupd.lock` and `.json` are moved in first):
 * - `lock`: an empty SQLite file held by an open `BEGIN EXCLUSIVE`
 *   transaction, so a POSIX `fcntl` lock that dies with the process;
 * - `holder.json`: pid, host, since, the replicas' URLs (no credentials)
 *   and the instance id, which the next holder on the same host keeps.
 * Nothing else in the holder may open the lock file: closing any descriptor
 * of it drops the lock. Why this design, and its limits:
 * docs/decisions/2026-12-06-database-lock.md.
 */
import { existsSync, readFileSync, realpathSync, renameSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { newInstanceId } from '@x/lease';
import {
  adoptLegacySidecars,
  ensureSidecarDirectory,
  SQLITE_LEGACY_SIDECAR_SUFFIXES,
  sqliteSidecarFiles,
} from '@x/source-sqlite';

/** Who holds (or last held) a database's lock, as its holder wrote it. */
export interface LockHolder {
  /** The lease instance id the holder's workers use. */
  readonly instanceId: string;
  readonly host: string;
  readonly pid: number;
  /** When the holder took the lock (ISO 8601). */
  readonly since: string;
  /** Where it backs the database up to, without credentials. */
  readonly replicas: readonly string[];
}

/** The files of a database's lock. */
export interface LockFiles {
  /** The SQLite file whose lock is held. */
  readonly lock: string;
  /** The holder's record and the kept instance id. */
  readonly holder: string;
}

/** How long a contender waits for a lock held for an instant (`backupd lease` looking at it). */
const BUSY_TIMEOUT_MS = 250;
/** How long a refused contender waits for a holder that took the lock but has not written who it is yet. */
const HOLDER_RECORD_WAIT_MS = 2000;

/** Who holds a lock, for messages: pid, host, since when, where to (no credentials: the record has none). */
export function describeLockHolder(files: LockFiles, holder: LockHolder | undefined): string {
  return holder
    ? `pid ${holder.pid} on ${holder.host}, since ${holder.since}, backing up to ${holder.replicas.join(', ') || '(no replica named)'}`
    : `a process that has not written who it is to ${files.holder} yet`;
}

/**
 * Another `replicate` of the same database runs on this host (or started
 * on a host sharing this file system): nothing was started. `holder` is
 * what it wrote about itself, undefined when it had not written it yet.
 */
export class DatabaseInUseError extends Error {
  /** Whether the same call, made again later, may succeed with nothing else changed. */
  get retryable(): boolean {
    return true;
  }

  override readonly name = 'DatabaseInUseError';
  readonly code = 'DATABASE_IN_USE';
  readonly database: string;
  readonly lockFile: string;
  readonly holder: LockHolder | undefined;

  constructor(database: string, files: LockFiles, holder: LockHolder | undefined) {
    const who = describeLockHolder(files, holder);
    super(
      `${database} is already being replicated by another backupd replicate (${who}); one replicate per database: stop that one first (the lock ${files.lock} is released when it exits)`,
    );
    this.database = database;
    this.lockFile = files.lock;
    this.holder = holder;
  }
}

/**
 * The lock files of `database`: in its sidecar directory. Symbolic links
 * (of the database or of its directory) are resolved first, so two names of
 * one file by symlink share one lock.
 */
export function lockFiles(database: string): LockFiles {
  const real = realDatabasePath(database);
  const files = sqliteSidecarFiles(real);
  return { lock: files.lock, holder: files.holder };
}

/** The database's path with symbolic links resolved (as far as it exists). */
function realDatabasePath(database: string): string {
  const absolute = resolve(database);
  if (existsSync(absolute)) return realpathSync(absolute);
  if (existsSync(dirname(absolute)))
    return join(realpathSync(dirname(absolute)), basename(absolute));
  return absolute;
}

/** A held lock. `release()` gives it up (also done by the kernel at exit). */
export interface DatabaseLock {
  readonly database: string;
  readonly files: LockFiles;
  /** The lease instance id to use for this database's workers (kept from the previous holder on this host, or new). */
  readonly instanceId: string;
  /** Whether `instanceId` was kept from an earlier holder on this host. */
  readonly reused: boolean;
  release(): void;
}

/**
 * Takes the lock of `database`, then writes who holds it (with the kept or
 * a new instance id).
 * @throws DatabaseInUseError — another live process holds it; nothing was written.
 */
export function lockDatabase(database: string, replicas: readonly string[]): DatabaseLock {
  const real = realDatabasePath(database);
  const files = lockFiles(database);
  // An earlier release's lock moves in first (a holder of it keeps holding it).
  adoptLegacySidecars(real, ['lock']);
  ensureSidecarDirectory(real);
  const connection = new DatabaseSync(files.lock, { timeout: BUSY_TIMEOUT_MS });
  try {
    // Nothing is ever written to it: the journal in memory keeps an
    // exclusive transaction from leaving a `-journal` file beside it.
    connection.exec('PRAGMA journal_mode = MEMORY');
    connection.exec('PRAGMA locking_mode = EXCLUSIVE');
    connection.exec('BEGIN EXCLUSIVE');
  } catch (error) {
    connection.close();
    if (!isBusy(error)) throw error;
    throw new DatabaseInUseError(database, files, awaitHolderRecord(files));
  }
  // Holding the lock: no replicate of an earlier release runs on this database.
  try {
    adoptLegacySidecars(real, ['holder']);
  } catch (error) {
    connection.close();
    throw error;
  }
  const previous = readHolder(files);
  const reused = previous !== undefined && previous.host === hostname();
  const holder: LockHolder = {
    instanceId: reused ? previous.instanceId : newInstanceId(),
    host: hostname(),
    pid: process.pid,
    since: new Date().toISOString(),
    replicas: [...replicas],
  };
  try {
    const temporary = `${files.holder}.${process.pid}.tmp`;
    writeFileSync(temporary, `${JSON.stringify(holder, null, 2)}\n`);
    renameSync(temporary, files.holder);
  } catch (error) {
    connection.close();
    throw error;
  }
  let released = false;
  return {
    database,
    files,
    instanceId: holder.instanceId,
    reused,
    release() {
      if (released) return;
      released = true;
      // Closing the connection ends the transaction and drops the lock; the
      // JSON stays, so the next holder keeps the instance id.
      connection.close();
    },
  };
}

/**
 * No lock at all (`BACKUPD_DATABASE_LOCK=off`): a fresh instance id, never
 * one kept from an earlier run (nothing proves that run dead, so its lease
 * is not reclaimed: a restart waits out the TTL), and nothing written beside
 * the database. The bucket lease alone keeps two replicates apart.
 */
export function unlockedDatabase(database: string): DatabaseLock {
  return {
    database,
    files: lockFiles(database),
    instanceId: newInstanceId(),
    reused: false,
    release() {},
  };
}

/**
 * Locks every database, or none.
 * @throws DatabaseInUseError for the first database held elsewhere (the locks taken before it are released).
 */
export function lockDatabases(
  databases: readonly { readonly path: string; readonly replicas: readonly string[] }[],
): DatabaseLock[] {
  const locks: DatabaseLock[] = [];
  try {
    for (const database of databases) locks.push(lockDatabase(database.path, database.replicas));
  } catch (error) {
    for (const lock of locks) lock.release();
    throw error;
  }
  return locks;
}

/** What is known of a database's lock from outside: free or held, and what its (last) holder wrote. */
export interface LockState {
  readonly files: LockFiles;
  /** `free`: no live process holds it (or it never existed). */
  readonly state: 'held' | 'free';
  readonly holder: LockHolder | undefined;
}

/**
 * Looks at the lock of `database` without taking it: a read-only open and
 * one read, refused while a holder has it (for an instant, it delays a
 * replicate starting then by up to that read). Creates nothing. Never call
 * it from the process that holds the lock: opening the file there would
 * release it (POSIX locks).
 */
export function inspectDatabaseLock(database: string): LockState {
  const files = existingLockFiles(database);
  const holder = readHolder(files);
  if (!existsSync(files.lock)) return { files, state: 'free', holder };
  let connection: DatabaseSync | undefined;
  try {
    connection = new DatabaseSync(files.lock, { readOnly: true, timeout: 0 });
    connection.prepare('SELECT count(*) FROM sqlite_master').get();
    return { files, state: 'free', holder };
  } catch (error) {
    if (isBusy(error)) return { files, state: 'held', holder: readHolder(files) };
    throw error;
  } finally {
    connection?.close();
  }
}

/** The lock files, or an earlier release's when only those exist (it may be running). */
function existingLockFiles(database: string): LockFiles {
  const files = lockFiles(database);
  if (existsSync(files.lock)) return files;
  const real = realDatabasePath(database);
  const legacy = {
    lock: `${real}${SQLITE_LEGACY_SIDECAR_SUFFIXES.lock}`,
    holder: `${real}${SQLITE_LEGACY_SIDECAR_SUFFIXES.holder}`,
  };
  return existsSync(legacy.lock) ? legacy : files;
}

/** Whether `pid` names a running process on this host (one of another user counts). */
export function processRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function isBusy(error: unknown): boolean {
  const code = (error as { errcode?: number }).errcode;
  // SQLITE_BUSY (5) and its extended codes (5 | n << 8).
  return typeof code === 'number' && (code & 0xff) === 5;
}

/**
 * The holder record of a lock found held. A holder writes it just after
 * taking the lock, so a contender that arrives in between finds none, or the
 * previous holder's: wait a little for one naming a live process.
 */
function awaitHolderRecord(files: LockFiles): LockHolder | undefined {
  const deadline = Date.now() + HOLDER_RECORD_WAIT_MS;
  for (;;) {
    const holder = readHolder(files);
    const current =
      holder !== undefined &&
      (holder.host !== hostname() || (holder.pid !== process.pid && processRunning(holder.pid)));
    if (current || Date.now() >= deadline) return current ? holder : undefined;
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 50);
  }
}

/** The holder record, or undefined when missing or not one (it is then written anew by the next holder). */
function readHolder(files: LockFiles): LockHolder | undefined {
  let value: unknown;
  try {
    value = JSON.parse(readFileSync(files.holder, 'utf8'));
  } catch {
    return undefined;
  }
  if (typeof value !== 'object' || value === null) return undefined;
  const record = value as Record<string, unknown>;
  const { instanceId, host, pid, since, replicas } = record;
  if (
    typeof instanceId !== 'string' ||
    instanceId.length === 0 ||
    instanceId.length > 256 ||
    [...instanceId].some((char) => char.charCodeAt(0) < 0x20 || char.charCodeAt(0) === 0x7f) ||
    typeof host !== 'string' ||
    typeof pid !== 'number' ||
    !Number.isSafeInteger(pid) ||
    typeof since !== 'string' ||
    !Array.isArray(replicas) ||
    !replicas.every((replica) => typeof replica === 'string')
  )
    return undefined;
  return { instanceId, host, pid, since, replicas: replicas as string[] };
}
