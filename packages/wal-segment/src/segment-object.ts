/**
 * The stored-object envelope (`BKO1`): a header, then a commit-log segment's,
 * a snapshot's or a whole file's bytes encoded by the codec the header
 * names. The byte layout is in docs/format.md. A compacted object
 * (kind 2) stands for log bytes `start..end` and at least 2 commits merged by
 * the engine, so its decoded length is a field of its own; its `previous` is
 * what its first input named, and its chain end (the stored CRC-32 of the last
 * fine segment it covers) is what the next object names as `previous`. Kinds
 * 1 and 3 are written as they were before kind 2 existed. A file (kind 4) is
 * any other file of a restore point stored whole (an encrypted backup's
 * archives, chain and side files): start 0, end its length, no `previous`;
 * it may be empty. Decoding checks
 * everything before it returns a body, and caps zstd's output at the header's
 * length; calls are synchronous and whole-object, for segments of a few MiB.
 */
import {
  constants,
  crc32,
  type ZstdOptions,
  zstdCompress,
  zstdCompressSync,
  zstdDecompressSync,
} from 'node:zlib';
import { type AgeIdentity, type AgeRecipient, recipientFromPublicKey } from '@x/age-envelope';
import { hasMarker } from './errors.ts';
import {
  checkIdentities,
  MAX_OBJECT_RECIPIENTS,
  type ObjectEncryption,
  openBody,
  openProblem,
  readBinding,
  SegmentObjectKeyError,
  sealObject,
} from './object-encryption.ts';

/** `BKO1`: the first four bytes of every envelope. */
export const SEGMENT_OBJECT_MAGIC: Uint8Array = Uint8Array.of(0x42, 0x4b, 0x4f, 0x31);

/** The envelope version this module writes and reads. */
export const SEGMENT_OBJECT_VERSION = 1;

/** The shortest header: the fixed fields, a one-byte lineage and the header CRC. */
export const SEGMENT_OBJECT_MIN_HEADER_BYTES = 53 + 1 + 4;

/**
 * The longest header this reader accepts. A reader that fetches a header
 * alone (a ranged GET) needs at most this many bytes.
 */
export const SEGMENT_OBJECT_MAX_HEADER_BYTES = 4096;

/** The zstd level used when the caller names none: zstd's default, a fit for small commits. */
export const SEGMENT_OBJECT_DEFAULT_ZSTD_LEVEL = 3;

export type ObjectCodec = 'identity' | 'zstd';
export type SegmentObjectKind = 'segment' | 'compacted' | 'snapshot' | 'file';

export interface SegmentObjectHeader {
  readonly version: 1;
  readonly codec: ObjectCodec;
  readonly kind: SegmentObjectKind;
  readonly generation: number;
  readonly start: number;
  readonly end: number;
  readonly commits: number;
  readonly previousCrc32: number;
  readonly bodyCrc32: number;
  readonly lineage: string;
  readonly headerBytes: number;
  /** Bytes the body decodes to: `end − start`, except for a compacted object (its own field). */
  readonly decodedLength: number;
  /** A compacted object's chain end (see the module comment); `null` for the other kinds. */
  readonly chainEndCrc32: number | null;
  /** `age-x25519`: the body is an age file (see object-encryption.ts); `bodyCrc32` is then 0. */
  readonly encryption: ObjectEncryption;
  /** Who can open an encrypted body; empty when `encryption` is `none`. */
  readonly recipients: readonly AgeRecipient[];
}

/** Encoding options: the zstd level, a CRC-32 already known, and the recipients to encrypt to. */
export interface SegmentObjectEncodeOptions {
  readonly level?: number;
  readonly bodyCrc32?: number;
  /** Encrypts the body to these age recipients (zstd codec only); none or empty: in clear. */
  readonly recipients?: readonly AgeRecipient[];
}

/** Decoding options: the age identities that open encrypted bodies. */
export interface SegmentObjectDecodeOptions {
  readonly identities?: readonly AgeIdentity[];
}

