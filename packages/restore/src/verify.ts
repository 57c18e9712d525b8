/**
 * verify(): does every restore point in a prefix restore? (Each check:
 * package README, `verify`.) Never throws for what the bucket holds: LATEST
 * and every manifest get restore's checks, every named object its size (one
 * LIST per directory); `deep` streams each distinct object once (CRC-32,
 * envelope) and compares compacted objects with their fine runs
 * (compacted-cover.ts); `rebuild` has the engine prove restore points
 * (verify-rebuild.ts). A manifest deleted meanwhile is `vanished`; a moved
 * LATEST is followed. Store failures and aborts throw: a report on a failed
 * read would be a guess.
 */
import type { AgeIdentity } from '@x/age-envelope';
import {
  type FileEntry,
  latestKey,
  MAX_MANIFEST_BYTES,
  type Manifest,
  parseManifest,
  parseSegmentKey,
  type SegmentEntry,
} from '@x/manifest';
import { isValidKey, type ObjectInfo, type ObjectStore } from '@x/store';
import { completeFrames } from '@x/wal-segment';
import {
  compactedCoverProblem,
  type DecodedCompactedObject,
  type DecodedLogObject,
  FineSegmentIndex,
} from './compacted-cover.ts';
import { isFileObject } from './file-object-read.ts';
import type { GenerationEncryption } from './generation-encryption.ts';
import type { VerifyProgress } from './progress.ts';
import { PROGRESS_BYTE_STEP } from './progress.ts';
import { ObjectCorruptError, ObjectKeyError, ObjectMissingError } from './restore-errors.ts';
import { checkedPrefix, classifiedProblems, messageOf } from './restore-point-checks.ts';
import {
  followMovedLatest,
  type LatestReading,
  listManifestKeys,
  readCapped,
  readLatest,
} from './restore-points.ts';
import {
  checkLinkAfterCompacted,
  type DecodedSegmentEntry,
  decodeSegmentEntryLinks,
  expectedPreviousCrc32,
  isSegmentObject,
} from './segment-object-read.ts';
import { supersededMessage, supersededTenures } from './superseded-tenures.ts';
import { downloadVerified } from './verified-download.ts';
import { encryptionOfLocked, mixedEncryption, verifyFileObject } from './verify-encryption.ts';
import {
  type RebuildCandidate,
  rebuildChoice,
  rebuildRestorePoint,
  scratchDirectoryOf,
  type VerifyRebuild,
} from './verify-rebuild.ts';

export type { VerifyRebuild } from './verify-rebuild.ts';

