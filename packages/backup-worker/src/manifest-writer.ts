/**
 * The worker's writes of restore points: the manifest, then `LATEST`, then
 * retention (planned by retention-plan.ts); and the read of `LATEST` at resume
 * (latest-repair.ts). A manifest is written replace-if-version against the
 * version this tenure wrote at its key, else create-if-absent, and over an
 * existing one only of this lineage (one of the lineage this store was
 * restored from is left alone: the same state). `LATEST` follows its manifest,
 * replace-if-version. A refused write is a conflict: the lease is dropped.
 */
import {
  latestKey,
  MAX_LATEST_BYTES,
  MAX_MANIFEST_BYTES,
  type Manifest,
  parseLatestRecord,
  parseManifest,
  parseManifestKey,
  restorableFrom,
  segmentGenerationPrefix,
  serializeLatest,
  serializeManifest,
} from '@x/manifest';
import {
  AlreadyExistsError,
  ConflictError,
  NotFoundError,
  type ObjectVersion,
  PreconditionFailedError,
  sameVersion,
} from '@x/store';
import type { WorkerContext } from './context.ts';
import { resumeLatest } from './latest-repair.ts';
import { buildRestorePoint } from './restore-point-builder.ts';
import {
  baseObjectsMayBeUnnamed,
  exactWindowSplit,
  type ListedManifest,
  planDeletions,
  type RetentionPolicy,
  retentionRuns,
  retiringGenerations,
  selectManifests,
  unnamedSideObjects,
} from './retention-plan.ts';

function isRefusal(error: unknown): boolean {
  return (
    PreconditionFailedError.isInstance(error) ||
    AlreadyExistsError.isInstance(error) ||
    ConflictError.isInstance(error)
  );
}

export class ManifestWriter {
  readonly #ctx: WorkerContext;
  readonly #retention: RetentionPolicy;

  constructor(ctx: WorkerContext, retention: RetentionPolicy) {
    this.#ctx = ctx;
    this.#retention = retention;
  }

