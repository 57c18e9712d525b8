/**
 * The object layout under a backup prefix, as constructors and their exact
 * inverses. Every number in a key is zero-padded to 20 digits, so listing
 * order is numeric order ("the newest N manifests" is the tail of one LIST of
 * `manifest/`); numbers are integers in 0..2^53 − 1 (16 digits at most).
 * - A constructor returns a key under `${prefix}/` valid for every store
 *   (`@x/store/keys`: at most 1024 UTF-8 bytes), or throws {@link KeyLayoutError}.
 * - `parseX(prefix, xKey(prefix, ...v))` is `v`; any other string (other
 *   prefix or padding, non-digits, too large, not a plain name) is `undefined`.
 *   Parsers never throw for a bucket's key, only for an invalid `prefix`.
 */
import { keyProblem, MAX_KEY_BYTES } from '@x/store/keys';
import { isCrc32Hex } from './crc32.ts';
import { KeyLayoutError } from './errors.ts';

/** The longest key, in UTF-8 bytes, any store accepts: `@x/store`'s. */
export { MAX_KEY_BYTES };

/** The longest plain file name, in UTF-8 bytes (the usual file-system limit). */
export const MAX_NAME_BYTES = 255;

/** Digits of every number in a key. */
export const KEY_NUMBER_DIGITS = 20;

const PADDED = /^[0-9]{20}$/;
const CANONICAL_DECIMAL = /^(0|[1-9][0-9]*)$/;

function hasControlCharacter(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code < 0x20 || code === 0x7f) return true;
  }
  return false;
}

/**
 * Why `name` is not a plain file name, or undefined. A plain name is one
 * path component that names a file inside a directory on every common file
 * system: not empty, not `.` or `..`, no `/` or `\`, no NUL or control
 * character, well-formed Unicode, at most 255 UTF-8 bytes.
 */
export function plainNameProblem(name: unknown): string | undefined {
  if (typeof name !== 'string') return 'not a string';
  if (name.length === 0) return 'empty';
  if (name === '.' || name === '..') return `"${name}" is not a file name`;
  if (name.includes('/') || name.includes('\\')) return 'contains a path separator';
  if (hasControlCharacter(name)) return 'contains NUL or a control character';
  if (!name.isWellFormed()) return 'contains a lone surrogate (not valid Unicode)';
  if (Buffer.byteLength(name, 'utf8') > MAX_NAME_BYTES)
    return `longer than ${MAX_NAME_BYTES} bytes of UTF-8`;
  return undefined;
}

/** True when `name` is a plain file name (see {@link plainNameProblem}). */
export function isPlainName(name: unknown): name is string {
  return plainNameProblem(name) === undefined;
}

/** Why `prefix` is not a backup prefix, or undefined: a valid key with no trailing `/`. */
export function prefixProblem(prefix: unknown): string | undefined {
  if (typeof prefix !== 'string') return 'not a string';
  if (prefix.endsWith('/') && prefix.length > 0) return 'ends with "/"';
  return keyProblem(prefix);
}

function checkPrefix(prefix: string): void {
  const problem = prefixProblem(prefix);
  if (problem !== undefined) throw new KeyLayoutError('prefix', prefix, problem);
}

function checkNumber(argument: string, value: number): void {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    throw new KeyLayoutError(argument, value, 'not an integer in 0..2^53-1');
  }
}

function checkResult(key: string): string {
  const problem = keyProblem(key);
  if (problem !== undefined) throw new KeyLayoutError('key', key, problem);
  return key;
}

/** `value` as 20 zero-padded decimal digits. Throws for anything but an integer in 0..2^53 − 1. */
export function pad20(value: number): string {
  checkNumber('number', value);
  return String(value).padStart(KEY_NUMBER_DIGITS, '0');
}

/** The inverse of {@link pad20}: exactly 20 ASCII digits whose value is at most 2^53 − 1. */
export function parsePad20(text: string): number | undefined {
  if (!PADDED.test(text)) return undefined;
  const value = Number(text);
  return Number.isSafeInteger(value) ? value : undefined;
}

/** `${prefix}/LATEST`: the key of the object that names the newest manifest. */
export function latestKey(prefix: string): string {
  checkPrefix(prefix);
  return checkResult(`${prefix}/LATEST`);
}

/** `${prefix}/manifest/{commitSeq}.json`: the restore point whose restored store reports `commitSeq` commits. */
export function manifestKey(prefix: string, commitSeq: number): string {
  checkPrefix(prefix);
  checkNumber('commitSeq', commitSeq);
  return checkResult(`${prefix}/manifest/${pad20(commitSeq)}.json`);
}

