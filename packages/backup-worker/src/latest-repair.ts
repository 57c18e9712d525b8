/**
 * Reading `LATEST` at resume, and healing it when it is unusable: pointed,
 * conditionally, at the newest manifest that passes the same checks when it
 * is this store's lineage; otherwise the lineage rules refuse, or, with none,
 * {@link LatestUnusableError}. A lost race re-reads `LATEST`; nothing is
 * deleted. Rules and costs: package README (An unusable LATEST at resume).
 */
import {
  latestKey,
  MAX_LATEST_BYTES,
  MAX_MANIFEST_BYTES,
  type Manifest,
  parseLatestRecord,
  parseManifest,
  parseManifestKey,
  serializeLatest,
  verifyLineage,
} from '@x/manifest';
import {
  AlreadyExistsError,
  ConflictError,
  errorMarker,
  hasErrorMarker,
  markError,
  NotFoundError,
  type ObjectVersion,
  PreconditionFailedError,
} from '@x/store';
import type { WorkerContext } from './context.ts';
import { BackupError, messageOf } from './errors.ts';

const UNUSABLE_MARKER = errorMarker('x.backup-worker.error', 'LatestUnusableError');

/**
 * LATEST is unusable and no manifest of the prefix passes the checks, so
 * there is no restore point to resume from. Permanent: retrying cannot
 * change it; the worker refuses the prefix with this message, which says
 * what is wrong and what the operator can do.
 */
export class LatestUnusableError extends BackupError {
  /** What is wrong with LATEST. */
  readonly latestProblem: string;
  /** Manifests tried, newest first, with why each was refused (at most {@link REFUSALS_NAMED}). */
  readonly refused: readonly { readonly key: string; readonly problem: string }[];

  constructor(
    prefix: string,
    latestProblem: string,
    tried: number,
    refused: readonly { readonly key: string; readonly problem: string }[],
  ) {
    const named = refused.map((entry) => `${entry.key}: ${entry.problem}`).join('; ');
    const manifests =
      tried === 0
        ? `there is no manifest under ${prefix}/manifest/ to point it at`
        : `none of the ${tried} manifest(s) under ${prefix}/manifest/ can be read and checked (${named}${tried > refused.length ? `; ${tried - refused.length} more` : ''})`;
    super(
      `${latestProblem}, and ${manifests}: there is no restore point to resume from. Nothing is uploaded or deleted. ` +
        `Point the worker at a new prefix, or put a readable manifest back and point ${latestKey(prefix)} at it, or delete ${latestKey(prefix)} to back up into this prefix afresh`,
      { code: 'BUCKET_STATE' },
    );
    this.name = 'LatestUnusableError';
    this.latestProblem = latestProblem;
    this.refused = refused;
    markError(this, UNUSABLE_MARKER);
  }

  static override isInstance(value: unknown): value is LatestUnusableError {
    return hasErrorMarker(value, UNUSABLE_MARKER);
  }
}

/** Refused manifests named in {@link LatestUnusableError}'s message; the rest are counted. */
export const REFUSALS_NAMED = 5;

/** Times LATEST is read again after a rewrite lost a race, before the step fails (and is retried). */
const RACE_RETRIES = 3;

/** What LATEST holds, as resume needs it. */
export type LatestState =
  | { readonly state: 'missing' }
  | {
      readonly state: 'ok';
      readonly version: ObjectVersion;
      readonly target: string;
      readonly manifest: Manifest;
      /** The lease generation LATEST says wrote it (`null`: it says none). */
      readonly leaseGeneration: number | null;
    }
  | {
      readonly state: 'unusable';
      readonly version: ObjectVersion;
      /** The manifest key LATEST names, when it names one. */
      readonly target: string | null;
      readonly problem: string;
    };

/** LATEST as resume uses it: the manifest it names (healed if need be), LATEST's version and target. */
export interface ResumedLatest {
  readonly manifest: Manifest | null;
  readonly version: ObjectVersion | null;
  readonly target: string | null;
  /** The lease generation LATEST now says wrote it; `undefined` when it says nothing usable. */
  readonly leaseGeneration?: number | null;
}

function isRefusal(error: unknown): boolean {
  return (
    PreconditionFailedError.isInstance(error) ||
    AlreadyExistsError.isInstance(error) ||
    ConflictError.isInstance(error) ||
    NotFoundError.isInstance(error)
  );
}

/**
 * The manifest at `key`, read and checked: it parses, every entry names its
 * lineage, and its commit is the key's. A string says why not; `null`: gone.
 */
async function loadChecked(ctx: WorkerContext, key: string): Promise<Manifest | string | null> {
  const object = await ctx.requests.getCapped(key, MAX_MANIFEST_BYTES);
  if (object === null) return null;
  if (object === 'too-large') return `larger than ${MAX_MANIFEST_BYTES} bytes`;
  let manifest: Manifest;
  try {
    manifest = parseManifest(object.body, { prefix: ctx.prefix });
    verifyLineage(manifest);
  } catch (error) {
    return `does not parse: ${messageOf(error)}`;
  }
  const keyCommit = parseManifestKey(ctx.prefix, key);
  if (keyCommit !== manifest.commitSeq)
    return `its key says commit ${keyCommit}, its body says ${manifest.commitSeq}`;
  return manifest;
}