export interface VerifyOptions {
  /** Also stream every named object and check its CRC-32 (reads every byte once). */
  readonly deep?: boolean;
  /**
   * Also restore restore points into a scratch directory with the engine's
   * check and prove the result (which ones: `rebuild.points`). One restore
   * point at a time: the disk it takes is one restore's, the time one
   * restore per restore point rebuilt.
   */
  readonly rebuild?: VerifyRebuild;
  /**
   * The age identities that open encrypted objects (`deep`, `rebuild`).
   * Without one that opens an object, `deep` still checks its size, stored
   * CRC-32 and header, and reports it as `key-missing`.
   */
  readonly identities?: readonly AgeIdentity[];
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
  /**
   * A `.seg` segment, `.snap` snapshot or `.bko` archive or side file whose
   * envelope is invalid, does not decode, disagrees with its key or entry,
   * or states another encryption than its generation's first object
   * (`deep`).
   */
  | 'object-encoding'
  /** An encrypted object none of the identities given opens (`deep`; `recipients` name who can). */
  | 'key-missing'
  /** Two manifests record different sizes or CRCs for one key. */
  | 'object-conflict'
  /** `rebuild`: the restore of it fails (its objects verified). */
  | 'rebuild'
  /** `rebuild`: the engine's check of the rebuilt state fails (SQLite: `PRAGMA integrity_check`). */
  | 'integrity-check'
  /** `rebuild`: a page of the rebuilt state is not what its objects say (`page`, `expected`, `found`). */
  | 'page-hash'
  /** Written by a lease tenure after a later tenure had written a restore point (superseded-tenures.ts). */
  | 'superseded-tenure';

export interface VerifyProblem {
  readonly kind: VerifyProblemKind;
  readonly message: string;
  /** The object the problem is about, when it is about one. */
  readonly key?: string;
  /** The page a `page-hash` problem is about (1-based). */
  readonly page?: number;
  /** For `page-hash`: the page's hash as its objects say, and as rebuilt (hex). */
  readonly expected?: string;
  readonly found?: string;
  /** For `key-missing`: the object's recipients (`age1…`); an identity of any one opens it. */
  readonly recipients?: readonly string[];
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
  /** The lease generation its writer held (manifest version 3; absent before, `null`: written without a lease). */
  readonly leaseGeneration?: number | null;
  readonly createdAt?: string;
  /** True when it was rebuilt and checked (`rebuild`), whatever the result. */
  readonly rebuilt?: boolean;
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
  /** Restore points rebuilt and checked (0 without `rebuild`). */
  readonly rebuilt: number;
}

interface ObjectClaim {
  readonly key: string;
  readonly size: number;
  readonly crc32: string;
  readonly manifests: Set<string>;
  /**
   * For a `.seg` segment: its entry and the chain CRC it must carry (as the
   * first manifest naming it says), or, right after a compacted entry, that
   * entry's key (the link is then the compacted header's chain end).
   */
  readonly segment?: {
    readonly entry: SegmentEntry;
    readonly previousCrc32: number | undefined;
    readonly afterCompacted?: string;
  };
  /** For a file object (`.snap`, `.bko`): its file entry (as the first manifest naming it says). */
  readonly fileObject?: FileEntry;
}

interface ManifestState {
  readonly key: string;
  manifest?: Manifest;
  vanished: boolean;
  rebuilt?: boolean;
  readonly problems: VerifyProblem[];
}

function callOptions(signal: AbortSignal | undefined): { signal?: AbortSignal } {
  return signal === undefined ? {} : { signal };
}

/** The counters progress reports carry, and the reporting itself. */
class VerifyCounters {
  manifestsDone = 0;
  manifestsTotal = 0;
  objectsDone = 0;
  objectsTotal = 0;
  bytesDone = 0;
  bytesTotal = 0;
  readonly #onProgress: ((progress: VerifyProgress) => void) | undefined;

  constructor(onProgress: ((progress: VerifyProgress) => void) | undefined) {
    this.#onProgress = onProgress;
  }

  report(phase: VerifyProgress['phase'], key?: string): void {
    this.#onProgress?.({
      phase,
      manifestsDone: this.manifestsDone,
      manifestsTotal: this.manifestsTotal,
      objectsDone: this.objectsDone,
      objectsTotal: this.objectsTotal,
      bytesDone: this.bytesDone,
      bytesTotal: this.bytesTotal,
      ...(key === undefined ? {} : { key }),
    });
  }
}

/** What the listing phase found: LATEST, the manifests listed, and stray keys as problems. */
interface Listing {
  readonly latest: LatestReading;
  readonly listed: readonly { key: string }[];
  /** Every manifest key to check: the listed ones, and LATEST's target when it was not listed. */
  readonly keys: readonly string[];
  readonly problems: VerifyProblem[];
}

/** Phase 1: LATEST, then one listing of `manifest/`. */
async function listPrefix(
  store: ObjectStore,
  prefix: string,
  signal: AbortSignal | undefined,
): Promise<Listing> {
  // LATEST before the listing: the worker writes a manifest before pointing
  // LATEST at it, so the listing then holds LATEST's target.
  const latest = await readLatest(store, prefix, signal);
  const { manifests: listed, strays } = await listManifestKeys(store, prefix, signal);
  const problems: VerifyProblem[] = strays.map((key) => ({
    kind: 'stray-manifest-key',
    key,
    message: `${key} is under manifest/ but is not a manifest key`,
  }));
  const keys = listed.map((entry) => entry.key);
  if (latest.state === 'ok' && !keys.includes(latest.manifestKey)) keys.push(latest.manifestKey);
  return { latest, listed, keys, problems };
}