/** `${prefix}/snapshots/{generation}-{frames}.snapshot`: the snapshot of a WAL generation. */
export function snapshotKey(prefix: string, generation: number, frames: number): string {
  checkPrefix(prefix);
  checkNumber('generation', generation);
  checkNumber('frames', frames);
  return checkResult(`${prefix}/snapshots/${pad20(generation)}-${pad20(frames)}.snapshot`);
}

/**
 * `${prefix}/snapshots/{generation}-{frames}.snap`: the snapshot of a WAL
 * generation stored in the object envelope of `@x/wal-segment` (kind
 * snapshot: a header naming the codec and the decoded length, then the
 * encoded bytes). {@link snapshotKey} is the raw layout earlier releases
 * wrote; both parse with {@link parseSnapshotKey}.
 */
export function snapshotObjectKey(prefix: string, generation: number, frames: number): string {
  checkPrefix(prefix);
  checkNumber('generation', generation);
  checkNumber('frames', frames);
  return checkResult(`${prefix}/snapshots/${pad20(generation)}-${pad20(frames)}.snap`);
}

/** `${prefix}/archives/{generation}/wal.{n}.archive`: archived WAL file `n`, uploaded in `generation`. */
export function archiveKey(prefix: string, generation: number, n: number): string {
  checkPrefix(prefix);
  checkNumber('generation', generation);
  checkNumber('n', n);
  return checkResult(`${prefix}/archives/${pad20(generation)}/wal.${pad20(n)}.archive`);
}

/**
 * `${prefix}/archives/{generation}/wal.{n}.archive.bko`: archived WAL file
 * `n` stored whole in the object envelope of `@x/wal-segment` (kind `file`),
 * as an encrypted backup stores it. {@link archiveKey} is the raw layout; both
 * parse with {@link parseArchiveKey}.
 */
export function archiveObjectKey(prefix: string, generation: number, n: number): string {
  checkPrefix(prefix);
  checkNumber('generation', generation);
  checkNumber('n', n);
  return checkResult(`${prefix}/archives/${pad20(generation)}/wal.${pad20(n)}.archive.bko`);
}

/**
 * `${prefix}/wal/{generation}/{start}-{end}.segment`: bytes `start..end` of
 * the generation's WAL file. A segment is never empty: `start < end`.
 */
export function segmentKey(prefix: string, generation: number, start: number, end: number): string {
  checkPrefix(prefix);
  checkNumber('generation', generation);
  checkNumber('start', start);
  checkNumber('end', end);
  if (start >= end) throw new KeyLayoutError('end', end, `not greater than start (${start})`);
  return checkResult(`${prefix}/wal/${pad20(generation)}/${pad20(start)}-${pad20(end)}.segment`);
}

/**
 * `${prefix}/wal/{generation}/{start}-{end}.seg`: bytes `start..end` of the
 * generation's WAL file, stored in the object envelope of `@x/wal-segment`
 * (a header naming the codec, then the encoded bytes). The range is of the
 * decoded log, as for {@link segmentKey}; the object's size is not `end −
 * start`. A segment is never empty: `start < end`.
 */
export function segmentObjectKey(
  prefix: string,
  generation: number,
  start: number,
  end: number,
): string {
  checkPrefix(prefix);
  checkNumber('generation', generation);
  checkNumber('start', start);
  checkNumber('end', end);
  if (start >= end) throw new KeyLayoutError('end', end, `not greater than start (${start})`);
  return checkResult(`${prefix}/wal/${pad20(generation)}/${pad20(start)}-${pad20(end)}.seg`);
}

/**
 * How a segment object is stored: `raw` (`.segment`, the log's bytes as they
 * are) or `object` (`.seg`, the envelope: header + encoded bytes).
 */
export type SegmentLayout = 'raw' | 'object';

/** The deepest compaction level a key can name. */
export const MAX_COMPACTION_LEVEL = 9;

/**
 * `${prefix}/wal/{generation}/{start}-{end}.L{level}.{from}-{to}.seg`: a
 * compacted object, in the object envelope of `@x/wal-segment` (kind
 * `compacted`), standing for bytes `start..end` of the generation's log,
 * that is the commits after `from` up to `to` of the restore point's count
 * (`from` commits came before it: the snapshot's and every earlier entry's).
 * It holds one record with the newest version of every page those commits
 * wrote, so it restores to commit `to` only, never to one inside. A listing
 * shows the commit range each object covers; the level (1 to
 * {@link MAX_COMPACTION_LEVEL}) says which compaction wrote it. It always
 * covers at least 2 commits: `to − from ≥ 2`.
 */
