/**
 * Shipping: a new restore point when the engine's generation, snapshot or WAL
 * file changed (snapshot, archives, chain and side files under keys of their
 * own), the durable WAL as immutable `.seg` segments, and the manifest that
 * names them (through {@link ManifestWriter}). Every read is bracketed by two
 * observations and kept only if nothing moved and the WAL did not shrink; the
 * step defers otherwise, so nothing half-read is uploaded. A generation number
 * is burned when allocated: a failed attempt's objects belong to a generation
 * no manifest will name. Archives are reused only when number, length and CRC
 * match (sealed: when the bucket's copy opens to the local bytes and is sealed
 * to exactly this worker's recipients). With `encryption`, archives, chain
 * and side files are sealed too, as whole-file envelopes under `.bko` keys.
 * Segment envelope and entries: package README (`maxSegmentBytes`).
 */
import type {
  DurablePosition,
  FileObservation,
  OpenedArchive,
  ShippedProgress,
  WalRange,
} from '@x/engine';
import {
  archiveKey,
  archiveObjectKey,
  Crc32,
  crc32Hex,
  type FileEntry,
  parseArchiveKey,
  segmentObjectKey,
  snapshotObjectKey,
} from '@x/manifest';
import { encodeSegmentObjectAsync, SegmentObjectError } from '@x/wal-segment';
import type { WorkerContext } from './context.ts';
import { BackupError } from './errors.ts';
import { keyOf, sameWalKey } from './health.ts';
import type { ManifestWriter } from './manifest-writer.ts';
import { sameEnvelopeContent } from './same-envelope-content.ts';
import { type ArchiveContent, archiveContent, sealedArchiveHolds } from './sealed-archive.ts';
import { sideContentOf, sideFileEntry } from './side-file-entry.ts';
import { type Generation, type KnownArchive, noteShippedTime } from './tenure.ts';
import { unchangedBetween } from './unchanged-between.ts';

export interface ShipperOptions {
  readonly maxSegmentBytes: number;
  readonly manifestIntervalMs: number;
}

export class Shipper {
  readonly #ctx: WorkerContext;
  readonly #writer: ManifestWriter;
  readonly #options: ShipperOptions;

  constructor(ctx: WorkerContext, writer: ManifestWriter, options: ShipperOptions) {
    this.#ctx = ctx;
    this.#writer = writer;
    this.#options = options;
  }