/** Phase 2, for one manifest: read it (capped), parse it, and apply restore's checks. */
async function checkManifest(
  store: ObjectStore,
  prefix: string,
  key: string,
  signal: AbortSignal | undefined,
): Promise<ManifestState> {
  const state: ManifestState = { key, vanished: false, problems: [] };
  const bytes = await readCapped(store, key, MAX_MANIFEST_BYTES, signal);
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
      state.manifest = parseManifest(bytes, { prefix });
    } catch (error) {
      state.problems.push({
        kind: 'manifest-invalid',
        message: `does not parse: ${messageOf(error)}`,
      });
    }
    if (state.manifest !== undefined) {
      for (const problem of classifiedProblems(prefix, key, state.manifest)) {
        state.problems.push(problem);
      }
    }
  }
  return state;
}

/** Phase 2: every manifest, in listing order. */
async function checkManifests(
  store: ObjectStore,
  prefix: string,
  keys: readonly string[],
  counters: VerifyCounters,
  signal: AbortSignal | undefined,
): Promise<Map<string, ManifestState>> {
  const states = new Map<string, ManifestState>();
  for (const key of keys) {
    counters.report('manifests', key);
    const state = await checkManifest(store, prefix, key, signal);
    counters.manifestsDone += 1;
    states.set(key, state);
  }
  return states;
}

/**
 * Phase 3a: every object named, once, with the manifests that name it; two
 * manifests recording different sizes or CRCs for one key is a conflict.
 */
function claimObjects(
  states: Map<string, ManifestState>,
  prefix: string,
): Map<string, ObjectClaim> {
  const claims = new Map<string, ObjectClaim>();
  const prefixWithSlash = `${prefix}/`;
  for (const state of states.values()) {
    const manifest = state.manifest;
    if (manifest === undefined) continue;
    const segmentIndex = new Map(manifest.segments.map((segment, index) => [segment, index]));
    const fileEntries = new Set<unknown>(manifest.files);
    for (const entry of [...manifest.files, ...manifest.segments]) {
      // Never read outside the prefix, whatever a manifest says; such a key
      // is already reported as a layout problem.
      if (!isValidKey(entry.key) || !entry.key.startsWith(prefixWithSlash)) continue;
      const claim = claims.get(entry.key);
      if (claim === undefined) {
        const index = segmentIndex.get(entry as SegmentEntry);
        claims.set(entry.key, {
          key: entry.key,
          size: entry.size,
          crc32: entry.crc32,
          manifests: new Set([state.key]),
          ...(index !== undefined && isSegmentObject(prefix, entry.key)
            ? {
                segment: {
                  entry: entry as SegmentEntry,
                  previousCrc32: expectedPreviousCrc32(prefix, manifest, index),
                  ...compactedBefore(prefix, manifest, index),
                },
              }
            : {}),
          ...(fileEntries.has(entry) && isFileObject(prefix, entry.key)
            ? { fileObject: entry as FileEntry }
            : {}),
        });
      } else if (claim.size !== entry.size || claim.crc32 !== entry.crc32) {
        const message = `${entry.key} is recorded as ${entry.size} bytes, CRC ${entry.crc32} here and ${claim.size} bytes, CRC ${claim.crc32} by ${[...claim.manifests].join(', ')}`;
        state.problems.push({ kind: 'object-conflict', key: entry.key, message });
      } else {
        claim.manifests.add(state.key);
      }
    }
  }
  return claims;
}

/** Records `problem` against every manifest that names the claimed object. */
function blame(
  states: Map<string, ManifestState>,
  claim: ObjectClaim,
  problem: VerifyProblem,
): void {
  for (const key of claim.manifests) states.get(key)?.problems.push(problem);
}

/** Phase 3b: existence and size, one listing per directory of named objects. */
async function checkObjectsListed(
  store: ObjectStore,
  claims: Map<string, ObjectClaim>,
  states: Map<string, ManifestState>,
  signal: AbortSignal | undefined,
): Promise<Map<string, ObjectInfo>> {
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
        blame(states, claim, {
          kind: 'object-missing',
          key: claim.key,
          message: `${claim.key} does not exist`,
        });
      } else if (found.size !== claim.size) {
        blame(states, claim, {
          kind: 'object-size',
          key: claim.key,
          message: `${claim.key} is ${found.size} bytes, the manifest records ${claim.size}`,
        });
      }
    }
  }
  return present;
}