export function compactedSegmentKey(
  prefix: string,
  generation: number,
  start: number,
  end: number,
  level: number,
  fromCommit: number,
  toCommit: number,
): string {
  checkPrefix(prefix);
  checkNumber('generation', generation);
  checkNumber('start', start);
  checkNumber('end', end);
  checkNumber('fromCommit', fromCommit);
  checkNumber('toCommit', toCommit);
  if (start >= end) throw new KeyLayoutError('end', end, `not greater than start (${start})`);
  if (!Number.isInteger(level) || level < 1 || level > MAX_COMPACTION_LEVEL)
    throw new KeyLayoutError('level', level, `not a level from 1 to ${MAX_COMPACTION_LEVEL}`);
  if (toCommit - fromCommit < 2)
    throw new KeyLayoutError(
      'toCommit',
      toCommit,
      `covers fewer than 2 commits after fromCommit (${fromCommit})`,
    );
  return checkResult(
    `${prefix}/wal/${pad20(generation)}/${pad20(start)}-${pad20(end)}.L${level}.${pad20(fromCommit)}-${pad20(toCommit)}.seg`,
  );
}

/** What {@link parseSegmentKey} reads from a segment key. */
export type ParsedSegmentKey =
  | { generation: number; start: number; end: number; layout: SegmentLayout }
  | {
      generation: number;
      start: number;
      end: number;
      /** `.L{level}.{from}-{to}.seg`: a compacted object ({@link compactedSegmentKey}). */
      layout: 'compacted';
      level: number;
      fromCommit: number;
      toCommit: number;
    };

/**
 * `${prefix}/wal/{generation}/`: the listing prefix of one generation's
 * segments (what a LIST of `wal/` with delimiter `/` returns as a common prefix).
 */
export function segmentGenerationPrefix(prefix: string, generation: number): string {
  checkPrefix(prefix);
  checkNumber('generation', generation);
  return `${checkResult(`${prefix}/wal/${pad20(generation)}`)}/`;
}

/**
 * `${prefix}/side/{name}/{crc32}-{size}`: a side file, addressed by its
 * content (the same bytes always map to the same key, so an upload that finds
 * the key present can compare instead of overwriting).
 */
export function sideKey(prefix: string, name: string, crc32hex: string, size: number): string {
  checkPrefix(prefix);
  const problem = plainNameProblem(name);
  if (problem !== undefined) throw new KeyLayoutError('name', name, problem);
  if (!isCrc32Hex(crc32hex)) {
    throw new KeyLayoutError('crc32', crc32hex, 'not 8 lowercase hex digits');
  }
  checkNumber('size', size);
  return checkResult(`${prefix}/side/${name}/${crc32hex}-${pad20(size)}`);
}

/**
 * `${prefix}/side/{name}/{crc32}-{size}.bko`: a side or chain file stored
 * whole in the object envelope of `@x/wal-segment` (kind `file`), as an
 * encrypted backup stores it. Unlike {@link sideKey}, `crc32` and `size` are
 * those of the stored bytes, not of the file: a key in clear that named the
 * file's own CRC-32 would confirm a guess of its content. Both parse with
 * {@link parseSideKey}.
 */
export function sideObjectKey(
  prefix: string,
  name: string,
  storedCrc32hex: string,
  storedSize: number,
): string {
  return checkResult(`${sideKey(prefix, name, storedCrc32hex, storedSize)}.bko`);
}

/**
 * `${prefix}/${relative}`: any path under the prefix, for listing (`manifest/`,
 * `snapshots/`, `side/`). `relative` is one or more `/`-separated segments,
 * none empty, `.` or `..`; one trailing `/` is kept (a listing prefix).
 */
export function objectKey(prefix: string, relative: string): string {
  checkPrefix(prefix);
  if (typeof relative !== 'string' || relative === '' || relative === '/') {
    throw new KeyLayoutError('relative', relative, 'empty');
  }
  const trimmed = relative.endsWith('/') ? relative.slice(0, -1) : relative;
  const problem = keyProblem(trimmed);
  if (problem !== undefined) throw new KeyLayoutError('relative', relative, problem);
  const key = checkResult(`${prefix}/${trimmed}`);
  return relative.endsWith('/') ? `${key}/` : key;
}

/** `wal.{n}.archive`, `n` unpadded: the name of an archived WAL file in a store directory. */
export function archiveName(n: number): string {
  checkNumber('n', n);
  return `wal.${n}.archive`;
}

/**
 * The number of an archived WAL file's name (`wal.{n}.archive`, `n` in plain
 * decimal without leading zeros, as {@link archiveName} writes it), or undefined.
 */