export type SegmentObjectFields = Omit<
  SegmentObjectHeader,
  | 'version'
  | 'bodyCrc32'
  | 'headerBytes'
  | 'decodedLength'
  | 'chainEndCrc32'
  | 'encryption'
  | 'recipients'
> & {
  /** Required for a compacted object, refused for the other kinds: the body's length. */
  readonly decodedLength?: number;
  /** Required for a compacted object, refused for the other kinds. */
  readonly chainEndCrc32?: number;
};

const CODEC_VALUES: Record<ObjectCodec, number> = { identity: 0, zstd: 1 };
const CODEC_NAMES: Record<number, ObjectCodec> = { 0: 'identity', 1: 'zstd' };
const KIND_VALUES: Record<SegmentObjectKind, number> = {
  segment: 1,
  compacted: 2,
  snapshot: 3,
  file: 4,
};
const KIND_NAMES: Record<number, SegmentObjectKind> = {
  1: 'segment',
  2: 'compacted',
  3: 'snapshot',
  4: 'file',
};

/** Kinds that stand for a whole file: they start at 0, chain to nothing and may be empty. */
function isWholeFile(kind: SegmentObjectKind): boolean {
  return kind === 'snapshot' || kind === 'file';
}
/** Bytes a compacted object's header adds after the lineage: decoded length, chain end. */
const COMPACTED_FIELDS_BYTES = 12;
const LINEAGE_PATTERN = /^[A-Za-z0-9._-]{1,128}$/;

const SEGMENT_OBJECT_ERROR_MARKER = Symbol.for('x.wal-segment.error.SegmentObjectError');

/**
 * An envelope cannot be written or read: `field` names the header field (or
 * `body`, `bytes`) that is wrong and `problem` says how. Readers refuse such
 * an object whole; nothing of its body may be used.
 */
export class SegmentObjectError extends Error {
  /** Whether the same call, made again later, may succeed with nothing else changed. */
  get retryable(): boolean {
    return false;
  }

  readonly code = 'SEGMENT_OBJECT_INVALID';
  readonly field: string;
  readonly problem: string;

  constructor(field: string, problem: string, options: { cause?: unknown } = {}) {
    super(
      `invalid stored object: ${field}: ${problem}`,
      options.cause === undefined ? undefined : { cause: options.cause },
    );
    this.name = 'SegmentObjectError';
    this.field = field;
    this.problem = problem;
    (this as unknown as Record<symbol, boolean>)[SEGMENT_OBJECT_ERROR_MARKER] = true;
  }

  static isInstance(value: unknown): value is SegmentObjectError {
    return hasMarker(value, SEGMENT_OBJECT_ERROR_MARKER);
  }
}

function checkU53(field: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    throw new SegmentObjectError(field, 'not an integer in 0..2^53-1');
  }
  return value;
}

function checkU32(field: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > 0xffffffff) {
    throw new SegmentObjectError(field, 'not an integer in 0..2^32-1');
  }
  return value;
}

/** Checks the relations between fields that hold for every valid header. */
function checkRanges(
  kind: SegmentObjectKind,
  start: number,
  end: number,
  previous: number,
  commits: number,
): void {
  if (end < start) throw new SegmentObjectError('end', `less than start (${start})`);
  if (!isWholeFile(kind) && end === start) {
    throw new SegmentObjectError('end', `equal to start (${start}): a segment is never empty`);
  }
  if (kind === 'compacted' && commits < 2) {
    throw new SegmentObjectError('commits', `${commits}: a compacted object covers at least 2`);
  }
  if (isWholeFile(kind) && start !== 0) {
    throw new SegmentObjectError('start', `not 0 for a ${kind}`);
  }
  if (isWholeFile(kind) && previous !== 0) {
    throw new SegmentObjectError('previousCrc32', `not 0 for a ${kind}`);
  }
}