/**
 * Phase 3c: with `deep`, every object present with its recorded size is
 * streamed once and its CRC-32 checked. Counts every object done either way.
 * Returns the bytes read.
 */
async function checkObjectsDeep(
  pass: PassOptions,
  claims: Map<string, ObjectClaim>,
  present: Map<string, ObjectInfo>,
  states: Map<string, ManifestState>,
): Promise<number> {
  const { store, prefix, deep, counters, signal, identities } = pass;
  let bytesRead = 0;
  // What each header read states about its encryption: compared per restore
  // point once every object was read.
  const stated = new Map<string, GenerationEncryption>();
  // Chain ends of the compacted objects decoded, and the `previous` of the
  // entries right after one: compared once every object was read.
  const chainEnds = new Map<string, number>();
  const afterCompacted: { claim: ObjectClaim; previousCrc32: number; compacted: string }[] = [];
  // Every fine segment and compacted object decoded: a compacted object is
  // compared with the fine run it covers once every object was read.
  const fineSegments = new FineSegmentIndex();
  const compactedObjects: { claim: ObjectClaim; decoded: DecodedCompactedObject }[] = [];
  for (const claim of claims.values()) {
    const found = present.get(claim.key);
    if (deep && found !== undefined && found.size === claim.size) {
      const before = counters.bytesDone;
      let reported = 0;
      counters.report('objects', claim.key);
      const chunks: Uint8Array[] = [];
      try {
        // Only a `.seg` segment is held (to decode it); everything else streams
        // through the CRC check in constant memory — a file object (`.snap`,
        // `.bko`) also through its decoder, its decoded bytes discarded.
        const sink =
          claim.segment === undefined ? () => {} : (chunk: Uint8Array) => void chunks.push(chunk);
        const downloadOptions = {
          manifestKey: [...claim.manifests][0] ?? '',
          ...callOptions(signal),
          ...(identities === undefined ? {} : { identities }),
          // Stored bytes, for a file object too.
          onBytes: (read: number) => {
            counters.bytesDone = before + read;
            if (read - reported >= PROGRESS_BYTE_STEP) {
              reported = read;
              counters.report('objects', claim.key);
            }
          },
        };
        if (claim.fileObject === undefined)
          await downloadVerified(store, claim, sink, downloadOptions);
        else
          stated.set(
            claim.key,
            await verifyFileObject(store, prefix, claim.fileObject, downloadOptions),
          );
        const segment = claim.segment;
        if (segment !== undefined) {
          const links = decodeSegmentEntryLinks(
            prefix,
            segment.entry,
            new Uint8Array(Buffer.concat(chunks)),
            segment.previousCrc32,
            identities === undefined ? {} : { identities },
          );
          stated.set(claim.key, links.encryption);
          if (links.chainEndCrc32 !== null) chainEnds.set(claim.key, links.chainEndCrc32);
          noteDecoded(prefix, claim, segment.entry, links, fineSegments, compactedObjects);
          if (segment.afterCompacted !== undefined)
            afterCompacted.push({
              claim,
              previousCrc32: links.previousCrc32,
              compacted: segment.afterCompacted,
            });
        }
      } catch (error) {
        if (ObjectKeyError.isInstance(error)) {
          const locked = encryptionOfLocked(error);
          if (locked !== undefined) stated.set(claim.key, locked);
          blame(states, claim, {
            kind: 'key-missing',
            key: claim.key,
            message: error.message,
            recipients: error.recipients,
          });
        } else if (ObjectCorruptError.isInstance(error)) {
          blame(states, claim, {
            kind:
              error.property === 'crc32'
                ? 'object-crc'
                : error.property === 'encoding'
                  ? 'object-encoding'
                  : 'object-size',
            key: claim.key,
            message: error.message,
          });
        } else if (ObjectMissingError.isInstance(error)) {
          blame(states, claim, {
            kind: 'object-missing',
            key: claim.key,
            message: `${claim.key} does not exist`,
          });
        } else {
          throw error;
        }
      }
      counters.bytesDone = before + claim.size;
      bytesRead = counters.bytesDone;
    } else if (deep) {
      // Missing or of the wrong size: not read, so not part of the bytes to read.
      counters.bytesTotal -= claim.size;
    }
    counters.objectsDone += 1;
    counters.report('objects', claim.key);
  }
  for (const { claim, decoded } of compactedObjects) {
    const problem = compactedCoverProblem(decoded, fineSegments);
    if (problem !== undefined)
      blame(states, claim, { kind: 'object-encoding', key: claim.key, message: problem.message });
  }
  for (const { claim, previousCrc32, compacted } of afterCompacted) {
    const chainEnd = chainEnds.get(compacted);
    if (chainEnd === undefined) continue;
    try {
      checkLinkAfterCompacted(claim.key, previousCrc32, chainEnd);
    } catch (error) {
      if (!ObjectCorruptError.isInstance(error)) throw error;
      blame(states, claim, { kind: 'object-encoding', key: claim.key, message: error.message });
    }
  }
  for (const state of states.values()) {
    if (state.manifest === undefined) continue;
    for (const refused of mixedEncryption(prefix, state.manifest, stated))
      state.problems.push({ kind: 'object-encoding', key: refused.key, message: refused.message });
  }
  return bytesRead;
}

