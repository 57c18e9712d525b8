/**
 * Which state a restore takes: the latest, a commit, or a named restore
 * point. One union instead of three options, so a combination that means
 * nothing (`rollForward` without a restore point) cannot be written.
 */
import { parseManifestKey } from '@x/manifest';
import { RestoreOptionsError } from './restore-errors.ts';

export type RestoreTarget = LatestTarget | CommitTarget | RestorePointTarget;

/**
 * LATEST's restore point, rolled forward over the chained segments shipped
 * after it. An unusable LATEST falls back to the newest sound restore point.
 */
export interface LatestTarget {
  readonly kind: 'latest';
}

/** The restore point covering `commitSeq`, with the WAL cut after its frame. */
export interface CommitTarget {
  readonly kind: 'commit';
  readonly commitSeq: number;
}

/** This manifest (a full key under the prefix); it never falls back to another. */
export interface RestorePointTarget {
  readonly kind: 'restore-point';
  readonly manifestKey: string;
  /** Cut after this commit, which the manifest must cover (rolled forward, with `rollForward`). */
  readonly commitSeq?: number;
  /**
   * Roll forward past the restore point over the chained segments of its
   * generation shipped after it, also when a later generation exists: what
   * a search by time finds past a generation's newest restore point.
   */
  readonly rollForward?: boolean;
}

export type RestoreTargetKind = RestoreTarget['kind'];

/** The target a restore takes when none is given. */
export const LATEST_TARGET: LatestTarget = Object.freeze({ kind: 'latest' });

interface KindFields {
  readonly required: readonly string[];
  readonly optional: readonly string[];
}

/** The fields beside `kind` each kind takes; any other is refused at run time, as the type refuses it. */
const FIELDS_OF_KIND: Readonly<Record<RestoreTargetKind, KindFields>> = {
  latest: { required: [], optional: [] },
  commit: { required: ['commitSeq'], optional: [] },
  'restore-point': { required: ['manifestKey'], optional: ['commitSeq', 'rollForward'] },
};

/** The options `target` replaced; set (from plain JavaScript), they would be ignored silently. */
const REPLACED_OPTIONS = ['manifestKey', 'commitSeq', 'rollForward'] as const;

/** The commit a target cuts after; undefined for the restore point's newest. */
export function requestedCommit(target: RestoreTarget): number | undefined {
  return target.kind === 'latest' ? undefined : target.commitSeq;
}

/** Whether the restore point is extended by the chained segments shipped after it. */
export function rollsForward(target: RestoreTarget): boolean {
  return (
    target.kind === 'latest' || (target.kind === 'restore-point' && target.rollForward === true)
  );
}

/**
 * Checks `options.target` at run time (callers from plain JavaScript get a
 * typed error, not a silent restore of another state).
 * @throws RestoreOptionsError naming `target`, or the field of it that is wrong.
 */
export function checkTargetOptions(normalizedPrefix: string, options: object): void {
  for (const replaced of REPLACED_OPTIONS) {
    if ((options as Record<string, unknown>)[replaced] !== undefined)
      throw new RestoreOptionsError(
        replaced,
        `was replaced by target: { kind: 'commit', commitSeq } or { kind: 'restore-point', manifestKey, commitSeq?, rollForward? }`,
      );
  }
  const target: unknown = (options as { target?: unknown }).target;
  if (target === undefined) return;
  const fields = checkedShape(target);
  const { commitSeq, manifestKey, rollForward } = fields;
  if (commitSeq !== undefined) checkCommitSeq(commitSeq);
  if (manifestKey !== undefined) checkManifestKey(normalizedPrefix, manifestKey);
  if (rollForward !== undefined && typeof rollForward !== 'boolean')
    throw new RestoreOptionsError(
      'target.rollForward',
      `must be a boolean, got ${show(rollForward)}`,
    );
}

/** The target's fields, once its kind is known and it holds what that kind needs and nothing else. */
function checkedShape(target: unknown): Record<string, unknown> {
  if (typeof target !== 'object' || target === null)
    throw new RestoreOptionsError('target', `must be an object with a kind, got ${show(target)}`);
  const fields = target as Record<string, unknown>;
  const kind = fields.kind;
  if (typeof kind !== 'string' || !Object.hasOwn(FIELDS_OF_KIND, kind))
    throw new RestoreOptionsError(
      'target',
      `kind must be 'latest', 'commit' or 'restore-point', got ${show(kind)}`,
    );
  const { required, optional } = FIELDS_OF_KIND[kind as RestoreTargetKind];
  for (const name of required) {
    if (fields[name] === undefined)
      throw new RestoreOptionsError('target', `kind '${kind}' needs a ${name}`);
  }
  for (const [name, value] of Object.entries(fields)) {
    const taken = name === 'kind' || required.includes(name) || optional.includes(name);
    if (value !== undefined && !taken)
      throw new RestoreOptionsError('target', `kind '${kind}' takes no ${name}`);
  }
  return fields;
}

function checkCommitSeq(commitSeq: unknown): void {
  if (typeof commitSeq !== 'number' || !Number.isSafeInteger(commitSeq) || commitSeq < 0)
    throw new RestoreOptionsError(
      'target.commitSeq',
      `must be a non-negative integer, got ${show(commitSeq)}`,
    );
}

function checkManifestKey(normalizedPrefix: string, manifestKey: unknown): void {
  if (
    typeof manifestKey !== 'string' ||
    parseManifestKey(normalizedPrefix, manifestKey) === undefined
  )
    throw new RestoreOptionsError(
      'target.manifestKey',
      `must be a manifest key of this prefix (${normalizedPrefix}/manifest/{20-digit commit}.json)`,
    );
}

function show(value: unknown): string {
  return typeof value === 'string' ? JSON.stringify(value) : String(value);
}
