/**
 * Checks of a parsed manifest that restore and verify share, beyond what
 * `parseManifest` already enforces: whatever a manifest says, a restore must
 * never write outside its target, never read outside its prefix, and rebuild
 * the WAL only from segments that chain from offset 0 in its generation.
 *
 * Every check returns problems as sentences rather than throwing, so verify
 * can report all of them at once and restore can refuse naming all of them.
 */

import {
  type Manifest,
  parseArchiveName,
  parseManifestKey,
  parseSegmentKey,
  plainNameProblem,
  verifyLineage,
} from '@x/manifest';
import { isValidKey, normalizePrefix } from '@x/store';
import { RestoreOptionsError } from './restore-errors.ts';

/**
 * Why `name` is not a plain file name that stays inside a directory, or
 * `undefined` when it is: `@x/manifest`'s plain-name rules (not empty, not
 * `.`/`..`, no `/` or `\`, no control character, well-formed, at most 255
 * bytes), and no leading `.` — hidden names are reserved for restore's own
 * staging directory.
 */
export function fileNameProblem(name: unknown): string | undefined {
  const problem = plainNameProblem(name);
  if (problem !== undefined) return problem;
  if ((name as string).startsWith('.')) return 'starts with "."';
  return undefined;
}

/**
 * Why `name` cannot be a layout's companion directory (see
 * `RestoreMaterializer.companionDirectory`), or `undefined` when it can: a
 * plain name that starts with `.` and is not restore's staging directory's.
 */
export function companionDirectoryProblem(name: unknown): string | undefined {
  const problem = plainNameProblem(name);
  if (problem !== undefined) return problem;
  if (!(name as string).startsWith('.')) return 'does not start with "."';
  if ((name as string).startsWith('.restore-staging-')) return "is named like restore's staging";
  return undefined;
}

/**
 * Why `name` is not a file restore may place in its target, or `undefined`:
 * a plain name ({@link fileNameProblem}), or `<companion>/<plain name>` when
 * the layout has a companion directory.
 */
export function placedNameProblem(
  name: string,
  companionDirectory: string | undefined,
): string | undefined {
  if (companionDirectory !== undefined && name.startsWith(`${companionDirectory}/`))
    return fileNameProblem(name.slice(companionDirectory.length + 1));
  return fileNameProblem(name);
}

/** True when `key` is a valid object key strictly under `${prefix}/${directory}/`. */
function isKeyUnder(key: unknown, prefix: string, directory: string): boolean {
  return (
    typeof key === 'string' &&
    isValidKey(key) &&
    key.startsWith(`${prefix}/${directory}/`) &&
    key.length > `${prefix}/${directory}/`.length
  );
}

/**
 * Where a file entry's object may live, by the entry's name: the snapshot
 * under `snapshots/`, archives under `archives/`, side files under
 * `side/{name}/`. Another engine's snapshot may carry another name, so any
 * other name may also live under `snapshots/`.
 */
function allowedDirectories(name: string): string[] {
  if (name === 'snapshot.bin') return ['snapshots'];
  if (parseArchiveName(name) !== undefined) return ['archives'];
  return [`side/${name}`, 'snapshots'];
}

export { restorableFrom } from '@x/manifest';

/** One reason a manifest cannot be restored from. */
export interface RestorePointProblem {
  /** `lineage`: an entry names another lineage; `layout`: a name, key or range is unsafe or inconsistent. */
  readonly kind: 'lineage' | 'layout';
  readonly message: string;
}

/**
 * Every problem that makes `manifest` (read from `manifestKey`) unsafe or
 * inconsistent to restore from, as sentences. Empty when it is sound.
 */
export function restorePointProblems(
  prefix: string,
  manifestKey: string,
  manifest: Manifest,
): string[] {
  return classifiedProblems(prefix, manifestKey, manifest).map((problem) => problem.message);
}

/** {@link restorePointProblems}, each with its kind. */
export function classifiedProblems(
  prefix: string,
  manifestKey: string,
  manifest: Manifest,
): RestorePointProblem[] {
  const problems: RestorePointProblem[] = [];
  let lineageProblem: string | undefined;
  try {
    verifyLineage(manifest);
  } catch (error) {
    lineageProblem = messageOf(error);
  }
  if (lineageProblem !== undefined)
    problems.push({ kind: 'lineage', message: `lineage: ${lineageProblem}` });
  for (const message of layoutProblems(prefix, manifestKey, manifest)) {
    problems.push({ kind: 'layout', message });
  }
  return problems;
}

function layoutProblems(prefix: string, manifestKey: string, manifest: Manifest): string[] {
  const problems: string[] = [];
  const keyCommit = parseManifestKey(prefix, manifestKey);
  if (keyCommit === undefined) {
    problems.push(`${manifestKey} is not a manifest key under ${prefix}/manifest/`);
  } else if (keyCommit !== manifest.commitSeq) {
    problems.push(
      `the key says commit ${keyCommit}, the manifest says commitSeq ${manifest.commitSeq}`,
    );
  }
  const names = new Set<string>();
  for (const file of manifest.files) {
    const problem = fileNameProblem(file.name);
    if (problem !== undefined) {
      problems.push(`file name ${JSON.stringify(file.name)} ${problem}`);
      continue;
    }
    if (names.has(file.name)) problems.push(`file name ${JSON.stringify(file.name)} appears twice`);
    names.add(file.name);
    const directories = allowedDirectories(file.name);
    if (!directories.some((directory) => isKeyUnder(file.key, prefix, directory))) {
      problems.push(
        `file ${file.name} has key ${JSON.stringify(file.key)}, not under ${directories.map((directory) => `${prefix}/${directory}/`).join(' or ')}`,
      );
    }
  }
  let offset = 0;
  for (const segment of manifest.segments) {
    const parsed = isKeyUnder(segment.key, prefix, 'wal')
      ? parseSegmentKey(prefix, segment.key)
      : undefined;
    if (parsed === undefined) {
      problems.push(
        `segment key ${JSON.stringify(segment.key)} is not a segment key under ${prefix}/wal/`,
      );
      continue;
    }
    if (parsed.generation !== manifest.walGeneration) {
      problems.push(
        `segment ${segment.key} is of generation ${parsed.generation}, the manifest's is ${manifest.walGeneration}`,
      );
    }
    if (parsed.start !== offset) {
      problems.push(
        `segment ${segment.key} starts at ${parsed.start}, expected ${offset} (segments must chain from 0)`,
      );
    }
    // A `.seg` object's size is its envelope's (header + encoded bytes), not
    // the range; its decoded length is checked against the range when read.
    if (parsed.layout === 'raw' && parsed.end - parsed.start !== segment.size) {
      problems.push(
        `segment ${segment.key} covers ${parsed.end - parsed.start} bytes but records size ${segment.size}`,
      );
    }
    offset = parsed.end;
  }
  return problems;
}

export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** `prefix` normalized, as every entry point takes it. @throws RestoreOptionsError naming `prefix`. */
export function checkedPrefix(prefix: string): string {
  let normalized: string;
  try {
    normalized = normalizePrefix(prefix);
  } catch (error) {
    throw new RestoreOptionsError('prefix', messageOf(error));
  }
  if (normalized === '') throw new RestoreOptionsError('prefix', 'must not be empty');
  return normalized;
}