/**
 * `header + body` for `body` encoded with `fields.codec`. `fields.start` and
 * `fields.end` must span exactly `body.length` bytes. `options.level` is the
 * zstd level (default {@link SEGMENT_OBJECT_DEFAULT_ZSTD_LEVEL}).
 * `options.bodyCrc32` is the CRC-32 of `body` when the caller already has it
 * (from the pass that read the bytes): it is written as given, not
 * recomputed, so a wrong one makes the object fail its decode check
 * (`bodyCrc32`) instead of passing unnoticed. Throws
 * {@link SegmentObjectError} naming the field for any invalid value.
 */
export function encodeSegmentObject(
  body: Uint8Array,
  fields: SegmentObjectFields,
  options: SegmentObjectEncodeOptions = {},
): Uint8Array {
  const plan = planSegmentObject(bodyOf(body), fields, options);
  const encoded =
    plan.codec === CODEC_VALUES.zstd ? zstdCompressSync(body, zstdOptions(plan)) : body;
  return assembleSegmentObject(plan, encoded);
}

/**
 * {@link encodeSegmentObject} with the compression on libuv's thread pool:
 * the same header and body (the compressed bytes may differ: zstd's
 * streaming encoder cuts its blocks elsewhere), without holding the event loop for the compression (tens
 * of milliseconds per segment of tens of MiB, during which nothing else of
 * the process runs, the source's capture ticks included).
 */
export async function encodeSegmentObjectAsync(
  body: Uint8Array,
  fields: SegmentObjectFields,
  options: SegmentObjectEncodeOptions = {},
): Promise<Uint8Array> {
  const plan = planSegmentObject(bodyOf(body), fields, options);
  if (plan.codec !== CODEC_VALUES.zstd) return assembleSegmentObject(plan, body);
  const encoded = await new Promise<Uint8Array>((resolve, reject) => {
    zstdCompress(body, zstdOptions(plan), (error, result) =>
      error ? reject(error) : resolve(result),
    );
  });
  return assembleSegmentObject(plan, encoded);
}

/** The checked fields of an envelope to write, everything but the encoded body. */
export interface SegmentObjectPlan {
  readonly codec: number;
  readonly kind: number;
  readonly generation: number;
  readonly start: number;
  readonly end: number;
  readonly commits: number;
  readonly previous: number;
  readonly bodyCrc32: number;
  readonly level: number;
  readonly lineage: string;
  readonly bodyLength: number;
  /** A compacted object's chain end; `null` for the other kinds. */
  readonly chainEnd: number | null;
  /** Encrypt to these; empty: in clear. */
  readonly recipients: readonly AgeRecipient[];
}

function bodyOf(body: Uint8Array): { length: number; crc32: () => number } {
  if (!(body instanceof Uint8Array)) throw new SegmentObjectError('body', 'not a Uint8Array');
  return { length: body.length, crc32: () => crc32(body) };
}

/**
 * Checks `fields` for a body of `body.length` bytes and returns the plan of
 * its envelope; `body.crc32` is called only when `options.bodyCrc32` is not
 * given. Throws {@link SegmentObjectError} naming the field.
 */