  /**
   * Write the manifest of the current restore point, point LATEST at it,
   * apply retention. Side files must have been synced by the caller.
   */
  async write(): Promise<void> {
    const { prefix, clock, tenure } = this.#ctx;
    const generation = tenure.current;
    const built = buildRestorePoint(prefix, tenure, clock.wallNow(), this.#ctx.leaseGeneration);
    if (!generation || !built) return;
    const { key, manifest } = built;
    if (tenure.parentKeys.has(key)) return;
    const written = await this.#putManifest(
      key,
      new TextEncoder().encode(serializeManifest(manifest)),
    );
    // The parent's restore point at this commit count is the same state;
    // the next commit's restore point is this lineage's first.
    if (!written) return;
    tenure.manifestCache.set(key, { version: tenure.manifestVersions.get(key)!, manifest });
    await this.#putLatest(key);
    this.#ctx.logger.info('backup.restore_point_written', {
      manifestKey: key,
      commitSeq: manifest.commitSeq,
      walGeneration: manifest.walGeneration,
      segments: manifest.segments.length,
    });
    generation.inRestorePoint = generation.cursor;
    tenure.manifestDirty = false;
    tenure.lastManifestAt = clock.monotonicNow();
    if (retentionRuns(this.#retention) && this.#retentionDue()) {
      tenure.lastRetentionAt = clock.monotonicNow();
      await this.#applyRetention(key);
    }
  }

  /**
   * The manifest LATEST names, remembering LATEST's version and target. An
   * unusable LATEST is healed first (`latest-repair.ts`): it then names the
   * newest manifest that passes the checks.
   * @throws LatestUnusableError when LATEST is unusable and no manifest passes.
   */
  async readLatest(): Promise<Manifest | null> {
    const { tenure } = this.#ctx;
    const latest = await resumeLatest(this.#ctx);
    tenure.latestVersion = latest.version;
    tenure.latestTarget = latest.target;
    tenure.latestLeaseGeneration = latest.leaseGeneration;
    // Health names only a restore point that was read and checked: never a
    // corrupt one that LATEST happened to name.
    if (latest.target !== null && latest.manifest !== null)
      this.#noteLatest(latest.target, latest.manifest);
    return latest.manifest;
  }

  /**
   * `false` (nothing written) when `key` holds the manifest of the lineage
   * this store was restored from.
   */
  async #putManifest(key: string, bytes: Uint8Array): Promise<boolean> {
    const { logger, requests, tenure } = this.#ctx;
    if (tenure.parentLineage !== null && !tenure.manifestVersions.has(key)) {
      // A store without conditional writes would overwrite: look first.
      if ((await this.#manifestLineageAt(key))?.lineage === tenure.parentLineage) {
        logger.info('backup.parent_manifest_kept', { key });
        tenure.parentKeys.add(key);
        return false;
      }
    }
    const known = tenure.manifestVersions.get(key);
    let version: ObjectVersion;
    try {
      version = await requests.putConditional(key, bytes, known ? { ifMatch: known } : 'create');
    } catch (error) {
      if (AlreadyExistsError.isInstance(error)) {
        const existing = await this.#manifestLineageAt(key);
        if (existing && existing.lineage === tenure.parentLineage) {
          logger.info('backup.parent_manifest_kept', { key });
          tenure.parentKeys.add(key);
          return false;
        }
        if (!existing || existing.lineage !== tenure.ownLineage())
          throw this.#ctx.callbacks.conflict(`${key} is another lineage's manifest`, key, error);
        try {
          version = await requests.putConditional(key, bytes, { ifMatch: existing.version });
        } catch (retryError) {
          if (isRefusal(retryError))
            throw this.#ctx.callbacks.conflict(
              `${key} changed since this worker read it`,
              key,
              retryError,
            );
          throw retryError;
        }
      } else if (isRefusal(error)) {
        throw this.#ctx.callbacks.conflict(`${key} changed since this worker wrote it`, key, error);
      } else throw error;
    }
    tenure.manifestVersions.set(key, version);
    return true;
  }

  async #manifestLineageAt(
    key: string,
  ): Promise<{ lineage: string | null; version: ObjectVersion } | null> {
    const existing = await this.#ctx.requests.getCapped(key, MAX_MANIFEST_BYTES);
    if (existing === null) return null;
    // An oversized object is nobody's restore point: treated as another writer's (never overwritten).
    if (existing === 'too-large') return { lineage: null, version: { etag: 'unknown: oversized' } };
    try {
      return {
        lineage: parseManifest(existing.body, { prefix: this.#ctx.prefix }).lineage,
        version: existing.version,
      };
    } catch {
      // An unparseable object is nobody's restore point; it is treated as
      // another writer's (never overwritten).
      return { lineage: null, version: existing.version };
    }
  }

  /** Health's view of the restore point LATEST names (`manifest`: its parsed manifest, when at hand). */
  #noteLatest(target: string, manifest?: Manifest): void {
    const commitSeq = parseManifestKey(this.#ctx.prefix, target);
    const createdAt = (manifest ?? this.#ctx.tenure.manifestCache.get(target)?.manifest)?.createdAt;
    this.#ctx.health.latestRestorePoint =
      commitSeq === undefined
        ? null
        : { manifestKey: target, commitSeq, ...(createdAt === undefined ? {} : { createdAt }) };
  }

  /** Point LATEST at `target`, replace-if-version against the version last written or read. */
  async #putLatest(target: string): Promise<void> {
    const { prefix, requests, tenure } = this.#ctx;
    const key = latestKey(prefix);
    // LATEST already names this manifest: rewriting the same bytes costs a
    // request and, on services whose versions are content hashes (S3 ETags),
    // would leave two writes with one version, which replace-if-version
    // cannot tell apart. A change by another writer is still caught at the
    // next LATEST write, which names a different manifest.
    // A new tenure rewrites it once, so that it says which tenure wrote it.
    const leaseGeneration = this.#ctx.leaseGeneration;
    if (
      tenure.latestTarget === target &&
      tenure.latestVersion &&
      tenure.latestLeaseGeneration === leaseGeneration
    )
      return;
    for (let settled = false; ; settled = true) {
      try {
        tenure.latestVersion = await requests.putConditional(
          key,
          new TextEncoder().encode(serializeLatest(target, leaseGeneration ?? undefined)),
          tenure.latestVersion ? { ifMatch: tenure.latestVersion } : 'create',
        );
        break;
      } catch (error) {
        if (isRefusal(error) || NotFoundError.isInstance(error)) {
          if (!settled && (await this.#settleLatestInDoubt())) continue;
          throw this.#ctx.callbacks.conflict(
            'LATEST changed since this worker last wrote or read it',
            key,
            error,
          );
        }
        // No answer: the service may have applied it (see #settleLatestInDoubt).
        tenure.latestInDoubt = target;
        throw error;
      }
    }
    tenure.latestInDoubt = null;
    tenure.latestTarget = target;
    tenure.latestLeaseGeneration = leaseGeneration;
    this.#noteLatest(target);
  }

  /**
   * After a LATEST write whose answer never came was refused on the next
   * write: `true` when that write did land, so the refusal was against this
   * worker's own write. The proof: LATEST names the manifest the unanswered
   * write named, and that manifest is still the version this tenure wrote
   * (so LATEST points at this tenure's restore point, exactly the state the
   * write was to leave). Then LATEST's version now is the one to write
   * against. Anything else (another manifest named, that manifest replaced,
   * LATEST gone or unreadable) is `false`: a conflict, as without a doubt.
   * Costs two GETs, only after a write whose outcome was unknown.
   */
  async #settleLatestInDoubt(): Promise<boolean> {
    const { prefix, requests, tenure } = this.#ctx;
    const doubt = tenure.latestInDoubt;
    tenure.latestInDoubt = null;
    const written = doubt === null ? undefined : tenure.manifestVersions.get(doubt);
    if (doubt === null || written === undefined) return false;
    const latest = await requests.getCapped(latestKey(prefix), MAX_LATEST_BYTES);
    if (latest === null || latest === 'too-large') return false;
    let named: string;
    let namedGeneration: number | null;
    try {
      ({ key: named, leaseGeneration: namedGeneration } = parseLatestRecord(latest.body, {
        prefix,
      }));
    } catch {
      return false;
    }
    if (named !== doubt || namedGeneration !== this.#ctx.leaseGeneration) return false;
    const manifest = await requests.getCapped(doubt, MAX_MANIFEST_BYTES);
    if (manifest === null || manifest === 'too-large' || !sameVersion(manifest.version, written))
      return false;
    tenure.latestVersion = latest.version;
    tenure.latestTarget = doubt;
    tenure.latestLeaseGeneration = namedGeneration;
    this.#ctx.logger.info('backup.latest_write_settled', { latestTarget: doubt });
    return true;
  }

  /** Whether a retention pass is due: the first of a tenure, then one per `intervalMs` at most. */
  #retentionDue(): boolean {
    const last = this.#ctx.tenure.lastRetentionAt;
    return last === null || this.#ctx.clock.monotonicNow() - last >= this.#retention.intervalMs;
  }

  /**
   * Keep the manifests of this lineage the policy keeps (the newest `count`,
   * the `windowMs` window by the clock's wall time, or both), then delete what only
   * the dropped ones named (the rules: `retention-plan.ts`). Cost: one LIST
   * of `manifest/`; when something is dropped, one LIST each of `snapshots/`
   * and `archives/` and one per retiring generation.
   */
  async #applyRetention(justWritten: string): Promise<void> {
    const { prefix, requests, tenure, health, logger, source } = this.#ctx;
    const selection = selectManifests({
      manifests: await this.#listManifests(),
      lineage: tenure.ownLineage(),
      retain: this.#retention.count,
      retainFor: this.#retention.windowMs,
      wallNow: this.#ctx.clock.wallNow(),
      justWritten,
      latestTarget: tenure.latestTarget,
    });
    health.restorePoints = selection.restorePoints;
    const oldest = selection.kept[0]?.manifest;
    health.oldestRestorePoint =
      oldest === undefined
        ? null
        : {
            commitSeq: oldest.commitSeq,
            restorableFrom: restorableFrom(oldest),
            createdAt: oldest.createdAt,
          };
    if (!tenure.sideSwept && !selection.doubt) {
      await this.#deleteUnnamedSideObjects(selection);
      tenure.sideSwept = true;
    }
    const compactedAway = exactWindowSplit({
      prefix,
      compactedAway: tenure.compactedAway,
      wallNow: this.#ctx.clock.wallNow(),
      keepMs: this.#retention.keepReplacedFineMs,
    });
    if (selection.dropped.length === 0 && compactedAway.due.size === 0) return;
    const generations = retiringGenerations({
      selection,
      allocated: tenure.allocated,
      current: tenure.current?.number,
      retired: tenure.retiredSegments,
    });
    await this.#deleteAll(
      selection.dropped.map(({ key }) => key),
      (key) => tenure.manifestCache.delete(key),
    );
    if (selection.doubt) {
      logger.warn('backup.retention_conservative', {
        reason:
          'a manifest under the prefix could not be read; only surplus manifests were deleted',
      });
      return;
    }
    // Snapshots and archives are listed only when one may have lost its last
    // restore point (a dropped manifest named one no kept manifest names, or
    // a generation retires): dropping what a compaction superseded, at most
    // every restore point, costs no listing.
    const baseObjects: string[] = [];
    if (baseObjectsMayBeUnnamed(prefix, selection, generations)) {
      for (const top of ['snapshots', 'archives']) {
        const all = await requests.list(`${prefix}/${top}/`);
        for (const object of all.objects) baseObjects.push(object.key);
      }
    }
    const segmentObjects = new Map<number, string[]>();
    for (const g of generations.retiring) {
      const listed = await requests.list(segmentGenerationPrefix(prefix, g));
      segmentObjects.set(
        g,
        listed.objects.map((o) => o.key),
      );
    }
    const doomed = planDeletions({
      prefix,
      selection,
      generations,
      baseObjects,
      // Only names this source writes: a manifest claiming this lineage is
      // still bucket content, and names it lists beyond these are not ours.
      ownSideNames: new Set([...(source.sideFileNames ?? []), ...(source.chainFileNames ?? [])]),
      segmentObjects,
      compactedAway: compactedAway.due,
      keptForExactWindow: compactedAway.kept,
    });
    await this.#deleteAll(doomed, (key) => {
      tenure.sideKeysWritten.delete(key);
      for (const [content, entry] of tenure.sealedSide)
        if (entry.key === key) tenure.sealedSide.delete(content);
      tenure.compactedAway.delete(key);
    });
    // Retired for good: its prefix is listed once, not at every retention.
    for (const g of generations.retiring) {
      tenure.generations.delete(g);
      tenure.retiredSegments.add(g);
    }
    for (const [n, archive] of tenure.archives)
      if (!generations.referenced.has(archive.entry.key)) tenure.archives.delete(n);
  }

  /**
   * Once per tenure: the side objects an earlier writer left unnamed
   * ({@link unnamedSideObjects}). Costs one LIST of `side/`, only for a
   * source that writes side files.
   */
  async #deleteUnnamedSideObjects(selection: ReturnType<typeof selectManifests>): Promise<void> {
    const { prefix, requests, tenure, source, logger } = this.#ctx;
    const ownSideNames = new Set([
      ...(source.sideFileNames ?? []),
      ...(source.chainFileNames ?? []),
    ]);
    if (ownSideNames.size === 0) return;
    const listed = await requests.list(`${prefix}/side/`);
    const held = new Set(tenure.sideKeysWritten);
    for (const entry of tenure.sealedSide.values()) held.add(entry.key);
    for (const { entry } of tenure.side.values()) held.add(entry.key);
    const unnamed = unnamedSideObjects({
      prefix,
      listed: listed.objects.map((object) => object.key),
      ownSideNames,
      selection,
      held,
    });
    if (unnamed.length === 0) return;
    await this.#deleteAll(unnamed, () => {});
    logger.info('backup.unnamed_side_objects_deleted', { count: unnamed.length });
  }

  /**
   * Deletes `keys` in batches and forgets each one deleted; a key that could
   * not be deleted stays remembered, and the first failure is thrown once
   * every key was tried.
   */
  async #deleteAll(keys: readonly string[], forget: (key: string) => void): Promise<void> {
    const failed = await this.#ctx.requests.deleteMany(keys);
    const remaining = new Set(failed.map(({ key }) => key));
    for (const key of keys) if (!remaining.has(key)) forget(key);
    if (failed[0] !== undefined) throw failed[0].error;
  }

  /** Every manifest under the prefix, in key order (oldest first), parsed or `null`; gone ones left out. */
  async #listManifests(): Promise<ListedManifest[]> {
    const listed = await this.#ctx.requests.list(`${this.#ctx.prefix}/manifest/`);
    const keys = listed.objects.map((o) => o.key).filter((k) => k.endsWith('.json'));
    keys.sort();
    const versions = new Map(listed.objects.map((o) => [o.key, o.version]));
    const manifests: ListedManifest[] = [];
    for (const key of keys) {
      const manifest = await this.#readManifestCached(key, versions.get(key));
      if (manifest !== undefined) manifests.push({ key, manifest });
    }
    return manifests;
  }

  /**
   * A manifest under the prefix, parsed: from the cache when the listed
   * version is the one cached (a manifest is read once per version, not at
   * every retention), else read. `null`: it does not parse; `undefined`: gone.
   */
  async #readManifestCached(
    key: string,
    listedVersion: ObjectVersion | undefined,
  ): Promise<Manifest | null | undefined> {
    const { tenure } = this.#ctx;
    const cached = tenure.manifestCache.get(key);
    if (cached && listedVersion && sameVersion(cached.version, listedVersion))
      return cached.manifest;
    const object = await this.#ctx.requests.getCapped(key, MAX_MANIFEST_BYTES);
    // An oversized object under manifest/ reads as unparseable: it is never
    // counted, and retention turns conservative.
    if (object === 'too-large') return null;
    if (object === null) {
      tenure.manifestCache.delete(key);
      return undefined;
    }
    let manifest: Manifest | null;
    try {
      manifest = parseManifest(object.body, { prefix: this.#ctx.prefix });
    } catch {
      manifest = null;
    }
    tenure.manifestCache.set(key, { version: object.version, manifest });
    return manifest;
  }
}
