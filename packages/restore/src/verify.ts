/**
 * verify(): does every restore point in a prefix restore?
 *
 * Checks, and reports (never throws for what the bucket holds):
 * - LATEST exists, is a manifest key of this prefix, and names a manifest
 *   that exists and verifies;
 * - every object under `manifest/` is a manifest key; every manifest is at
 *   most `MAX_MANIFEST_BYTES`, parses, says the commit its key says, names
 *   only its own lineage, and names only safe file names, keys under the
 *   prefix and segments that chain from offset 0 (the checks restore makes);
 * - every object a manifest names exists with the recorded size — one LIST
 *   per directory of named objects, not one HEAD per object — and, with
 *   `deep`, has the recorded CRC-32 (each distinct object streamed once).
 *
 * A manifest that disappears while it is being verified (retention ran) is
 * reported as `vanished`, not as broken. Store failures and aborts do throw:
 * a report built on a failed read would be a guess.
 */
import { latestKey, MAX_MANIFEST_BYTES, type Manifest, parseManifest } from '@x/manifest';
import { isValidKey, normalizePrefix, type ObjectInfo, type ObjectStore } from '@x/store';
import type { VerifyProgress } from './progress.ts';
import { PROGRESS_BYTE_STEP } from './progress.ts';
import { ObjectCorruptError, ObjectMissingError, RestoreOptionsError } from './restore-errors.ts';
import { classifiedProblems, messageOf } from './restore-point-checks.ts';
import { listManifestKeys, readCapped, readLatest } from './restore-points.ts';
import { downloadVerified } from './verified-download.ts';

export interface VerifyOptions {
  /** Also stream every named object and check its CRC-32 (reads every byte once). */
  readonly deep?: boolean;
  readonly signal?: AbortSignal;
  readonly onProgress?: (progress: VerifyProgress) => void;
}

export type VerifyProblemKind =
  /** There is no LATEST. */
  | 'latest-missing'
  /** LATEST is not UTF-8 text holding a manifest key of this prefix. */
  | 'latest-invalid'
  /** LATEST names a manifest that does not exist. */
  | 'latest-dangling'
  /** LATEST names a manifest that does not verify. */
  | 'latest-unverified'
  /** An object under `manifest/` whose key is not a manifest key. */
  | 'stray-manifest-key'
  /** The manifest is too large or does not parse. */
  | 'manifest-invalid'
  /** An entry names another lineage than the manifest's. */
  | 'lineage'
  /** A name, key or segment range is unsafe or inconsistent. */
  | 'layout'
  | 'object-missing'
  | 'object-size'
  | 'object-crc'
  /** Two manifests record different sizes or CRCs for one key. */
  | 'object-conflict';

export interface VerifyProblem {
  readonly kind: VerifyProblemKind;
  readonly message: string;
  /** The object the problem is about, when it is about one. */
  readonly key?: string;
}

export interface ManifestVerification {
  readonly key: string;
  /** `ok`: verifies; `problems`: does not; `vanished`: deleted while verify ran (retention). */
  readonly status: 'ok' | 'problems' | 'vanished';
  readonly problems: readonly VerifyProblem[];
  /** Present when the manifest parsed. */
  readonly commitSeq?: number;
  readonly lineage?: string;
  readonly walGeneration?: number;
  readonly createdAt?: string;
}

export interface VerifyReport {
  readonly prefix: string;
  readonly deep: boolean;
  /** True when LATEST and every manifest verify and there is at least one restore point. */
  readonly ok: boolean;
  readonly latest: {
    /** The manifest key LATEST names, when it names one. */
    readonly manifestKey: string | null;
    readonly ok: boolean;
    readonly problems: readonly VerifyProblem[];
  };
  /** Every manifest, oldest commit first. */
  readonly manifests: readonly ManifestVerification[];
  /** Problems of the prefix as a whole (stray keys under `manifest/`). */
  readonly problems: readonly VerifyProblem[];
  /** Distinct objects checked. */
  readonly objectsChecked: number;
  /** Bytes read for CRC checks (0 unless `deep`). */
  readonly bytesRead: number;
}

interface ObjectClaim {
  readonly key: string;
  readonly size: number;
  readonly crc32: string;
  readonly manifests: Set<string>;
}

interface ManifestState {
  readonly key: string;
  manifest?: Manifest;
  vanished: boolean;
  readonly problems: VerifyProblem[];
}

function callOptions(signal: AbortSignal | undefined): { signal?: AbortSignal } {
  return signal === undefined ? {} : { signal };
}

/**
 * Verifies every restore point under `prefix` and returns a report.
 * @throws RestoreOptionsError for an invalid prefix; store errors and aborts as they are.
 */
