/**
 * The manifest: one restore point as a JSON document, listing every object a
 * restore needs (snapshot, archives, chain and side files, WAL segments) with
 * its size, CRC-32, frame count and lineage. `commitSeq`, what the restored
 * store reports, is computed from what it lists, so a document whose numbers
 * do not add up is refused. Parsing is strict: a bucket can hold anything,
 * and a restore must refuse it clearly, not misread it. Unknown fields are
 * refused; a new field means a new {@link MANIFEST_FORMAT_VERSION}, refused by
 * older readers by its version. Version 2 adds `snapshotTime` and `commitTime`,
 * version 3 `leaseGeneration`; version 1 parses as it always did (package README).
 */
import { isCrc32Hex } from './crc32.ts';
import { KeyLayoutError, ManifestError } from './errors.ts';
import {
  archiveName,
  parseArchiveKey,
  parseKey,
  parseManifestKey,
  parseSegmentKey,
  plainNameProblem,
  prefixProblem,
} from './keys.ts';

/** The format version this package's writers write (see {@link MANIFEST_FORMAT_VERSIONS} for what it reads). */
export const MANIFEST_FORMAT_VERSION = 3;

/** Every format version this reader accepts, oldest first. */
export const MANIFEST_FORMAT_VERSIONS: readonly ManifestFormatVersion[] = [1, 2, 3];

export type ManifestFormatVersion = 1 | 2 | 3;

/** The largest manifest document accepted or written, in bytes (16 MiB). */
export const MAX_MANIFEST_BYTES = 16 * 1024 * 1024;

/** The largest LATEST object accepted, in bytes (a key is at most 1024 bytes). */
export const MAX_LATEST_BYTES = 4096;

/** A file of the restore point: the snapshot, an archive, a chain file or a side file. */
export interface FileEntry {
  /** The file's name in the store directory: a plain name, unique within the manifest. */
  name: string;
  /** The object's full key under the prefix. */
  key: string;
  /** The object's size in bytes. */
  size: number;
  /** CRC-32 of the object's bytes, 8 lowercase hex digits. */
  crc32: string;
  /** Commits (frames) the file holds: an archive's frames; 0 for a side file. */
  frames: number;
  /** The lineage that wrote the object. */
  lineage: string;
}

/** A WAL segment of the restore point's generation: bytes `start..end` of its WAL file. */
export interface SegmentEntry {
  /** The segment's full key (it carries the generation and the byte range). */
  key: string;
  /**
   * The stored object's size in bytes: `end − start` of its key for a
   * `.segment` key; the envelope's (header + encoded bytes) for a `.seg` key.
   */
  size: number;
  /** CRC-32 of the stored object's bytes, 8 lowercase hex digits. */
  crc32: string;
  /** Complete frames (commits) in the segment. */
  frames: number;
  /** The lineage that wrote the object. */
  lineage: string;
}

/** One restore point. */
export interface Manifest {
  /** 1, 2 or 3; the fields marked "version 2" are present from 2 on, "version 3" from 3. */
  formatVersion: ManifestFormatVersion;
  /** The lineage (backup history) this restore point belongs to. */
  lineage: string;
  /** When the manifest was written, RFC 3339. Informational: nothing is ordered by it. */
  createdAt: string;
  /** Commits the restored store reports: `oldestCommitSeq + Σ files[].frames + Σ segments[].frames`. */
  commitSeq: number;
  /** The commit count the restore point's history starts at (the store's `wal.floor`). */
  oldestCommitSeq: number;
  /** The WAL generation whose snapshot and segments this restore point uses. */
  walGeneration: number;
  /**
   * Version 3: the generation of the bucket lease its writer held (one
   * higher on every new tenure: the fencing token), `null` when it was
   * written without a lease. Absent before version 3.
   */
  leaseGeneration?: number | null;
  /**
   * Version 2: the time of the oldest state the restore point restores (the
   * state at {@link restorableFrom}, its snapshot's), RFC 3339: when the
   * engine's read of the snapshot saw the database. Every commit the
   * snapshot holds was recorded at or before it, every commit in the
   * segments at or after it (by the engine's clock). `null`: the engine does
   * not know it. Absent in version 1.
   */
  snapshotTime?: string | null;
  /**
   * Version 2: the recorded commit time of the newest state it restores (the
   * state at `commitSeq`), RFC 3339; the snapshot's time when the segments
   * hold no commit. Never before `snapshotTime`. `null`: the engine does not
   * know it. Absent in version 1.
   */
  commitTime?: string | null;
  files: FileEntry[];
  segments: SegmentEntry[];
}