export function planSegmentObject(
  body: { length: number; crc32: () => number },
  fields: SegmentObjectFields,
  options: SegmentObjectEncodeOptions,
): SegmentObjectPlan {
  const codec = CODEC_VALUES[fields.codec];
  if (codec === undefined)
    throw new SegmentObjectError('codec', `unknown codec ${String(fields.codec)}`);
  const kind = KIND_VALUES[fields.kind];
  if (kind === undefined)
    throw new SegmentObjectError('kind', `unknown kind ${String(fields.kind)}`);
  const generation = checkU53('generation', fields.generation);
  const start = checkU53('start', fields.start);
  const end = checkU53('end', fields.end);
  const commits = checkU53('commits', fields.commits);
  const previous = checkU32('previousCrc32', fields.previousCrc32);
  checkRanges(fields.kind, start, end, previous, commits);
  let chainEnd: number | null = null;
  if (fields.kind === 'compacted') {
    const decodedLength = checkU53('decodedLength', fields.decodedLength);
    chainEnd = checkU32('chainEndCrc32', fields.chainEndCrc32);
    if (decodedLength !== body.length) {
      throw new SegmentObjectError(
        'decodedLength',
        `${decodedLength} is not the body's length (${body.length})`,
      );
    }
  } else {
    if (fields.decodedLength !== undefined || fields.chainEndCrc32 !== undefined) {
      throw new SegmentObjectError(
        fields.decodedLength !== undefined ? 'decodedLength' : 'chainEndCrc32',
        `only a compacted object has one, not a ${fields.kind}`,
      );
    }
    if (end - start !== body.length) {
      throw new SegmentObjectError(
        'end',
        `end − start (${end - start}) is not the body's length (${body.length})`,
      );
    }
  }
  if (typeof fields.lineage !== 'string' || !LINEAGE_PATTERN.test(fields.lineage)) {
    throw new SegmentObjectError('lineage', 'not a lineage id (1 to 128 of A-Z a-z 0-9 . _ -)');
  }
  const bodyCrc32 =
    options.bodyCrc32 === undefined ? body.crc32() : checkU32('bodyCrc32', options.bodyCrc32);
  const level = options.level ?? SEGMENT_OBJECT_DEFAULT_ZSTD_LEVEL;
  if (!Number.isInteger(level)) throw new SegmentObjectError('level', 'not an integer');
  const recipients = checkRecipients(options.recipients ?? [], fields.codec);
  return {
    recipients,
    codec,
    kind,
    generation,
    start,
    end,
    commits,
    previous,
    bodyCrc32,
    level,
    lineage: fields.lineage,
    bodyLength: body.length,
    chainEnd,
  };
}

function checkRecipients(
  recipients: readonly AgeRecipient[],
  codec: ObjectCodec,
): readonly AgeRecipient[] {
  if (recipients.length === 0) return [];
  if (codec !== 'zstd')
    throw new SegmentObjectError('encryption', 'an encrypted body needs the zstd codec');
  if (recipients.length > MAX_OBJECT_RECIPIENTS)
    throw new SegmentObjectError(
      'recipients',
      `${recipients.length} recipients; at most ${MAX_OBJECT_RECIPIENTS}`,
    );
  for (const recipient of recipients) {
    if (!(recipient?.publicKey instanceof Uint8Array) || recipient.publicKey.length !== 32)
      throw new SegmentObjectError('recipients', 'not an age X25519 recipient (parseRecipient)');
  }
  return recipients;
}

/** zstd's options for a plan's body: its level, and the decoded size stated in the frame. */
export function zstdOptions(plan: SegmentObjectPlan): ZstdOptions {
  return {
    params: {
      [constants.ZSTD_c_compressionLevel]: plan.level,
      // The frame states its decoded size, so a reader can check it
      // against the header before decompressing.
      [constants.ZSTD_c_contentSizeFlag]: 1,
      [constants.ZSTD_c_checksumFlag]: 0,
    },
    pledgedSrcSize: plan.bodyLength,
  };
}

function assembleSegmentObject(plan: SegmentObjectPlan, encoded: Uint8Array): Uint8Array {
  const header = encodeSegmentObjectHeader(plan);
  if (plan.recipients.length > 0)
    return sealObject(header, [encoded], plan.bodyCrc32, plan.recipients);
  const out = new Uint8Array(header.length + encoded.length);
  out.set(header, 0);
  out.set(encoded, header.length);
  return out;
}

