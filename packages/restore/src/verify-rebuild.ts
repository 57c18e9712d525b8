/**
 * verify's rebuild phase: a restore point whose objects all verified is
 * restored into a scratch directory with the engine's check
 * (`RestoreCheck`), which rebuilds it and proves the result; the directory
 * is removed before the next one is made, so at most one rebuild is on disk
 * at a time. What the check finds is a problem of that restore point.
 */

import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AgeIdentity } from '@x/age-envelope';
import type { RestoreCheck } from '@x/engine';
import type { Manifest } from '@x/manifest';
import type { ObjectStore } from '@x/store';
import { restore } from './restore.ts';
import { RestoredStateError, RestoreError, RestoreOptionsError } from './restore-errors.ts';

export interface VerifyRebuild {
  /** The engine's check (e.g. `@x/source-sqlite`'s `sqliteRestoreCheck()`). */
  readonly check: RestoreCheck;
  /**
   * Which restore points: `newest` (default) rebuilds LATEST's target and
   * the newest restore point of each generation; `all` every one.
   */
  readonly points?: 'newest' | 'all';
  /** Where each rebuild's temporary directory is made. Default: the OS's temporary directory. */
  readonly scratchDirectory?: string;
}

/** A problem a rebuild found, in verify's vocabulary (see `VerifyProblem`). */
export interface RebuildProblem {
  readonly kind: 'rebuild' | 'integrity-check' | 'page-hash';
  readonly message: string;
  readonly page?: number;
  readonly expected?: string;
  readonly found?: string;
}

/** A restore point eligible for a rebuild: its manifest verified, objects included. */
export interface RebuildCandidate {
  readonly key: string;
  readonly manifest: Manifest;
}

/** The scratch directory, checked before anything is read. @throws RestoreOptionsError */
export async function scratchDirectoryOf(rebuild: VerifyRebuild): Promise<string> {
  const directory = rebuild.scratchDirectory ?? tmpdir();
  let isDirectory = false;
  try {
    isDirectory = (await stat(directory)).isDirectory();
  } catch {
    // Reported below, with the path.
  }
  if (!isDirectory)
    throw new RestoreOptionsError('rebuild.scratchDirectory', `${directory} is not a directory`);
  return directory;
}

/**
 * The keys to rebuild, oldest first: every candidate the check recognizes
 * with `all`; otherwise the newest of each generation and LATEST's target.
 */
export function rebuildChoice(
  candidates: readonly RebuildCandidate[],
  latestKey: string | null,
  rebuild: VerifyRebuild,
): string[] {
  const recognized = candidates.filter((candidate) => rebuild.check.recognizes(candidate.manifest));
  const chosen = new Set<string>();
  if (rebuild.points === 'all') {
    for (const candidate of recognized) chosen.add(candidate.key);
  } else {
    const newest = new Map<number, RebuildCandidate>();
    for (const candidate of recognized) {
      const held = newest.get(candidate.manifest.walGeneration);
      if (held === undefined || candidate.manifest.commitSeq > held.manifest.commitSeq)
        newest.set(candidate.manifest.walGeneration, candidate);
    }
    for (const candidate of newest.values()) chosen.add(candidate.key);
    if (latestKey !== null && recognized.some((candidate) => candidate.key === latestKey))
      chosen.add(latestKey);
  }
  return [...chosen].sort();
}

function problemOf(finding: RestoredStateError['findings'][number]): RebuildProblem {
  return {
    kind: finding.check,
    message: finding.message,
    ...(finding.page === undefined ? {} : { page: finding.page }),
    ...(finding.expected === undefined ? {} : { expected: finding.expected }),
    ...(finding.found === undefined ? {} : { found: finding.found }),
  };
}

/**
 * Restores `key` into a fresh directory under `scratch` with the check's
 * materializer and removes the directory again. Returns the problems found
 * (none: it rebuilt and passed), or `vanished` when retention removed the
 * restore point meanwhile. Store failures and aborts throw.
 */
export async function rebuildRestorePoint(
  store: ObjectStore,
  prefix: string,
  key: string,
  rebuild: VerifyRebuild,
  scratch: string,
  {
    signal,
    identities,
  }: {
    readonly signal: AbortSignal | undefined;
    readonly identities: readonly AgeIdentity[] | undefined;
  },
): Promise<RebuildProblem[] | 'vanished'> {
  const directory = await mkdtemp(join(scratch, 'backupd-verify-'));
  try {
    await restore(store, prefix, directory, {
      target: { kind: 'restore-point', manifestKey: key },
      materializer: rebuild.check.materializer,
      ...(signal === undefined ? {} : { signal }),
      ...(identities === undefined ? {} : { identities }),
    });
    return [];
  } catch (error) {
    if (RestoredStateError.isInstance(error)) return error.findings.map(problemOf);
    if (!RestoreError.isInstance(error)) throw error;
    // Retention may retire the manifest, or an object it names, mid-restore.
    const head = await store.head(key, signal === undefined ? {} : { signal });
    if (head === null) return 'vanished';
    return [{ kind: 'rebuild', message: `the restore of ${key} fails: ${error.message}` }];
  } finally {
    await rm(directory, { recursive: true, force: true });
  }
}