const LINEAGE_PATTERN = /^[A-Za-z0-9._-]{1,128}$/;
const RFC3339_PATTERN =
  /^([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt]([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]{1,9})?([Zz]|[+-]([0-9]{2}):([0-9]{2}))$/;
const CANONICAL_INTEGER = /^(0|[1-9][0-9]*)$/;

const MANIFEST_FIELDS = [
  'formatVersion',
  'lineage',
  'createdAt',
  'commitSeq',
  'oldestCommitSeq',
  'walGeneration',
  'files',
  'segments',
] as const;
/** Version 2's fields, in order: version 1's with the two times after `walGeneration`. */
const MANIFEST_FIELDS_V2 = [
  'formatVersion',
  'lineage',
  'createdAt',
  'commitSeq',
  'oldestCommitSeq',
  'walGeneration',
  'snapshotTime',
  'commitTime',
  'files',
  'segments',
] as const;
/** Version 3's fields: version 2's with `leaseGeneration` after `walGeneration`. */
const MANIFEST_FIELDS_V3 = [
  'formatVersion',
  'lineage',
  'createdAt',
  'commitSeq',
  'oldestCommitSeq',
  'walGeneration',
  'leaseGeneration',
  'snapshotTime',
  'commitTime',
  'files',
  'segments',
] as const;
const FILE_FIELDS = ['name', 'key', 'size', 'crc32', 'frames', 'lineage'] as const;
const SEGMENT_FIELDS = ['key', 'size', 'crc32', 'frames', 'lineage'] as const;
/**
 * The smallest `.seg` object: the envelope header with a one-byte lineage
 * (`@x/wal-segment`'s `SEGMENT_OBJECT_MIN_HEADER_BYTES`) and an empty body.
 */
const MIN_SEGMENT_OBJECT_BYTES = 58;

/**
 * A JSON number whose text was not a plain non-negative decimal integer
 * (`1e3`, `1.0`, `-0`, `01`). The reviver swaps it in so the field check can
 * name the field and quote the text; every number in a manifest is a count.
 */
class NonCanonicalNumber {
  readonly source: string;
  constructor(source: string) {
    this.source = source;
  }
}

function typeName(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (value instanceof NonCanonicalNumber) return `the number ${value.source}`;
  return `a ${typeof value}`;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return (
    typeof value === 'object' &&
    value !== null &&
    !Array.isArray(value) &&
    !(value instanceof NonCanonicalNumber)
  );
}

function daysInMonth(year: number, month: number): number {
  if (month === 2) return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28;
  return [4, 6, 9, 11].includes(month) ? 30 : 31;
}

/** Why `text` is not an RFC 3339 date-time, or undefined. */
export function rfc3339Problem(text: string): string | undefined {
  const match = RFC3339_PATTERN.exec(text);
  if (match === null) return 'not an RFC 3339 date-time (YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM))';
  const [year, month, day, hour, minute, second] = match.slice(1, 7).map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  if (month < 1 || month > 12) return `month ${month} out of range`;
  if (day < 1 || day > daysInMonth(year, month)) return `day ${day} out of range`;
  if (hour > 23 || minute > 59 || second > 60) return 'time of day out of range';
  if (match[8] !== undefined && match[9] !== undefined) {
    if (Number(match[9]) > 23 || Number(match[10]) > 59) return 'offset out of range';
  }
  return undefined;
}

/** Walks one document, collecting a normalised copy; throws at the first problem. */
class Checker {
  readonly prefix: string | undefined;
  /** The document's format version, once read (named in the unknown-field message). */
  version: number = MANIFEST_FORMAT_VERSION;

  constructor(prefix: string | undefined) {
    this.prefix = prefix;
  }

  fail(field: string, problem: string): never {
    throw new ManifestError(field, problem);
  }

  record(value: unknown, field: string, fields: readonly string[]): Record<string, unknown> {
    if (!isRecord(value)) this.fail(field, `expected an object, found ${typeName(value)}`);
    for (const name of Object.keys(value)) {
      if (!fields.includes(name)) {
        this.fail(
          join(field, name),
          `unknown field (format version ${this.version} has none; a newer format bumps formatVersion)`,
        );
      }
    }
    for (const name of fields) {
      if (!Object.hasOwn(value, name)) this.fail(join(field, name), 'missing');
    }
    return value;
  }

  count(value: unknown, field: string): number {
    if (value instanceof NonCanonicalNumber) {
      this.fail(field, `expected a non-negative integer in plain decimal, found ${value.source}`);
    }
    if (typeof value !== 'number') this.fail(field, `expected a number, found ${typeName(value)}`);
    if (!Number.isFinite(value) || !Number.isInteger(value)) this.fail(field, 'not an integer');
    if (value < 0) this.fail(field, 'negative');
    if (!Number.isSafeInteger(value)) this.fail(field, 'beyond 2^53 - 1');
    // -0 is an integer >= 0; normalise it so the output has one spelling.
    return value === 0 ? 0 : value;
  }

  string(value: unknown, field: string): string {
    if (typeof value !== 'string') this.fail(field, `expected a string, found ${typeName(value)}`);
    return value;
  }

  lineage(value: unknown, field: string): string {
    const text = this.string(value, field);
    if (!LINEAGE_PATTERN.test(text)) {
      this.fail(field, 'not a lineage id (1 to 128 of A-Z a-z 0-9 . _ -)');
    }
    return text;
  }

  crc32(value: unknown, field: string): string {
    const text = this.string(value, field);
    if (!isCrc32Hex(text)) this.fail(field, 'not a CRC-32 as 8 lowercase hex digits');
    return text;
  }

  key(value: unknown, field: string): string {
    const text = this.string(value, field);
    if (this.prefix !== undefined && !text.startsWith(`${this.prefix}/`)) {
      this.fail(field, `outside the manifest's prefix ${JSON.stringify(this.prefix)}`);
    }
    return text;
  }

  /** An RFC 3339 date-time or `null`; returns it and its time in ms (`null` for `null`). */
  time(value: unknown, field: string): { text: string | null; ms: number | null } {
    if (value === null) return { text: null, ms: null };
    if (typeof value !== 'string') {
      this.fail(field, `expected an RFC 3339 date-time or null, found ${typeName(value)}`);
    }
    const problem = rfc3339Problem(value);
    if (problem !== undefined) this.fail(field, problem);
    const ms = Date.parse(value);
    // rfc3339Problem accepts second 60 (a leap second), which Date.parse refuses.
    if (Number.isNaN(ms)) this.fail(field, 'not a date-time this reader can place in time');
    return { text: value, ms };
  }

  array(value: unknown, field: string): unknown[] {
    if (!Array.isArray(value)) this.fail(field, `expected an array, found ${typeName(value)}`);
    return value;
  }
}

function join(parent: string, name: string): string {
  return parent === '' ? name : `${parent}.${name}`;
}

/**
 * Checks `value` against every rule of the format and returns a fresh,
 * normalised copy with only the format's fields, in the format's order.
 * With `prefix` undefined the key rules (prefix and key shapes) are skipped.
 */
function checkManifest(value: unknown, prefix: string | undefined): Manifest {
  const check: Checker = new Checker(prefix);
  if (!isRecord(value)) check.fail('', `expected a JSON object, found ${typeName(value)}`);
  // The version first: a newer document fails on its version, not on a field it added.
  if (!Object.hasOwn(value, 'formatVersion')) check.fail('formatVersion', 'missing');
  const version = value.formatVersion;
  if (version !== 1 && version !== 2 && version !== 3) {
    check.fail(
      'formatVersion',
      `unsupported format version ${value.formatVersion instanceof NonCanonicalNumber ? value.formatVersion.source : JSON.stringify(version)} (this reader knows ${MANIFEST_FORMAT_VERSIONS.join(', ')})`,
    );
  }
  check.version = version;
  const root = check.record(
    value,
    '',
    version === 1 ? MANIFEST_FIELDS : version === 2 ? MANIFEST_FIELDS_V2 : MANIFEST_FIELDS_V3,
  );
  const lineage = check.lineage(root.lineage, 'lineage');
  const createdAt = check.string(root.createdAt, 'createdAt');
  const dateProblem = rfc3339Problem(createdAt);
  if (dateProblem !== undefined) check.fail('createdAt', dateProblem);
  const commitSeq = check.count(root.commitSeq, 'commitSeq');
  const oldestCommitSeq = check.count(root.oldestCommitSeq, 'oldestCommitSeq');
  const walGeneration = check.count(root.walGeneration, 'walGeneration');
  const leaseGeneration =
    version === 3
      ? root.leaseGeneration === null
        ? null
        : check.count(root.leaseGeneration, 'leaseGeneration')
      : undefined;
  let times: { snapshotTime: string | null; commitTime: string | null } | undefined;
  if (version !== 1) {
    const snapshot = check.time(root.snapshotTime, 'snapshotTime');
    const commit = check.time(root.commitTime, 'commitTime');
    if (snapshot.ms !== null && commit.ms !== null && commit.ms < snapshot.ms) {
      check.fail(
        'commitTime',
        `${commit.text} is before snapshotTime ${snapshot.text} (the newest state cannot be older than the oldest)`,
      );
    }
    times = { snapshotTime: snapshot.text, commitTime: commit.text };
  }

  const keysSeen = new Map<string, string>();
  const noteKey = (key: string, field: string): void => {
    const earlier = keysSeen.get(key);
    if (earlier !== undefined) check.fail(field, `the same key as ${earlier}`);
    keysSeen.set(key, field);
  };

  const namesSeen = new Map<string, string>();
  const files: FileEntry[] = check.array(root.files, 'files').map((item, index) => {
    const at = `files[${index}]`;
    const entry = check.record(item, at, FILE_FIELDS);
    const name = check.string(entry.name, `${at}.name`);
    const nameProblem = plainNameProblem(name);
    if (nameProblem !== undefined)
      check.fail(`${at}.name`, `not a plain file name: ${nameProblem}`);
    const earlier = namesSeen.get(name);
    if (earlier !== undefined) check.fail(`${at}.name`, `duplicate name, also ${earlier}`);
    namesSeen.set(name, `${at}.name`);
    const file: FileEntry = {
      name,
      key: check.key(entry.key, `${at}.key`),
      size: check.count(entry.size, `${at}.size`),
      crc32: check.crc32(entry.crc32, `${at}.crc32`),
      frames: check.count(entry.frames, `${at}.frames`),
      lineage: check.lineage(entry.lineage, `${at}.lineage`),
    };
    if (prefix !== undefined) checkFileKey(check, prefix, file, walGeneration, at);
    noteKey(file.key, `${at}.key`);
    return file;
  });

  let previousEnd: number | undefined;
  // The commits before each segment: a compacted key names where it starts.
  let commitsBefore = oldestCommitSeq + files.reduce((sum, file) => sum + file.frames, 0);
  const segments: SegmentEntry[] = check.array(root.segments, 'segments').map((item, index) => {
    const at = `segments[${index}]`;
    const entry = check.record(item, at, SEGMENT_FIELDS);
    const segment: SegmentEntry = {
      key: check.key(entry.key, `${at}.key`),
      size: check.count(entry.size, `${at}.size`),
      crc32: check.crc32(entry.crc32, `${at}.crc32`),
      frames: check.count(entry.frames, `${at}.frames`),
      lineage: check.lineage(entry.lineage, `${at}.lineage`),
    };
    if (prefix !== undefined) {
      const range = parseSegmentKey(prefix, segment.key);
      if (range === undefined) check.fail(`${at}.key`, 'not a segment key of this layout');
      if (range.generation !== walGeneration) {
        check.fail(
          `${at}.key`,
          `a segment of generation ${range.generation}, not of walGeneration ${walGeneration}`,
        );
      }
      if (range.layout === 'compacted') {
        if (segment.size < MIN_SEGMENT_OBJECT_BYTES) {
          check.fail(
            `${at}.size`,
            `${segment.size} is less than the smallest stored segment object (${MIN_SEGMENT_OBJECT_BYTES} bytes)`,
          );
        }
        if (segment.frames !== range.toCommit - range.fromCommit) {
          check.fail(
            `${at}.frames`,
            `${segment.frames} does not match the key's commit range (${range.fromCommit}-${range.toCommit})`,
          );
        }
        if (range.fromCommit !== commitsBefore) {
          check.fail(
            `${at}.key`,
            `its commit range starts at ${range.fromCommit}, not after the ${commitsBefore} commits before it`,
          );
        }
      } else if (range.layout === 'object') {
        // An envelope's size is its header plus the encoded bytes: not the
        // range, but never less than the smallest header.
        if (segment.size < MIN_SEGMENT_OBJECT_BYTES) {
          check.fail(
            `${at}.size`,
            `${segment.size} is less than the smallest stored segment object (${MIN_SEGMENT_OBJECT_BYTES} bytes)`,
          );
        }
      } else if (segment.size !== range.end - range.start) {
        check.fail(
          `${at}.size`,
          `${segment.size} does not match the key's byte range (${range.end - range.start})`,
        );
      }
      if (previousEnd !== undefined && range.start !== previousEnd) {
        check.fail(
          `${at}.key`,
          `starts at byte ${range.start}, not where the previous segment ends (${previousEnd})`,
        );
      }
      previousEnd = range.end;
    }
    commitsBefore += segment.frames;
    noteKey(segment.key, `${at}.key`);
    return segment;
  });

  const expected = sumCommits(oldestCommitSeq, files, segments, check);
  if (commitSeq !== expected) {
    check.fail(
      'commitSeq',
      `${commitSeq} does not equal oldestCommitSeq + the frames listed (${expected})`,
    );
  }
  return {
    formatVersion: version,
    lineage,
    createdAt,
    commitSeq,
    oldestCommitSeq,
    walGeneration,
    ...(leaseGeneration === undefined ? {} : { leaseGeneration }),
    ...(times ?? {}),
    files,
    segments,
  };
}

function checkFileKey(
  check: Checker,
  prefix: string,
  file: FileEntry,
  walGeneration: number,
  at: string,
): void {
  const parsed = parseKey(prefix, file.key);
  switch (parsed?.kind) {
    case 'snapshot':
      if (parsed.generation !== walGeneration) {
        check.fail(
          `${at}.key`,
          `a snapshot of generation ${parsed.generation}, not of walGeneration ${walGeneration}`,
        );
      }
      return;
    case 'archive': {
      const archive = parseArchiveKey(prefix, file.key)!;
      if (file.name !== archiveName(archive.n)) {
        check.fail(`${at}.name`, `archive ${archive.n} must be named ${archiveName(archive.n)}`);
      }
      if (archive.generation > walGeneration) {
        check.fail(
          `${at}.key`,
          `an archive of generation ${archive.generation}, after walGeneration ${walGeneration}`,
        );
      }
      return;
    }
    case 'side':
      if (parsed.name !== file.name) {
        check.fail(
          `${at}.key`,
          `a side-file key for ${JSON.stringify(parsed.name)}, not this name`,
        );
      }
      if (parsed.crc32 !== file.crc32) check.fail(`${at}.crc32`, "does not match the key's CRC-32");
      if (parsed.size !== file.size) check.fail(`${at}.size`, "does not match the key's size");
      if (file.frames !== 0) check.fail(`${at}.frames`, 'a side file holds no frames');
      return;
    default:
      check.fail(`${at}.key`, 'not a snapshot, archive or side-file key of this layout');
  }
}

function sumCommits(
  oldestCommitSeq: number,
  files: readonly { frames: number }[],
  segments: readonly { frames: number }[],
  check: Checker,
): number {
  let total = oldestCommitSeq;
  for (const entry of [...files, ...segments]) {
    total += entry.frames;
    if (!Number.isSafeInteger(total)) {
      check.fail('commitSeq', 'oldestCommitSeq + the frames listed is beyond 2^53 - 1');
    }
  }
  return total;
}

/**
 * What a manifest's `commitSeq` must be: `oldestCommitSeq` plus the frames of
 * every file and segment. Throws {@link ManifestError} (field `commitSeq`)
 * when the sum is beyond 2^53 − 1.
 */
export function computeCommitSeq(parts: {
  oldestCommitSeq: number;
  files: readonly { frames: number }[];
  segments: readonly { frames: number }[];
}): number {
  const check: Checker = new Checker(undefined);
  return sumCommits(
    check.count(parts.oldestCommitSeq, 'oldestCommitSeq'),
    parts.files.map((file, index) => ({
      frames: check.count(file.frames, `files[${index}].frames`),
    })),
    parts.segments.map((segment, index) => ({
      frames: check.count(segment.frames, `segments[${index}].frames`),
    })),
    check,
  );
}

function checkPrefixOption(prefix: string): void {
  const problem = prefixProblem(prefix);
  // An invalid prefix is the caller's bug, not the document's: the key functions' error.
  if (problem !== undefined) throw new KeyLayoutError('prefix', prefix, problem);
}

const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

function decode(text: string | Uint8Array, limit: number, document: 'manifest' | 'LATEST'): string {
  if (typeof text === 'string') {
    // Cheap bound first (a UTF-16 unit is at most 3 UTF-8 bytes), exact count only near the cap.
    if (text.length > limit || (text.length * 3 > limit && Buffer.byteLength(text) > limit)) {
      throw new ManifestError('', `larger than the ${limit}-byte cap`, { document });
    }
    return text;
  }
  if (!(text instanceof Uint8Array)) {
    throw new ManifestError('', `expected text or bytes, found ${typeName(text)}`, { document });
  }
  if (text.byteLength > limit) {
    throw new ManifestError('', `${text.byteLength} bytes, larger than the ${limit}-byte cap`, {
      document,
    });
  }
  try {
    return decoder.decode(text);
  } catch (error) {
    throw new ManifestError('', 'not valid UTF-8', { cause: error, document });
  }
}

function reviveNumbers(_key: string, value: unknown, context?: { source?: string }): unknown {
  // Runtimes without JSON.parse source access (no `context`) get the parsed value as is.
  if (typeof value === 'number' && context?.source !== undefined) {
    if (!CANONICAL_INTEGER.test(context.source)) return new NonCanonicalNumber(context.source);
  }
  return value;
}

/**
 * Parses and checks a manifest document read from under `prefix`.
 *
 * Throws {@link ManifestError} naming the field path and the problem for
 * anything this format version does not accept (see the package README for
 * the full list of rules); {@link KeyLayoutError} for an invalid `prefix`. Never returns a
 * manifest naming a key outside `${prefix}/`, a file name that is not a plain
 * name, or numbers that do not add up. Lineage is not checked here: see
 * {@link verifyLineage}.
 */
export function parseManifest(text: string | Uint8Array, options: { prefix: string }): Manifest {
  checkPrefixOption(options.prefix);
  const source = decode(text, MAX_MANIFEST_BYTES, 'manifest');
  let value: unknown;
  try {
    value = JSON.parse(source, reviveNumbers);
  } catch (error) {
    // Includes a RangeError from nesting too deep to revive: still just "not JSON we read".
    throw new ManifestError('', `not valid JSON (${(error as Error).message})`, { cause: error });
  }
  return checkManifest(value, options.prefix);
}

/**
 * Checks a manifest without parsing (the same rules as {@link parseManifest};
 * the key rules only when `prefix` is given) and returns a normalised copy.
 */
export function checkManifestValue(value: unknown, options: { prefix?: string } = {}): Manifest {
  if (options.prefix !== undefined) checkPrefixOption(options.prefix);
  return checkManifest(value, options.prefix);
}

function line(value: Record<string, unknown>, fields: readonly string[]): string {
  return `{${fields.map((name) => `${JSON.stringify(name)}:${JSON.stringify(value[name])}`).join(',')}}`;
}

/**
 * The manifest as JSON text: fields in the format's order, one line per
 * top-level field and per entry, ending in a newline. The same manifest
 * always gives the same bytes.
 *
 * The manifest is checked first (with `options.prefix`, the key rules too),
 * so what this returns parses again to an equal manifest; throws
 * {@link ManifestError} otherwise, or when the text would exceed
 * {@link MAX_MANIFEST_BYTES}.
 */
export function serializeManifest(manifest: Manifest, options: { prefix?: string } = {}): string {
  const m = checkManifestValue(manifest, options);
  const entries = (items: readonly object[], fields: readonly string[]): string =>
    items.length === 0
      ? '[]'
      : `[\n${items.map((item) => `    ${line(item as Record<string, unknown>, fields)}`).join(',\n')}\n  ]`;
  // Version 1 comes out byte for byte as before; version 2 adds its two
  // lines, version 3 one more.
  const lease =
    m.formatVersion === 3
      ? `
  "leaseGeneration": ${JSON.stringify(m.leaseGeneration)},`
      : '';
  const times =
    m.formatVersion === 1
      ? ''
      : `
  "snapshotTime": ${JSON.stringify(m.snapshotTime)},
  "commitTime": ${JSON.stringify(m.commitTime)},`;
  const text = `{
  "formatVersion": ${m.formatVersion},
  "lineage": ${JSON.stringify(m.lineage)},
  "createdAt": ${JSON.stringify(m.createdAt)},
  "commitSeq": ${m.commitSeq},
  "oldestCommitSeq": ${m.oldestCommitSeq},
  "walGeneration": ${m.walGeneration},${lease}${times}
  "files": ${entries(m.files, FILE_FIELDS)},
  "segments": ${entries(m.segments, SEGMENT_FIELDS)}
}
`;
  if (Buffer.byteLength(text) > MAX_MANIFEST_BYTES) {
    throw new ManifestError(
      '',
      `the serialized manifest is larger than the ${MAX_MANIFEST_BYTES}-byte cap`,
    );
  }
  return text;
}

/**
 * Throws {@link ManifestError} (field `files[i].lineage` or
 * `segments[i].lineage`) when an entry names a lineage other than the
 * manifest's. A restore point names only its own lineage's objects.
 */
export function verifyLineage(manifest: Manifest): void {
  manifest.files.forEach((file, index) => {
    if (file.lineage !== manifest.lineage) {
      throw new ManifestError(
        `files[${index}].lineage`,
        `names lineage ${JSON.stringify(file.lineage)}, not the manifest's ${JSON.stringify(manifest.lineage)}`,
      );
    }
  });
  manifest.segments.forEach((segment, index) => {
    if (segment.lineage !== manifest.lineage) {
      throw new ManifestError(
        `segments[${index}].lineage`,
        `names lineage ${JSON.stringify(segment.lineage)}, not the manifest's ${JSON.stringify(manifest.lineage)}`,
      );
    }
  });
}

/**
 * The text of the LATEST object. Without `leaseGeneration`, the newest
 * manifest's key, nothing else (no newline), as every release wrote it
 * before version 3 manifests; with it, one line of JSON,
 * `{"manifest":"<key>","leaseGeneration":<n>}`. Throws
 * {@link ManifestError} when `key` is not a manifest key.
 */
export function serializeLatest(key: string, leaseGeneration?: number | null): string {
  const at = typeof key === 'string' ? key.lastIndexOf('/manifest/') : -1;
  const prefix = at > 0 ? key.slice(0, at) : '';
  if (
    at <= 0 ||
    prefixProblem(prefix) !== undefined ||
    parseManifestKey(prefix, key) === undefined
  ) {
    throw new ManifestError(
      '',
      `not a manifest key: ${JSON.stringify(String(key).slice(0, 200))}`,
      {
        document: 'LATEST',
      },
    );
  }
  if (leaseGeneration === undefined) return key;
  if (leaseGeneration !== null && !(Number.isSafeInteger(leaseGeneration) && leaseGeneration >= 0))
    throw new ManifestError('leaseGeneration', `not a lease generation: ${leaseGeneration}`, {
      document: 'LATEST',
    });
  return JSON.stringify({ manifest: key, leaseGeneration });
}

/** What a LATEST object says: the manifest it names and, when it says, the lease generation that wrote it. */
export interface LatestRecord {
  readonly key: string;
  /** `null`: LATEST does not say (a bare key, or written without a lease). */
  readonly leaseGeneration: number | null;
}

/**
 * Parses a LATEST object read from under `prefix`: one manifest key of this
 * prefix (one trailing newline tolerated, for objects written by hand), or
 * the JSON form {@link serializeLatest} writes with a lease generation; at
 * most {@link MAX_LATEST_BYTES}. Throws {@link ManifestError} with
 * `document: 'LATEST'` otherwise.
 */
export function parseLatestRecord(
  text: string | Uint8Array,
  options: { prefix: string },
): LatestRecord {
  checkPrefixOption(options.prefix);
  const source = decode(text, MAX_LATEST_BYTES, 'LATEST');
  const line = source.endsWith('\n') ? source.slice(0, -1) : source;
  const refuse = (problem: string): never => {
    throw new ManifestError('', problem, { document: 'LATEST' });
  };
  let key = line;
  let leaseGeneration: number | null = null;
  if (line.startsWith('{')) {
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      refuse('starts with "{" but is not JSON');
    }
    const record = value as Record<string, unknown>;
    const fields = isRecord(value) ? Object.keys(record).sort().join(',') : '';
    if (fields !== 'leaseGeneration,manifest')
      refuse('is not an object of exactly "manifest" and "leaseGeneration"');
    if (typeof record.manifest !== 'string') refuse('its "manifest" is not a string');
    const generation = record.leaseGeneration;
    if (
      generation !== null &&
      !(typeof generation === 'number' && Number.isSafeInteger(generation) && generation >= 0)
    )
      refuse('its "leaseGeneration" is neither a non-negative integer nor null');
    key = record.manifest as string;
    leaseGeneration = generation as number | null;
  }
  if (parseManifestKey(options.prefix, key) === undefined)
    refuse(`does not hold one manifest key of prefix ${JSON.stringify(options.prefix)}`);
  return { key, leaseGeneration };
}

/** The manifest key a LATEST object names (see {@link parseLatestRecord}). */
export function parseLatest(text: string | Uint8Array, options: { prefix: string }): string {
  return parseLatestRecord(text, options).key;
}

/**
 * The commit a restore point can restore to at the least: its floor plus the
 * frames of the files it names (a snapshot and archives stand for the commits
 * before its WAL). A restore point covers every commit from here to its
 * `commitSeq`.
 */
export function restorableFrom(manifest: Manifest): number {
  let from = manifest.oldestCommitSeq;
  for (const file of manifest.files) from += file.frames;
  return from;
}

/**
 * The times of the states a restore point restores, in ms since the epoch:
 * `from` of its oldest (at {@link restorableFrom}, the snapshot's), `to` of
 * its newest (at `commitSeq`). Each `null` when unknown: always for a
 * version 1 manifest, and for an engine that records no times.
 */
export function stateTimes(manifest: Manifest): { from: number | null; to: number | null } {
  const ms = (text: string | null | undefined): number | null => {
    if (text === null || text === undefined) return null;
    const time = Date.parse(text);
    return Number.isNaN(time) ? null : time;
  };
  return { from: ms(manifest.snapshotTime), to: ms(manifest.commitTime) };
}