/** Files a decoded `.seg` object for the comparison of compacted objects with their fine runs. */
function noteDecoded(
  prefix: string,
  claim: ObjectClaim,
  entry: SegmentEntry,
  links: DecodedSegmentEntry,
  fineSegments: FineSegmentIndex,
  compactedObjects: { claim: ObjectClaim; decoded: DecodedCompactedObject }[],
): void {
  const range = parseSegmentKey(prefix, claim.key);
  if (range === undefined || range.layout === 'raw') return;
  const decoded: DecodedLogObject = {
    key: claim.key,
    generation: range.generation,
    start: range.start,
    end: range.end,
    lineage: entry.lineage,
    commits: entry.frames,
    storedCrc32: Number.parseInt(claim.crc32, 16),
    previousCrc32: links.previousCrc32,
    bodyCrc32: links.bodyCrc32,
    bodyLength: links.body.byteLength,
  };
  if (range.layout === 'object') fineSegments.add(decoded);
  else if (links.chainEndCrc32 !== null)
    compactedObjects.push({
      claim,
      decoded: {
        ...decoded,
        chainEndCrc32: links.chainEndCrc32,
        frames: completeFrames(links.body).frames,
      },
    });
}

/** `{ afterCompacted }` naming the entry before `index` when it is a compacted one; `{}` otherwise. */
function compactedBefore(
  prefix: string,
  manifest: Manifest,
  index: number,
): { afterCompacted?: string } {
  const before = index > 0 ? manifest.segments[index - 1] : undefined;
  return before !== undefined && parseSegmentKey(prefix, before.key)?.layout === 'compacted'
    ? { afterCompacted: before.key }
    : {};
}

/**
 * Phase 3d: a manifest whose objects went missing may itself have been
 * retired by retention meanwhile: then it is gone, not broken.
 */
async function markVanished(
  store: ObjectStore,
  states: Map<string, ManifestState>,
  signal: AbortSignal | undefined,
): Promise<void> {
  for (const state of states.values()) {
    if (state.problems.some((problem) => problem.kind === 'object-missing')) {
      if ((await store.head(state.key, callOptions(signal))) === null) state.vanished = true;
    }
  }
}

