/**
 * A generation: a snapshot image (the database at the generation's start)
 * and the commit log after it. The snapshot is the database file as the
 * tap's pinned reader sees it, overlaid with the committed pages of the WAL
 * at the generation's start; it is readable, page for page, until released.
 *
 * Guarantees: the overlay is read from one WAL cycle (read again when the
 * WAL restarted meanwhile, a {@link SqliteWalRestartedUnderneathError}
 * after {@link SNAPSHOT_READ_ATTEMPTS} tries); a snapshot read counts as a
 * pin for as long as it runs, and fails rather than yield a page the
 * database file lacks.
 */
import { fstatSync, statSync } from 'node:fs';
import { databasePagesOnDisk } from './database-file.ts';
import { HeldLog } from './held-log.ts';
import { SqliteCaptureStoppedError, SqliteWalRestartedUnderneathError } from './sqlite-errors.ts';
import type { SqliteTapOptions } from './tap-options.ts';
import type { WalCapture } from './wal-capture.ts';
import { readInto, walCycleId } from './wal-file.ts';

const SNAPSHOT_CHUNK_PAGES = 256;
/** Overlay reads at a generation's start before a WAL that keeps restarting is an error. */
const SNAPSHOT_READ_ATTEMPTS = 5;

/** The database image at the start of a generation, read under the tap's pinned reader. */
export interface SqliteSnapshot {
  readonly pageSize: number;
  readonly databasePages: number;
  /** `pageSize × databasePages`. */
  readonly size: number;
  /** The generation's snapshot time (see {@link Generation.snapshotTime}). */
  readonly time: number;
  /** Streams the image, page for page, in chunks; each call starts from the beginning. */
  read(options?: { signal?: AbortSignal }): AsyncIterable<Uint8Array>;
}

/**
 * One generation: a snapshot image (the database at the generation's start)
 * and the commit log after it, held in memory from the first byte the worker
 * has not yet confirmed in the bucket.
 */
export interface Generation {
  readonly id: string;
  /**
   * Overlay of the snapshot: pages newer than the database file, at the
   * generation's start; only pages up to {@link snapshotDatabasePages}.
   */
  readonly snapshotPages: Map<number, Uint8Array>;
  readonly snapshotDatabasePages: number;
  /**
   * Wall-clock ms taken right after the snapshot's read transaction saw the
   * database: every commit it holds happened before, and every commit of the
   * log is captured (and dated) after it.
   */
  readonly snapshotTime: number;
  /** The snapshot is still readable (the reader it needs is pinned). */
  snapshotAvailable: boolean;
  readonly log: HeldLog;
}

/** Snapshot reads in progress (the held reader must not move while there is one). */
export interface SnapshotPins {
  count: number;
}

/** What a generation is read from: the tap's database file and its WAL capture. */
export interface GenerationSource {
  readonly path: string;
  /** The tap's descriptor of the database file (see `databaseFd` in tap.ts). */
  readonly databaseFd: number;
  readonly pageSize: number;
  /** The log's bounds, its page bases and the clock commits are dated by (see tap-options.ts). */
  readonly options: Pick<
    Required<SqliteTapOptions>,
    'maxHeldLogBytes' | 'maxHeldLogRecords' | 'maxPageBaseBytes' | 'wallNow'
  >;
  readonly capture: WalCapture;
}

/**
 * Starts a generation under the tap's held reader: the database as it is now
 * (the WAL's committed transactions read as the snapshot's overlay), the log
 * empty.
 * @throws SqliteWalRestartedUnderneathError when the WAL kept restarting while the overlay was read.
 */
export function startGenerationUnderReader(source: GenerationSource): Generation {
  const { capture } = source;
  // The current WAL's committed transactions are part of the snapshot, not
  // of the log: read them as the snapshot's overlay.
  let snapshotPages = new Map<number, Uint8Array>();
  for (let attempt = 1; ; attempt += 1) {
    const stat = statSync(source.path);
    capture.startFromDatabasePages(
      databasePagesOnDisk(source.databaseFd, source.pageSize, stat.size),
    );
    snapshotPages = new Map<number, Uint8Array>();
    capture.read(snapshotPages, Number.POSITIVE_INFINITY);
    // A restart while the overlay was read (possible only while the reader
    // holds read mark 0, when every frame of the old cycle is already in
    // the database file) can leave it holding a prefix of the old cycle
    // only, read before the new cycle's frames overwrote the rest: older
    // versions of pages that the database file has newer. Read again,
    // from the new cycle (which nothing can copy into the database file
    // while the reader holds mark 0).
    const read = capture.walHeader;
    const now = capture.walHeaderOnDisk();
    if (read === null || now === null || walCycleId(read) === walCycleId(now)) break;
    if (attempt >= SNAPSHOT_READ_ATTEMPTS)
      throw new SqliteWalRestartedUnderneathError(
        source.path,
        `the WAL restarted ${attempt} times while the snapshot was read`,
      );
    capture.reset();
  }
  // The cycle may have held pages above the size it ended at (the database
  // grew and shrank again in it): they are not the snapshot's, and as bases
  // they would have patches put over pages the restore never has.
  const databasePages = capture.databasePages;
  for (const pageNumber of snapshotPages.keys())
    if (pageNumber > databasePages) snapshotPages.delete(pageNumber);
  return {
    id: `${Date.now().toString(36)}-${Math.random().toString(16).slice(2, 10)}`,
    snapshotPages,
    snapshotDatabasePages: databasePages,
    snapshotTime: source.options.wallNow(),
    snapshotAvailable: true,
    // The overlay's pages are the snapshot's versions of them: bases from the start.
    log: new HeldLog(source.pageSize, {
      ...source.options,
      snapshotPages,
      snapshotDatabasePages: databasePages,
    }),
  };
}

/**
 * The generation's snapshot, page for page, read from `databaseFd` and the
 * overlay; `null` once released.
 */
export function snapshotOf(
  generation: Generation,
  source: { readonly path: string; readonly databaseFd: number; readonly pageSize: number },
  pins: SnapshotPins,
): SqliteSnapshot | null {
  if (!generation.snapshotAvailable) return null;
  const { path, databaseFd: fd, pageSize } = source;
  const databasePages = generation.snapshotDatabasePages;
  return {
    pageSize,
    databasePages,
    size: pageSize * databasePages,
    time: generation.snapshotTime,
    async *read(options: { signal?: AbortSignal } = {}) {
      pins.count += 1;
      try {
        const stat = fstatSync(fd);
        for (let first = 1; first <= databasePages; first += SNAPSHOT_CHUNK_PAGES) {
          options.signal?.throwIfAborted();
          if (!generation.snapshotAvailable)
            throw new Error('the snapshot was released while it was being read');
          const count = Math.min(SNAPSHOT_CHUNK_PAGES, databasePages - first + 1);
          const chunk = new Uint8Array(count * pageSize);
          const fromFile = readInto(fd, chunk, (first - 1) * pageSize);
          for (let i = 0; i < count; i += 1) {
            const page = generation.snapshotPages.get(first + i);
            if (page) chunk.set(page, i * pageSize);
            else if ((i + 1) * pageSize > fromFile.byteLength)
              throw SqliteCaptureStoppedError.truncated(path, stat.size, databasePages * pageSize);
          }
          yield chunk;
        }
      } finally {
        pins.count -= 1;
      }
    },
  };
}

/** Lets the generation's snapshot go: the held reader may move forward again. */
export function releaseSnapshotOf(generation: Generation): void {
  if (!generation.snapshotAvailable) return;
  generation.snapshotAvailable = false;
  generation.snapshotPages.clear();
}