export function parseArchiveName(name: string): number | undefined {
  if (typeof name !== 'string' || !name.startsWith('wal.') || !name.endsWith('.archive')) {
    return undefined;
  }
  const digits = name.slice(4, -8);
  if (digits.length > 16 || !CANONICAL_DECIMAL.test(digits)) return undefined;
  const value = Number(digits);
  return Number.isSafeInteger(value) ? value : undefined;
}

/** The part of `key` after `${prefix}/`, or undefined when `key` is not a valid key under it. */
function relativeTo(prefix: string, key: string): string | undefined {
  checkPrefix(prefix);
  if (typeof key !== 'string' || !key.startsWith(`${prefix}/`)) return undefined;
  if (keyProblem(key) !== undefined) return undefined;
  return key.slice(prefix.length + 1);
}

const MANIFEST_PATTERN = /^manifest\/([0-9]{20})\.json$/;
const SNAPSHOT_PATTERN = /^snapshots\/([0-9]{20})-([0-9]{20})\.(snapshot|snap)$/;
const ARCHIVE_PATTERN = /^archives\/([0-9]{20})\/wal\.([0-9]{20})\.archive(\.bko)?$/;
const SEGMENT_PATTERN = /^wal\/([0-9]{20})\/([0-9]{20})-([0-9]{20})\.(segment|seg)$/;
const COMPACTED_PATTERN =
  /^wal\/([0-9]{20})\/([0-9]{20})-([0-9]{20})\.L([1-9])\.([0-9]{20})-([0-9]{20})\.seg$/;
const SEGMENT_GENERATION_PATTERN = /^wal\/([0-9]{20})\/$/;
const SIDE_PATTERN = /^side\/([^/]+)\/([0-9a-f]{8})-([0-9]{20})(\.bko)?$/;

/** Parses every captured group as a padded number; undefined if any is out of range. */
function numbers(match: RegExpExecArray | null, count: number): number[] | undefined {
  if (match === null) return undefined;
  const values: number[] = [];
  for (let i = 1; i <= count; i++) {
    const value = parsePad20(match[i] ?? '');
    if (value === undefined) return undefined;
    values.push(value);
  }
  return values;
}

/** True when `key` is `${prefix}/LATEST`. */
export function isLatestKey(prefix: string, key: string): boolean {
  return relativeTo(prefix, key) === 'LATEST';
}

/** The commit sequence a manifest key names, or undefined for any other key. */
export function parseManifestKey(prefix: string, key: string): number | undefined {
  const relative = relativeTo(prefix, key);
  if (relative === undefined) return undefined;
  return numbers(MANIFEST_PATTERN.exec(relative), 1)?.[0];
}

/**
 * The generation, frame count and layout a snapshot key names — `.snapshot`
 * ({@link snapshotKey}, layout `raw`) or `.snap` ({@link snapshotObjectKey},
 * layout `object`) — or undefined.
 */
export function parseSnapshotKey(
  prefix: string,
  key: string,
): { generation: number; frames: number; layout: SegmentLayout } | undefined {
  const relative = relativeTo(prefix, key);
  if (relative === undefined) return undefined;
  const match = SNAPSHOT_PATTERN.exec(relative);
  const values = numbers(match, 2);
  if (values === undefined) return undefined;
  const layout: SegmentLayout = match![3] === 'snap' ? 'object' : 'raw';
  return { generation: values[0]!, frames: values[1]!, layout };
}

/**
 * How an archive, chain or side file is stored: `raw` (the file's bytes as
 * they are) or `object` (`.bko`: the object envelope, kind `file`).
 */
export type FileLayout = 'raw' | 'object';

/**
 * The generation, archive number and layout an archive key names —
 * `.archive` ({@link archiveKey}, `raw`) or `.archive.bko`
 * ({@link archiveObjectKey}, `object`) — or undefined.
 */
export function parseArchiveKey(
  prefix: string,
  key: string,
): { generation: number; n: number; layout: FileLayout } | undefined {
  const relative = relativeTo(prefix, key);
  if (relative === undefined) return undefined;
  const match = ARCHIVE_PATTERN.exec(relative);
  const values = numbers(match, 2);
  if (values === undefined) return undefined;
  return {
    generation: values[0]!,
    n: values[1]!,
    layout: match![3] === undefined ? 'raw' : 'object',
  };
}