function unusable(version: ObjectVersion, target: string | null, problem: string): LatestState {
  return { state: 'unusable', version, target, problem };
}

/** Reads LATEST and the manifest it names, and says whether both are usable. */
export async function readLatestState(ctx: WorkerContext): Promise<LatestState> {
  const { prefix, requests } = ctx;
  const latest = await requests.getCapped(latestKey(prefix), MAX_LATEST_BYTES);
  if (latest === null) return { state: 'missing' };
  if (latest === 'too-large') {
    // A capped read of an oversized object returns no version: the listing
    // has it (the version a conditional rewrite must match).
    const key = latestKey(prefix);
    const listed = await requests.list(key);
    const found = listed.objects.find((object) => object.key === key);
    if (found === undefined) return { state: 'missing' };
    return unusable(
      found.version,
      null,
      `LATEST does not name a manifest: it is larger than ${MAX_LATEST_BYTES} bytes`,
    );
  }
  let target: string;
  let leaseGeneration: number | null;
  try {
    ({ key: target, leaseGeneration } = parseLatestRecord(latest.body, { prefix }));
  } catch (error) {
    return unusable(latest.version, null, `LATEST does not name a manifest: ${messageOf(error)}`);
  }
  const loaded = await loadChecked(ctx, target);
  if (loaded === null || typeof loaded === 'string')
    return unusable(
      latest.version,
      target,
      `LATEST names ${target}, which ${loaded ?? 'does not exist'}`,
    );
  return { state: 'ok', version: latest.version, target, manifest: loaded, leaseGeneration };
}

/**
 * The newest manifest under the prefix that passes {@link loadChecked},
 * skipping `skip`, with the refusals met on the way.
 */
async function newestUsable(
  ctx: WorkerContext,
  skip: string | null,
): Promise<{
  found: { key: string; manifest: Manifest } | null;
  tried: number;
  refused: { key: string; problem: string }[];
}> {
  const listed = await ctx.requests.list(`${ctx.prefix}/manifest/`);
  const keys = listed.objects
    .map((object) => object.key)
    .filter((key) => key !== skip && parseManifestKey(ctx.prefix, key) !== undefined)
    .sort()
    .reverse();
  const refused: { key: string; problem: string }[] = [];
  let tried = 0;
  for (const key of keys) {
    const loaded = await loadChecked(ctx, key);
    // Deleted since the listing: not a restore point any more.
    if (loaded === null) continue;
    tried += 1;
    if (typeof loaded !== 'string') return { found: { key, manifest: loaded }, tried, refused };
    if (refused.length < REFUSALS_NAMED) refused.push({ key, problem: loaded });
  }
  return { found: null, tried, refused };
}

/**
 * LATEST for resume: the manifest it names when usable; otherwise healed as
 * the module describes. `null` manifest: there is no LATEST.
 * @throws LatestUnusableError when LATEST is unusable and no manifest passes.
 * @throws BackupError `BUCKET_STATE` when rewrites keep losing races (the step is retried).
 */
export async function resumeLatest(ctx: WorkerContext): Promise<ResumedLatest> {
  for (let attempt = 0; ; attempt += 1) {
    const state = await readLatestState(ctx);
    if (state.state === 'missing') return { manifest: null, version: null, target: null };
    if (state.state === 'ok') {
      const { manifest, version, target, leaseGeneration } = state;
      return { manifest, version, target, leaseGeneration };
    }
    const { found, tried, refused } = await newestUsable(ctx, state.target);
    if (found === null) throw new LatestUnusableError(ctx.prefix, state.problem, tried, refused);
    const local = await ctx.source.readLineage();
    const own = local ?? (await ctx.source.readParent())?.lineage ?? null;
    if (found.manifest.lineage !== own) {
      // Not this store's restore point: resume from it without writing, so
      // the lineage rules decide (they refuse the prefix).
      ctx.logger.warn('backup.latest_unusable', {
        problem: state.problem,
        newest: found.key,
        lineage: found.manifest.lineage,
      });
      return { manifest: found.manifest, version: state.version, target: found.key };
    }
    try {
      const version = await ctx.requests.putConditional(
        latestKey(ctx.prefix),
        new TextEncoder().encode(serializeLatest(found.key, ctx.leaseGeneration ?? undefined)),
        { ifMatch: state.version },
      );
      ctx.logger.warn('backup.latest_repaired', {
        problem: state.problem,
        from: state.target ?? '',
        to: found.key,
      });
      return {
        manifest: found.manifest,
        version,
        target: found.key,
        leaseGeneration: ctx.leaseGeneration,
      };
    } catch (error) {
      if (!isRefusal(error)) throw error;
      // Lost a race: LATEST changed since it was read. Read it again.
      if (attempt + 1 >= RACE_RETRIES)
        throw new BackupError(
          `LATEST kept changing while this worker repaired it (${RACE_RETRIES} attempts)`,
          { code: 'BUCKET_STATE', cause: error },
        );
    }
  }
}