/** The header bytes of a plan's envelope (its body follows them). */
export function encodeSegmentObjectHeader(plan: SegmentObjectPlan): Uint8Array {
  const lineageLength = plan.lineage.length;
  const extra = plan.chainEnd === null ? 0 : COMPACTED_FIELDS_BYTES;
  const encrypted = plan.recipients.length > 0;
  const recipientBytes = encrypted ? 1 + 32 * plan.recipients.length : 0;
  const headerBytes = 53 + lineageLength + extra + recipientBytes + 4;
  const out = new Uint8Array(headerBytes);
  const view = new DataView(out.buffer, out.byteOffset, out.byteLength);
  out.set(SEGMENT_OBJECT_MAGIC, 0);
  view.setUint16(4, headerBytes, true);
  out[6] = SEGMENT_OBJECT_VERSION;
  out[7] = plan.codec;
  out[8] = encrypted ? 1 : 0;
  out[9] = plan.kind;
  view.setUint16(10, 0, true);
  view.setBigUint64(12, BigInt(plan.generation), true);
  view.setBigUint64(20, BigInt(plan.start), true);
  view.setBigUint64(28, BigInt(plan.end), true);
  view.setBigUint64(36, BigInt(plan.commits), true);
  view.setUint32(44, plan.previous, true);
  // An encrypted object's decoded CRC-32 travels in its binding: in clear it would
  // let anyone check a guess of the content.
  view.setUint32(48, encrypted ? 0 : plan.bodyCrc32, true);
  out[52] = lineageLength;
  for (let i = 0; i < lineageLength; i++) out[53 + i] = plan.lineage.charCodeAt(i);
  if (plan.chainEnd !== null) {
    view.setBigUint64(53 + lineageLength, BigInt(plan.bodyLength), true);
    view.setUint32(61 + lineageLength, plan.chainEnd, true);
  }
  if (encrypted) {
    const at = 53 + lineageLength + extra;
    out[at] = plan.recipients.length;
    plan.recipients.forEach((recipient, index) => {
      out.set(recipient.publicKey, at + 1 + 32 * index);
    });
  }
  view.setUint32(headerBytes - 4, crc32(out.subarray(0, headerBytes - 4)), true);
  return out;
}

function readU53(view: DataView, offset: number, field: string): number {
  const value = view.getBigUint64(offset, true);
  if (value > BigInt(Number.MAX_SAFE_INTEGER)) {
    throw new SegmentObjectError(field, 'greater than 2^53-1');
  }
  return Number(value);
}

/**
 * The fields that encode an object with `header`'s values again: all but
 * what encoding computes (version, body CRC, header length; the decoded
 * length of a fine segment or snapshot). For a tool or a test that rewrites
 * an object's body or one of its fields and keeps the rest.
 */
export function segmentObjectFieldsOf(header: SegmentObjectHeader): SegmentObjectFields {
  const fields: SegmentObjectFields = {
    codec: header.codec,
    kind: header.kind,
    generation: header.generation,
    start: header.start,
    end: header.end,
    commits: header.commits,
    previousCrc32: header.previousCrc32,
    lineage: header.lineage,
  };
  return header.chainEndCrc32 === null
    ? fields
    : { ...fields, decodedLength: header.decodedLength, chainEndCrc32: header.chainEndCrc32 };
}

/**
 * The header of an envelope, checked: magic, header length, header CRC,
 * version, codec, encryption, kind, lineage and the field ranges. Needs only
 * the first `headerBytes` bytes (at most {@link SEGMENT_OBJECT_MAX_HEADER_BYTES});
 * the body is not looked at. Throws {@link SegmentObjectError}.
 */