/**
 * The generation, byte range and layout a segment key names — `.segment`
 * ({@link segmentKey}, layout `raw`), `.seg` ({@link segmentObjectKey},
 * layout `object`) or `.L{level}.{from}-{to}.seg` ({@link compactedSegmentKey},
 * layout `compacted`, with its level and commit range) — or undefined (also
 * when `start >= end`, or a compacted key covers fewer than 2 commits).
 */
export function parseSegmentKey(prefix: string, key: string): ParsedSegmentKey | undefined {
  const relative = relativeTo(prefix, key);
  if (relative === undefined) return undefined;
  const compacted = COMPACTED_PATTERN.exec(relative);
  if (compacted !== null) {
    const generation = parsePad20(compacted[1]!);
    const start = parsePad20(compacted[2]!);
    const end = parsePad20(compacted[3]!);
    const fromCommit = parsePad20(compacted[5]!);
    const toCommit = parsePad20(compacted[6]!);
    if (
      generation === undefined ||
      start === undefined ||
      end === undefined ||
      fromCommit === undefined ||
      toCommit === undefined ||
      start >= end ||
      toCommit - fromCommit < 2
    )
      return undefined;
    const level = Number(compacted[4]);
    return { generation, start, end, layout: 'compacted', level, fromCommit, toCommit };
  }
  const match = SEGMENT_PATTERN.exec(relative);
  const values = numbers(match, 3);
  if (values === undefined || values[1]! >= values[2]!) return undefined;
  const layout: SegmentLayout = match![4] === 'seg' ? 'object' : 'raw';
  return { generation: values[0]!, start: values[1]!, end: values[2]!, layout };
}

/** The generation of a listing prefix from {@link segmentGenerationPrefix} (trailing `/` included), or undefined. */
export function parseSegmentGenerationPrefix(prefix: string, listed: string): number | undefined {
  checkPrefix(prefix);
  if (typeof listed !== 'string' || !listed.endsWith('/')) return undefined;
  const relative = relativeTo(prefix, listed.slice(0, -1));
  if (relative === undefined) return undefined;
  return numbers(SEGMENT_GENERATION_PATTERN.exec(`${relative}/`), 1)?.[0];
}

/**
 * The name, CRC-32 (8 lowercase hex), size and layout a side-file key names
 * — {@link sideKey} (`raw`: the file's CRC-32 and size) or
 * {@link sideObjectKey} (`object`: the stored envelope's) — or undefined.
 * Either way `crc32` and `size` are those of the stored bytes.
 */
export function parseSideKey(
  prefix: string,
  key: string,
): { name: string; crc32: string; size: number; layout: FileLayout } | undefined {
  const relative = relativeTo(prefix, key);
  if (relative === undefined) return undefined;
  const match = SIDE_PATTERN.exec(relative);
  if (match === null) return undefined;
  const name = match[1]!;
  const size = parsePad20(match[3]!);
  if (!isPlainName(name) || size === undefined) return undefined;
  return { name, crc32: match[2]!, size, layout: match[4] === undefined ? 'raw' : 'object' };
}

/**
 * The generation of a snapshot or archive key (the objects that are
 * versioned by the WAL generation they were uploaded in), or undefined for
 * any other key.
 */
export function parseVersionedGeneration(prefix: string, key: string): number | undefined {
  return parseSnapshotKey(prefix, key)?.generation ?? parseArchiveKey(prefix, key)?.generation;
}

/** Every kind of key in the layout, with the values it names. */
export type ParsedKey =
  | { kind: 'latest' }
  | { kind: 'manifest'; commitSeq: number }
  | { kind: 'snapshot'; generation: number; frames: number; layout: SegmentLayout }
  | { kind: 'archive'; generation: number; n: number; layout: FileLayout }
  | ({ kind: 'segment' } & ParsedSegmentKey)
  | { kind: 'side'; name: string; crc32: string; size: number; layout: FileLayout };

/** Which kind of layout key `key` is under `prefix`, with its values; undefined for anything else. */
export function parseKey(prefix: string, key: string): ParsedKey | undefined {
  if (isLatestKey(prefix, key)) return { kind: 'latest' };
  const commitSeq = parseManifestKey(prefix, key);
  if (commitSeq !== undefined) return { kind: 'manifest', commitSeq };
  const snapshot = parseSnapshotKey(prefix, key);
  if (snapshot !== undefined) return { kind: 'snapshot', ...snapshot };
  const archive = parseArchiveKey(prefix, key);
  if (archive !== undefined) return { kind: 'archive', ...archive };
  const segment = parseSegmentKey(prefix, key);
  if (segment !== undefined) return { kind: 'segment', ...segment };
  const side = parseSideKey(prefix, key);
  if (side !== undefined) return { kind: 'side', ...side };
  return undefined;
}