  #runSignal(): AbortSignal {
    return this.#ctx.callbacks.runSignal();
  }

  #defer(why: string): void {
    this.#ctx.callbacks.defer(why);
  }

  /** A restore point is due: something changed, and the manifest interval has passed. */
  manifestDue(): boolean {
    const tenure = this.#ctx.tenure;
    return (
      tenure.manifestDirty &&
      (tenure.lastManifestAt === null ||
        this.#ctx.clock.monotonicNow() - tenure.lastManifestAt >= this.#options.manifestIntervalMs)
    );
  }

  /** Sync the side files, then write the manifest of the current restore point (and LATEST, retention). */
  async writeManifest(): Promise<void> {
    await this.#syncSideFiles();
    await this.#writer.write();
  }

  /** What the bucket holds of the WAL being shipped, for the source's `afterStep`. */
  progress(): ShippedProgress | null {
    const g = this.#ctx.tenure.current;
    if (!g) return null;
    return {
      ...g.key,
      shippedLength: g.cursor,
      inRestorePoint: g.inRestorePoint,
      walGeneration: g.number,
    };
  }

  /**
   * Start a generation beside the snapshot on disk: open the snapshot and
   * archives and read the chain files while the files hold still, upload them
   * under keys of their own, ship the generation's durable WAL from offset 0,
   * write the manifest.
   */
  async uploadBase(position: DurablePosition, disk: FileObservation): Promise<void> {
    const { tenure, prefix, requests } = this.#ctx;
    const opened = await this.#ctx.source.openRestorePoint();
    try {
      const after = await this.#ctx.source.observe();
      const positionAfter = await this.#ctx.source.durablePosition();
      if (
        !unchangedBetween(disk, after) ||
        (opened.snapshot?.identity ?? null) !== disk.snapshot ||
        !sameWalKey(keyOf(positionAfter), keyOf(position)) ||
        positionAfter.snapshotInProgress === true
      ) {
        this.#defer("the store's files changed while a restore point was read");
        return;
      }
      // Burn the number now: objects a failed attempt leaves belong to a
      // generation no manifest will ever name.
      const number = tenure.nextGeneration;
      tenure.nextGeneration += 1;
      tenure.generations.add(number);
      tenure.allocated.add(number);

      const present = await this.#uploadArchives(opened.archives ?? [], number);
      const chain: FileEntry[] = [];
      for (const file of opened.chainFiles ?? [])
        chain.push(await sideFileEntry(this.#ctx, file.name, file.bytes));
      const floor = opened.floor ?? 0;
      let archiveFrames = 0;
      for (const n of present) archiveFrames += tenure.archives.get(n)?.entry.frames ?? 0;
      let snapshot: FileEntry | null = null;
      if (opened.snapshot) {
        const key = snapshotObjectKey(
          prefix,
          number,
          floor + archiveFrames + opened.snapshotCommits,
        );
        try {
          // Compressed, in the object envelope (see requests.putFile).
          snapshot = await requests.putFile(
            opened.snapshot,
            key,
            null,
            opened.snapshotCommits,
            tenure.ownLineage(),
            { kind: 'snapshot', generation: number, recipients: this.#ctx.keys.recipients },
          );
        } catch (error) {
          if (!SegmentObjectError.isInstance(error) || error.field !== 'body') throw error;
          // The snapshot read differently the second time: nothing was
          // stored; a later attempt takes a new restore point.
          this.#defer(`the snapshot changed between its two reads (${error.problem})`);
          return;
        }
        this.#ctx.logger.info('backup.snapshot_uploaded', {
          key,
          walGeneration: number,
          bytes: snapshot.size,
        });
      }
      await this.#syncSideFiles();
      tenure.snapshot = snapshot;
      tenure.baseArchives = present;
      tenure.current = {
        number,
        key: keyOf(position),
        cursor: 0,
        inRestorePoint: 0,
        floor,
        startedAt: this.#ctx.clock.wallNow(),
        chain,
        segments: [],
        snapshotTime: opened.snapshotTime ?? null,
        commitTime: opened.snapshotTime ?? null,
      };
      this.recordShipped();
      tenure.manifestDirty = true;
    } finally {
      await opened.close();
    }
    await this.shipSegments();
    await this.writeManifest();
  }

  /**
   * Upload the archives of a new restore point, reusing each one the bucket
   * already holds with the same number and content, stored as this worker
   * stores archives (raw in clear, sealed to its recipients when it
   * encrypts). Returns their numbers in chain order.
   */
  async #uploadArchives(archives: readonly OpenedArchive[], generation: number): Promise<number[]> {
    const { tenure, prefix, requests, source, keys } = this.#ctx;
    const present: number[] = [];
    for (const archive of archives) {
      const known = tenure.archives.get(archive.number);
      if (known !== undefined && (await this.#holds(known, archive)))
        tenure.archives.set(archive.number, { ...known, length: archive.size, verified: true });
      else if (keys.encrypts) {
        // The header states the frames before the body: counted first.
        const content = await this.#readArchive(archive);
        const entry = await requests.putFile(
          archive,
          archiveObjectKey(prefix, generation, archive.number),
          null,
          content.frames,
          tenure.ownLineage(),
          { kind: 'file', generation, recipients: keys.recipients },
        );
        tenure.archives.set(archive.number, { length: archive.size, entry, verified: true });
      } else {
        const entry = await requests.putFile(
          archive,
          archiveKey(prefix, generation, archive.number),
          source.frameCounter(),
          0,
          tenure.ownLineage(),
        );
        tenure.archives.set(archive.number, { length: entry.size, entry, verified: true });
      }
      present.push(archive.number);
    }
    return present;
  }

  /** Whether the bucket's archive `known` holds `archive`'s bytes, stored as this worker stores archives. */
  async #holds(known: KnownArchive, archive: OpenedArchive): Promise<boolean> {
    const sealed = parseArchiveKey(this.#ctx.prefix, known.entry.key)?.layout === 'object';
    if (sealed !== this.#ctx.keys.encrypts) return false;
    if (known.length !== null && known.length !== archive.size) return false;
    if (known.verified) return true;
    // Seeded from the bucket: the same number and length are not the same
    // bytes until the CRC (sealed: the opened copy) says so.
    if (!sealed) {
      const crc = new Crc32();
      for await (const chunk of archive.read({ signal: this.#runSignal() })) crc.update(chunk);
      return crc.hex() === known.entry.crc32;
    }
    return sealedArchiveHolds(this.#ctx, known.entry, await this.#readArchive(archive));
  }

  #readArchive(archive: OpenedArchive): Promise<ArchiveContent> {
    return archiveContent(archive, this.#ctx.source.frameCounter(), this.#runSignal());
  }

  /**
   * Upload each per-manifest side file whose content changed since it was
   * last uploaded; forget one that no longer exists locally.
   */
  async #syncSideFiles(): Promise<void> {
    const source = this.#ctx.source;
    if (source.readSideFile === undefined) return;
    for (const name of source.sideFileNames ?? []) {
      const known = this.#ctx.tenure.side.get(name);
      const read = await source.readSideFile(name, known?.identity ?? null);
      if (read === null) {
        if (this.#ctx.tenure.side.delete(name)) this.#ctx.tenure.manifestDirty = true;
        continue;
      }
      if (read.bytes === null) continue;
      const content = sideContentOf(name, read.bytes);
      let entry: FileEntry;
      if (known && known.content === content) entry = known.entry;
      else {
        this.#ctx.tenure.manifestDirty = true;
        entry = await sideFileEntry(this.#ctx, name, read.bytes);
      }
      this.#ctx.tenure.side.set(name, { identity: read.identity, content, entry });
    }
  }

  // ── WAL segments ──────────────────────────────────────────────────────────

  /**
   * Ship the durable WAL bytes of the current generation not shipped yet, in
   * segments of at most `maxSegmentBytes`. Each read is bracketed by two
   * observations and dropped if anything that pairs it with the snapshot
   * moved. The next segment is read while the current one uploads (uploads
   * stay one at a time and in order). Bounded: it ships up to the durable
   * length seen when it starts and stops early once a restore point is due;
   * the rest is the next step's (docs/decisions/2026-12-06-bounded-steps.md).
   */
  async shipSegments(): Promise<void> {
    const generation = this.#ctx.tenure.current;
    if (!generation) return;
    const target = (await this.#ctx.source.durablePosition()).durableLength;
    let next = await this.#readSegment(generation, generation.cursor, target);
    while (next !== null) {
      const { range } = next;
      const key = segmentObjectKey(this.#ctx.prefix, generation.number, range.start, range.end);
      // Compressed off the event loop: the source's capture ticks keep
      // their pace while a large segment compresses.
      const { keys } = this.#ctx;
      const encoded = await encodeSegmentObjectAsync(
        range.bytes,
        {
          codec: 'zstd',
          kind: 'segment',
          generation: generation.number,
          start: range.start,
          end: range.end,
          commits: range.frames,
          previousCrc32: this.#previousCrc32(generation, range.start),
          lineage: this.#ctx.tenure.ownLineage(),
        },
        {
          ...(range.crc32 === undefined ? {} : { bodyCrc32: range.crc32 }),
          recipients: keys.recipients,
        },
      );
      const encodedCrc32 = crc32Hex(encoded);
      const upload = this.#ctx.requests.putImmutable(
        key,
        encoded,
        encodedCrc32,
        keys.encrypts ? sameEnvelopeContent(encoded, range.bytes, keys.identities) : undefined,
      );
      const stopAfterThis = this.manifestDue();
      const prefetch = stopAfterThis
        ? Promise.resolve(null)
        : this.#readSegment(generation, range.end, target);
      let stored: Uint8Array;
      try {
        stored = await upload;
      } catch (error) {
        // The read ahead is worthless without this segment; its own failure
        // is not the one to report.
        await prefetch.catch(() => {});
        throw error;
      }
      if (this.#ctx.tenure.current !== generation) return;
      // What the bucket holds: a retried PUT may have found its first attempt's bytes.
      const crc32 = stored === encoded ? encodedCrc32 : crc32Hex(stored);
      this.#ctx.callbacks.segmentStored(key, stored);
      generation.cursor = range.end;
      generation.segments.push({
        key,
        size: stored.byteLength,
        crc32,
        frames: range.frames,
        lineage: this.#ctx.tenure.ownLineage(),
      });
      noteShippedTime(generation, range);
      this.recordShipped();
      this.#ctx.tenure.manifestDirty = true;
      next = await prefetch;
    }
  }

  /**
   * The chain CRC of the segment starting at `start`: the stored CRC-32 of
   * the segment that ends there, or for the first segment the generation's
   * snapshot object's (0 when the restore point has no snapshot).
   */
  #previousCrc32(generation: Generation, start: number): number {
    const last = generation.segments.at(-1);
    if (last !== undefined) return Number.parseInt(last.crc32, 16);
    if (start !== 0)
      throw new BackupError(
        `generation ${generation.number} has no shipped segment ending at ${start} to chain to`,
      );
    const snapshot = this.#ctx.tenure.snapshot;
    return snapshot === null ? 0 : Number.parseInt(snapshot.crc32, 16);
  }

  /**
   * Read the complete frames from `cursor` up to `target` (the source may
   * return one frame past it when a single frame is larger), bracketed by
   * two observations; `null` when there is nothing to ship or the files
   * moved (the next step starts the new generation).
   */
  async #readSegment(
    generation: Generation,
    cursor: number,
    target: number,
  ): Promise<{ range: WalRange } | null> {
    const before = await this.#ctx.source.observe();
    const position = await this.#ctx.source.durablePosition();
    if (
      before.intentPending === true ||
      before.snapshot !== generation.key.snapshot ||
      before.wal !== generation.key.wal ||
      !sameWalKey(keyOf(position), generation.key)
    )
      return null;
    const until = Math.min(target, position.durableLength);
    if (until <= cursor) return null;
    const range = await this.#ctx.source.readWalRange(cursor, until, {
      maxBytes: this.#options.maxSegmentBytes,
      signal: this.#runSignal(),
    });
    const after = await this.#ctx.source.observe();
    if (
      !unchangedBetween(before, after) ||
      !sameWalKey(keyOf(await this.#ctx.source.durablePosition()), generation.key)
    )
      return null;
    if (range === null) return null;
    if (range.start !== cursor || range.end <= range.start)
      throw new BackupError(
        `the source returned WAL range ${range.start}-${range.end} for cursor ${cursor}`,
      );
    return { range };
  }

  recordShipped(): void {
    const g = this.#ctx.tenure.current;
    if (g) this.#ctx.health.shipped = { key: g.key, cursor: g.cursor };
  }
}