/** Phase 4a: LATEST's part of the report, from what was found of its target. */
function latestSection(
  prefix: string,
  listing: Listing,
  states: Map<string, ManifestState>,
): VerifyReport['latest'] {
  const { latest, listed } = listing;
  const problems: VerifyProblem[] = [];
  let manifestKey: string | null = null;
  const latestObjectKey = latestKey(prefix);
  if (latest.state === 'missing') {
    problems.push({
      kind: 'latest-missing',
      key: latestObjectKey,
      message:
        listed.length === 0
          ? `${latestObjectKey} does not exist and there are no manifests: nothing was backed up here`
          : `${latestObjectKey} does not exist`,
    });
  } else if (latest.state === 'invalid') {
    problems.push({ kind: 'latest-invalid', key: latestObjectKey, message: latest.problem });
  } else {
    manifestKey = latest.manifestKey;
    const target = states.get(latest.manifestKey);
    if (target === undefined || target.vanished) {
      problems.push({
        kind: 'latest-dangling',
        key: latest.manifestKey,
        message: `LATEST names ${latest.manifestKey}, which does not exist`,
      });
    } else if (target.problems.length > 0) {
      problems.push({
        kind: 'latest-unverified',
        key: latest.manifestKey,
        message: `LATEST names ${latest.manifestKey}, which does not verify`,
      });
    }
  }
  return { manifestKey, ok: problems.length === 0, problems };
}

/**
 * Phase 4b: one entry per manifest, key order. A manifest LATEST named that
 * does not exist and was never listed is no entry (LATEST's own target is
 * reported with LATEST).
 */
/** Phase 6: a restore point a superseded tenure wrote is a problem of its own. */
function noteSupersededTenures(states: Map<string, ManifestState>): void {
  const stamps = [...states.values()].flatMap((state) =>
    state.manifest === undefined || state.vanished ? [] : [{ key: state.key, ...state.manifest }],
  );
  for (const [key, superseded] of supersededTenures(stamps))
    states.get(key)!.problems.push({
      kind: 'superseded-tenure',
      message: supersededMessage(superseded),
    });
}

function manifestEntries(
  listing: Listing,
  states: Map<string, ManifestState>,
): ManifestVerification[] {
  return [...states.values()]
    .filter(
      (state) => !(state.vanished && !listing.listed.some((entry) => entry.key === state.key)),
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
              ...(state.manifest.leaseGeneration === undefined
                ? {}
                : { leaseGeneration: state.manifest.leaseGeneration }),
              createdAt: state.manifest.createdAt,
            }),
        ...(state.rebuilt === true ? { rebuilt: true } : {}),
      }),
    )
    .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
}

/** What one pass of phases 2 and 3 works with; `states` and `checked` gather over passes. */
interface PassOptions {
  readonly store: ObjectStore;
  readonly prefix: string;
  readonly deep: boolean;
  readonly counters: VerifyCounters;
  readonly signal: AbortSignal | undefined;
  readonly identities: readonly AgeIdentity[] | undefined;
  /** Every manifest checked so far, by key. */
  readonly states: Map<string, ManifestState>;
  /** Every object key checked so far. */
  readonly checked: Set<string>;
}

/**
 * Phases 2 and 3 for `keys`: each manifest, then the objects they name
 * (listed, then with `deep` read), then which of them vanished meanwhile.
 * Objects are checked against the manifests of this pass.
 */
async function checkRestorePoints(pass: PassOptions, keys: readonly string[]): Promise<void> {
  const { store, prefix, deep, counters, signal } = pass;
  counters.manifestsTotal += keys.length;
  const states = await checkManifests(store, prefix, keys, counters, signal);
  const claims = claimObjects(states, prefix);
  counters.objectsTotal += claims.size;
  if (deep) for (const claim of claims.values()) counters.bytesTotal += claim.size;
  const present = await checkObjectsListed(store, claims, states, signal);
  await checkObjectsDeep(pass, claims, present, states);
  await markVanished(store, states, signal);
  for (const [key, state] of states) pass.states.set(key, state);
  for (const key of claims.keys()) pass.checked.add(key);
}

/**
 * Verifies every restore point under `prefix` and returns a report: the
 * listing, each manifest's checks, the objects (listed, then with `deep`
 * read), then the report.
 * @throws RestoreOptionsError for an invalid prefix; store errors and aborts as they are.
 */