export function readSegmentObjectHeader(bytes: Uint8Array): SegmentObjectHeader {
  if (!(bytes instanceof Uint8Array)) throw new SegmentObjectError('bytes', 'not a Uint8Array');
  if (bytes.length < 6) {
    throw new SegmentObjectError('magic', `object is ${bytes.length} bytes, shorter than a header`);
  }
  for (let i = 0; i < 4; i++) {
    if (bytes[i] !== SEGMENT_OBJECT_MAGIC[i]) {
      throw new SegmentObjectError('magic', 'not BKO1 (not an envelope, or a corrupt one)');
    }
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const headerBytes = view.getUint16(4, true);
  if (
    headerBytes < SEGMENT_OBJECT_MIN_HEADER_BYTES ||
    headerBytes > SEGMENT_OBJECT_MAX_HEADER_BYTES
  ) {
    throw new SegmentObjectError(
      'headerBytes',
      `${headerBytes} is outside ${SEGMENT_OBJECT_MIN_HEADER_BYTES}..${SEGMENT_OBJECT_MAX_HEADER_BYTES}`,
    );
  }
  if (bytes.length < headerBytes) {
    throw new SegmentObjectError(
      'headerBytes',
      `header claims ${headerBytes} bytes but only ${bytes.length} are present`,
    );
  }
  // The CRC first: a flipped bit anywhere in the header is reported as such,
  // not as whatever field it happened to land in.
  const storedHeaderCrc = view.getUint32(headerBytes - 4, true);
  const actualHeaderCrc = crc32(bytes.subarray(0, headerBytes - 4));
  if (storedHeaderCrc !== actualHeaderCrc) {
    throw new SegmentObjectError(
      'headerCrc32',
      `header CRC-32 ${storedHeaderCrc.toString(16).padStart(8, '0')} does not match its bytes (${actualHeaderCrc.toString(16).padStart(8, '0')})`,
    );
  }
  const version = bytes[6]!;
  if (version !== SEGMENT_OBJECT_VERSION) {
    throw new SegmentObjectError('version', `unknown envelope version ${version}`);
  }
  const codec = CODEC_NAMES[bytes[7]!];
  if (codec === undefined) throw new SegmentObjectError('codec', `unknown codec ${bytes[7]}`);
  const encryption = ENCRYPTION_NAMES[bytes[8]!];
  if (encryption === undefined) {
    throw new SegmentObjectError(
      'encryption',
      `unknown encryption ${bytes[8]} (this reader knows 0, none, and 1, age-x25519)`,
    );
  }
  if (encryption !== 'none' && codec !== 'zstd')
    throw new SegmentObjectError('encryption', 'an encrypted body needs the zstd codec');
  const kind = KIND_NAMES[bytes[9]!];
  if (kind === undefined) throw new SegmentObjectError('kind', `unknown kind ${bytes[9]}`);
  const generation = readU53(view, 12, 'generation');
  const start = readU53(view, 20, 'start');
  const end = readU53(view, 28, 'end');
  const commits = readU53(view, 36, 'commits');
  const previousCrc32 = view.getUint32(44, true);
  const bodyCrc32 = view.getUint32(48, true);
  checkRanges(kind, start, end, previousCrc32, commits);
  const lineageLength = bytes[52]!;
  const extra = kind === 'compacted' ? COMPACTED_FIELDS_BYTES : 0;
  if (lineageLength < 1 || lineageLength > 128 || 53 + lineageLength + 4 > headerBytes) {
    throw new SegmentObjectError(
      'lineage',
      `length ${lineageLength} is outside 1..128 or does not fit the header`,
    );
  }
  if (53 + lineageLength + extra + 4 > headerBytes) {
    throw new SegmentObjectError(
      'headerBytes',
      `${headerBytes} leaves no room for a compacted object's decoded length and chain end`,
    );
  }
  let lineage = '';
  for (let i = 0; i < lineageLength; i++) lineage += String.fromCharCode(bytes[53 + i]!);
  if (!LINEAGE_PATTERN.test(lineage)) {
    throw new SegmentObjectError('lineage', 'not a lineage id (1 to 128 of A-Z a-z 0-9 . _ -)');
  }
  let decodedLength = end - start;
  let chainEndCrc32: number | null = null;
  if (kind === 'compacted') {
    decodedLength = readU53(view, 53 + lineageLength, 'decodedLength');
    chainEndCrc32 = view.getUint32(61 + lineageLength, true);
  }
  const recipients =
    encryption === 'none' ? [] : readRecipients(bytes, 53 + lineageLength + extra, headerBytes);
  return {
    encryption,
    recipients,
    version: 1,
    codec,
    kind,
    generation,
    start,
    end,
    commits,
    previousCrc32,
    bodyCrc32,
    lineage,
    headerBytes,
    decodedLength,
    chainEndCrc32,
  };
}

const ENCRYPTION_NAMES: Record<number, ObjectEncryption> = { 0: 'none', 1: 'age-x25519' };

function readRecipients(bytes: Uint8Array, at: number, headerBytes: number): AgeRecipient[] {
  const count = bytes[at]!;
  if (count < 1 || count > MAX_OBJECT_RECIPIENTS || at + 1 + 32 * count + 4 > headerBytes)
    throw new SegmentObjectError(
      'recipients',
      `${count} recipients: outside 1..${MAX_OBJECT_RECIPIENTS} or more than the header holds`,
    );
  const recipients: AgeRecipient[] = [];
  for (let index = 0; index < count; index++) {
    const start = at + 1 + 32 * index;
    recipients.push(recipientFromPublicKey(bytes.subarray(start, start + 32)));
  }
  return recipients;
}

/**
 * An encrypted body opened: its zstd bytes and the decoded CRC-32 its binding
 * states. Throws {@link SegmentObjectKeyError} when no identity is a
 * recipient, {@link SegmentObjectError} (`body`) when it does not open or its
 * binding is not this header's.
 */
function openEncrypted(
  header: SegmentObjectHeader,
  bytes: Uint8Array,
  identities: readonly AgeIdentity[],
): { encoded: Uint8Array; bodyCrc32: number } {
  checkIdentities(header.recipients, identities);
  let opened: ReturnType<typeof openBody>;
  try {
    opened = openBody(bytes.subarray(header.headerBytes), identities);
  } catch (error) {
    throw new SegmentObjectError('body', openProblem(error), { cause: error });
  }
  const bound = readBinding(bytes.subarray(0, header.headerBytes), opened.binding);
  if ('problem' in bound) throw new SegmentObjectError('body', bound.problem);
  return { encoded: opened.encoded, bodyCrc32: bound.bodyCrc32 };
}

/**
 * The header and decoded body of a whole envelope, after every check: the
 * header's (see {@link readSegmentObjectHeader}), the body decodes, its
 * decoded length is the header's (`end − start`, or a compacted object's
 * `decodedLength`) and its CRC-32 is the header's. Throws
 * {@link SegmentObjectError} naming the field otherwise (`body` for a body
 * that does not decode, `end` or `decodedLength` for a wrong decoded
 * length, `bodyCrc32`).
 */
export function decodeSegmentObject(
  bytes: Uint8Array,
  options: SegmentObjectDecodeOptions = {},
): {
  header: SegmentObjectHeader;
  body: Uint8Array;
} {
  const header = readSegmentObjectHeader(bytes);
  let stored = bytes.subarray(header.headerBytes);
  let bodyCrc32 = header.bodyCrc32;
  if (header.encryption !== 'none') {
    const opened = openEncrypted(header, bytes, options.identities ?? []);
    stored = opened.encoded;
    bodyCrc32 = opened.bodyCrc32;
  }
  const expected = header.decodedLength;
  const lengthField = header.kind === 'compacted' ? 'decodedLength' : 'end';
  const lengthName = header.kind === 'compacted' ? 'decodedLength' : 'end − start';
  let body: Uint8Array;
  if (header.codec === 'identity') {
    body = stored;
  } else {
    try {
      // One byte more than expected: an output that reaches it is too long,
      // and nothing beyond it is ever allocated.
      const decoded = zstdDecompressSync(stored, { maxOutputLength: expected + 1 });
      body = new Uint8Array(decoded.buffer, decoded.byteOffset, decoded.byteLength);
    } catch (error) {
      if ((error as { code?: unknown }).code === 'ERR_BUFFER_TOO_LARGE') {
        throw new SegmentObjectError(
          lengthField,
          `body decodes to more than ${lengthName} (${expected}) bytes`,
          {
            cause: error,
          },
        );
      }
      throw new SegmentObjectError(
        'body',
        `does not decode as ${header.codec}: ${(error as Error).message}`,
        {
          cause: error,
        },
      );
    }
  }
  if (body.length !== expected) {
    throw new SegmentObjectError(
      lengthField,
      `body decodes to ${body.length > expected ? 'more than' : body.length} bytes, not ${lengthName} (${expected})`,
    );
  }
  const actual = crc32(body);
  if (actual !== bodyCrc32) {
    throw new SegmentObjectError(
      'bodyCrc32',
      `decoded body CRC-32 ${actual.toString(16).padStart(8, '0')} is not the header's (${bodyCrc32.toString(16).padStart(8, '0')})`,
    );
  }
  return { header, body };
}