export async function verify(
  store: ObjectStore,
  prefix: string,
  options: VerifyOptions = {},
): Promise<VerifyReport> {
  let normalized: string;
  try {
    normalized = normalizePrefix(prefix);
  } catch (error) {
    throw new RestoreOptionsError('prefix', messageOf(error));
  }
  if (normalized === '') throw new RestoreOptionsError('prefix', 'must not be empty');
  const { signal, onProgress } = options;
  const deep = options.deep === true;

  // LATEST before the listing: the worker writes a manifest before pointing
  // LATEST at it, so the listing then holds LATEST's target.
  const latest = await readLatest(store, normalized, signal);
  const { manifests: listed, strays } = await listManifestKeys(store, normalized, signal);
  const problems: VerifyProblem[] = strays.map((key) => ({
    kind: 'stray-manifest-key',
    key,
    message: `${key} is under manifest/ but is not a manifest key`,
  }));

  const states = new Map<string, ManifestState>();
  const keys = listed.map((entry) => entry.key);
  if (latest.state === 'ok' && !keys.includes(latest.manifestKey)) keys.push(latest.manifestKey);
  let manifestsDone = 0;
  let objectsDone = 0;
  let objectsTotal = 0;
  let bytesDone = 0;
  let bytesTotal = 0;
  const report = (phase: VerifyProgress['phase'], key?: string): void => {
    onProgress?.({
      phase,
      manifestsDone,
      manifestsTotal: keys.length,
      objectsDone,
      objectsTotal,
      bytesDone,
      bytesTotal,
      ...(key === undefined ? {} : { key }),
    });
  };

  for (const key of keys) {
    report('manifests', key);
    const state: ManifestState = { key, vanished: false, problems: [] };
    const bytes = await readCapped(store, key, MAX_MANIFEST_BYTES, signal);
    manifestsDone += 1;
    if (bytes === null) {
      // Listed, then gone: retention removed it. (LATEST's target that does
      // not exist is reported with LATEST.)
      state.vanished = true;
    } else if (bytes === 'too-large') {
      state.problems.push({
        kind: 'manifest-invalid',
        message: `larger than ${MAX_MANIFEST_BYTES} bytes`,
      });
    } else {
      try {
        state.manifest = parseManifest(bytes, { prefix: normalized });
      } catch (error) {
        state.problems.push({
          kind: 'manifest-invalid',
          message: `does not parse: ${messageOf(error)}`,
        });
      }
      if (state.manifest !== undefined) {
        for (const problem of classifiedProblems(normalized, key, state.manifest)) {
          state.problems.push(problem);
        }
      }
    }
    states.set(key, state);
  }

  // Every object named, once, with the manifests that name it.
  const claims = new Map<string, ObjectClaim>();
  const prefixWithSlash = `${normalized}/`;
  for (const state of states.values()) {
    const manifest = state.manifest;
    if (manifest === undefined) continue;
    for (const entry of [...manifest.files, ...manifest.segments]) {
      // Never read outside the prefix, whatever a manifest says; such a key
      // is already reported as a layout problem.
      if (!isValidKey(entry.key) || !entry.key.startsWith(prefixWithSlash)) continue;
      const claim = claims.get(entry.key);
      if (claim === undefined) {
        claims.set(entry.key, {
          key: entry.key,
          size: entry.size,
          crc32: entry.crc32,
          manifests: new Set([state.key]),
        });
      } else if (claim.size !== entry.size || claim.crc32 !== entry.crc32) {
        const message = `${entry.key} is recorded as ${entry.size} bytes, CRC ${entry.crc32} here and ${claim.size} bytes, CRC ${claim.crc32} by ${[...claim.manifests].join(', ')}`;
        state.problems.push({ kind: 'object-conflict', key: entry.key, message });
      } else {
        claim.manifests.add(state.key);
      }
    }
  }
  objectsTotal = claims.size;
  if (deep) for (const claim of claims.values()) bytesTotal += claim.size;

  const blame = (claim: ObjectClaim, problem: VerifyProblem): void => {
    for (const key of claim.manifests) states.get(key)?.problems.push(problem);
  };

  // Existence and size: one listing per directory of named objects.
  const byDirectory = new Map<string, ObjectClaim[]>();
  for (const claim of claims.values()) {
    const directory = claim.key.slice(0, claim.key.lastIndexOf('/') + 1);
    const group = byDirectory.get(directory);
    if (group === undefined) byDirectory.set(directory, [claim]);
    else group.push(claim);
  }
  const present = new Map<string, ObjectInfo>();
  for (const [directory, group] of byDirectory) {
    const listing = await store.list(directory, { delimiter: '/', ...callOptions(signal) });
    for (const object of listing.objects) present.set(object.key, object);
    for (const claim of group) {
      const found = present.get(claim.key);
      if (found === undefined) {
        blame(claim, {
          kind: 'object-missing',
          key: claim.key,
          message: `${claim.key} does not exist`,
        });
      } else if (found.size !== claim.size) {
        blame(claim, {
          kind: 'object-size',
          key: claim.key,
          message: `${claim.key} is ${found.size} bytes, the manifest records ${claim.size}`,
        });
      }
    }
  }

  let bytesRead = 0;
  for (const claim of claims.values()) {
    const found = present.get(claim.key);
    if (deep && found !== undefined && found.size === claim.size) {
      const before = bytesDone;
      let reported = 0;
      report('objects', claim.key);
      try {
        await downloadVerified(store, claim, () => {}, {
          manifestKey: [...claim.manifests][0] ?? '',
          ...callOptions(signal),
          onBytes: (read) => {
            bytesDone = before + read;
            if (read - reported >= PROGRESS_BYTE_STEP) {
              reported = read;
              report('objects', claim.key);
            }
          },
        });
      } catch (error) {
        if (ObjectCorruptError.isInstance(error)) {
          blame(claim, {
            kind: error.property === 'crc32' ? 'object-crc' : 'object-size',
            key: claim.key,
            message: error.message,
          });
        } else if (ObjectMissingError.isInstance(error)) {
          blame(claim, {
            kind: 'object-missing',
            key: claim.key,
            message: `${claim.key} does not exist`,
          });
        } else {
          throw error;
        }
      }
      bytesDone = before + claim.size;
      bytesRead = bytesDone;
    } else if (deep) {
      // Missing or of the wrong size: not read, so not part of the bytes to read.
      bytesTotal -= claim.size;
    }
    objectsDone += 1;
    report('objects', claim.key);
  }

  // A manifest whose objects went missing may itself have been retired by
  // retention meanwhile: then it is gone, not broken.
  for (const state of states.values()) {
    if (state.problems.some((problem) => problem.kind === 'object-missing')) {
      if ((await store.head(state.key, callOptions(signal))) === null) state.vanished = true;
    }
  }

  const latestProblems: VerifyProblem[] = [];
  let latestManifestKey: string | null = null;
  const latestObjectKey = latestKey(normalized);
  if (latest.state === 'missing') {
    latestProblems.push({
      kind: 'latest-missing',
      key: latestObjectKey,
      message:
        listed.length === 0
          ? `${latestObjectKey} does not exist and there are no manifests: nothing was backed up here`
          : `${latestObjectKey} does not exist`,
    });
  } else if (latest.state === 'invalid') {
    latestProblems.push({ kind: 'latest-invalid', key: latestObjectKey, message: latest.problem });
  } else {
    latestManifestKey = latest.manifestKey;
    const target = states.get(latest.manifestKey);
    if (target === undefined || target.vanished) {
      latestProblems.push({
        kind: 'latest-dangling',
        key: latest.manifestKey,
        message: `LATEST names ${latest.manifestKey}, which does not exist`,
      });
    } else if (target.problems.length > 0) {
      latestProblems.push({
        kind: 'latest-unverified',
        key: latest.manifestKey,
        message: `LATEST names ${latest.manifestKey}, which does not verify`,
      });
    }
  }

  const manifests: ManifestVerification[] = [...states.values()]
    .filter(
      (state) =>
        !(
          state.vanished &&
          state.key === latestManifestKey &&
          !listed.some((entry) => entry.key === state.key)
        ),
    )
    .map(
      (state): ManifestVerification => ({
        key: state.key,
        status: state.vanished ? 'vanished' : state.problems.length === 0 ? 'ok' : 'problems',
        problems: state.vanished ? [] : state.problems,
        ...(state.manifest === undefined
          ? {}
          : {
              commitSeq: state.manifest.commitSeq,
              lineage: state.manifest.lineage,
              walGeneration: state.manifest.walGeneration,
              createdAt: state.manifest.createdAt,
            }),
      }),
    )
    .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));

  report('done');
  const ok =
    latestProblems.length === 0 &&
    problems.length === 0 &&
    manifests.every((manifest) => manifest.status !== 'problems');
  return {
    prefix: normalized,
    deep,
    ok,
    latest: {
      manifestKey: latestManifestKey,
      ok: latestProblems.length === 0,
      problems: latestProblems,
    },
    manifests,
    problems,
    objectsChecked: claims.size,
    bytesRead,
  };
}