export async function verify(
  store: ObjectStore,
  prefix: string,
  options: VerifyOptions = {},
): Promise<VerifyReport> {
  const normalized = checkedPrefix(prefix);
  const { signal, onProgress } = options;
  const deep = options.deep === true;
  const counters = new VerifyCounters(onProgress);
  const scratch =
    options.rebuild === undefined ? undefined : await scratchDirectoryOf(options.rebuild);

  const listing = await listPrefix(store, normalized, signal);
  const states = new Map<string, ManifestState>();
  const checked = new Set<string>();
  const { identities } = options;
  const passOptions = {
    store,
    prefix: normalized,
    deep,
    counters,
    signal,
    identities,
    states,
    checked,
  };
  await checkRestorePoints(passOptions, listing.keys);
  // Phase 3e: a LATEST whose target a live writer retired while verify ran
  // is read again, and the restore point it names now is checked too (its
  // objects against that manifest alone) and reported as LATEST's target.
  const followLatest = (from: LatestReading) =>
    followMovedLatest(
      store,
      normalized,
      from,
      async (key) => {
        if (!states.has(key)) await checkRestorePoints(passOptions, [key]);
        return states.get(key)?.vanished === false;
      },
      signal,
    );
  let latestReading = await followLatest(listing.latest);

  let rebuilt = 0;
  if (options.rebuild !== undefined && scratch !== undefined) {
    const rebuildContext = { store, prefix: normalized, states, counters, signal, identities };
    rebuilt += await rebuildChosen(rebuildContext, keyOf(latestReading), options.rebuild, scratch);
    // A writer may retire LATEST's target while it is rebuilt: follow LATEST
    // to the restore point that replaced it and rebuild that one too.
    for (let follows = 0; follows < MAX_REBUILD_FOLLOWS; follows += 1) {
      const latestKey = keyOf(latestReading);
      if (latestKey === null || states.get(latestKey)?.vanished !== true) break;
      latestReading = await followLatest(latestReading);
      const movedTo = keyOf(latestReading);
      if (movedTo === null || movedTo === latestKey) break;
      rebuilt += await rebuildChosen(rebuildContext, movedTo, options.rebuild, scratch, movedTo);
    }
  }

  noteSupersededTenures(states);
  const latest = latestSection(normalized, { ...listing, latest: latestReading }, states);
  const manifests = manifestEntries(listing, states);
  counters.report('done');
  const ok =
    latest.ok &&
    listing.problems.length === 0 &&
    manifests.every((manifest) => manifest.status !== 'problems');
  return {
    prefix: normalized,
    deep,
    ok,
    latest,
    manifests,
    problems: listing.problems,
    objectsChecked: checked.size,
    bytesRead: counters.bytesDone,
    rebuilt,
  };
}

/** How often a rebuild follows a LATEST that moved while its target was rebuilt. */
const MAX_REBUILD_FOLLOWS = 3;

/** The manifest key a LATEST reading names, or `null`. */
function keyOf(reading: LatestReading): string | null {
  return reading.state === 'ok' ? reading.manifestKey : null;
}

/**
 * Phase 5: rebuilds the chosen restore points (those whose checks so far
 * found nothing; with `only`, that one alone) one at a time; what a rebuild finds joins the restore
 * point's problems. Returns how many were rebuilt.
 */
async function rebuildChosen(
  context: {
    readonly store: ObjectStore;
    readonly prefix: string;
    readonly states: Map<string, ManifestState>;
    readonly counters: VerifyCounters;
    readonly signal: AbortSignal | undefined;
    readonly identities: readonly AgeIdentity[] | undefined;
  },
  latestKey: string | null,
  rebuild: VerifyRebuild,
  scratch: string,
  only?: string,
): Promise<number> {
  const { store, prefix, states, counters, signal, identities } = context;
  const candidates: RebuildCandidate[] = [];
  for (const state of states.values()) {
    const unchecked = state.rebuilt !== true && !state.vanished && state.problems.length === 0;
    if (state.manifest !== undefined && unchecked && (only === undefined || state.key === only))
      candidates.push({ key: state.key, manifest: state.manifest });
  }
  let rebuilt = 0;
  for (const key of rebuildChoice(candidates, latestKey, rebuild)) {
    counters.report('rebuild', key);
    const state = states.get(key)!;
    const found = await rebuildRestorePoint(store, prefix, key, rebuild, scratch, {
      signal,
      identities,
    });
    if (found === 'vanished') {
      state.vanished = true;
      continue;
    }
    state.rebuilt = true;
    rebuilt += 1;
    for (const problem of found) state.problems.push(problem);
  }
  return rebuilt;
}
