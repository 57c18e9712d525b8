/**
 * Reads a file stored in the envelope — a `.snap` snapshot (kind snapshot),
 * or an encrypted backup's `.bko` archive, chain or side file (kind file) —
 * for restore and verify in bounded memory, since one can be GiBs: the
 * stored bytes stream through {@link downloadVerified} (size, CRC-32) and
 * `decodeSegmentObjectStream` (header CRC, decoded length and CRC-32); the
 * header is checked against key and entry before the first decoded byte is
 * handed on. Decoded chunks reach the sink BEFORE the end checks: use what
 * was staged only once this resolved. A failure on either side ends the
 * other, so neither waits. An encrypted object is opened with the age
 * identities given, once its header passed (the generation's encryption
 * included).
 * Memory: the decoder's read-ahead (at most 16 stored chunks), zstd's buffers.
 */
import { type FileEntry, parseArchiveKey, parseSideKey, parseSnapshotKey } from '@x/manifest';
import type { ObjectStore } from '@x/store';
import {
  decodeSegmentObjectStream,
  readSegmentObjectHeader,
  SEGMENT_OBJECT_MAX_HEADER_BYTES,
  SegmentObjectError,
  type SegmentObjectHeader,
  SegmentObjectKeyError,
  type SegmentObjectKind,
  type SegmentObjectStream,
} from '@x/wal-segment';
import {
  checkSameEncryption,
  encryptionOfHeader,
  type GenerationEncryption,
  type ObjectOpenOptions,
} from './generation-encryption.ts';
import { keyErrorOf } from './object-keys.ts';
import { ObjectEncodingError } from './restore-errors.ts';
import { headerMismatch } from './segment-object-read.ts';
import { downloadVerified, type VerifiedDownloadOptions } from './verified-download.ts';

/** True when `key` is a snapshot stored in the envelope (`.snap`), which must be decoded. */
export function isSnapshotObject(prefix: string, key: string): boolean {
  return parseSnapshotKey(prefix, key)?.layout === 'object';
}

/** What the header of a file object must state, from its key. */
interface FileObjectExpectation {
  readonly kind: SegmentObjectKind;
  /** A snapshot's or archive's key generation; 0 for a side or chain file, which has none. */
  readonly generation: number;
}

function expectationOf(prefix: string, key: string): FileObjectExpectation | undefined {
  const snapshot = parseSnapshotKey(prefix, key);
  if (snapshot?.layout === 'object') return { kind: 'snapshot', generation: snapshot.generation };
  const archive = parseArchiveKey(prefix, key);
  if (archive?.layout === 'object') return { kind: 'file', generation: archive.generation };
  if (parseSideKey(prefix, key)?.layout === 'object') return { kind: 'file', generation: 0 };
  return undefined;
}

/**
 * True when `key` is a file of a restore point stored in the envelope
 * (`.snap`, or an archive or side file's `.bko`), which must be decoded.
 */
export function isFileObject(prefix: string, key: string): boolean {
  return expectationOf(prefix, key) !== undefined;
}

/** The decoder stopped reading (it failed, or its input is not wanted any more). */
class DecoderStopped extends Error {
  constructor() {
    super('the snapshot decoder stopped reading');
    this.name = 'DecoderStopped';
  }
}

/**
 * A one-chunk hand-over from the download's sink to the decoder's input,
 * with backpressure: {@link push} resolves once the decoder took the chunk.
 * The decoder's side never throws: when the download ends, well or not, its
 * input ends (an error thrown into the decoder's stream pipeline would be an
 * unhandled stream error, and its zstd side would wait for input forever).
 */
class HandOver implements AsyncIterable<Uint8Array> {
  #chunk: { bytes: Uint8Array; taken: () => void; refused: (error: Error) => void } | undefined;
  #reader: ((result: IteratorResult<Uint8Array>) => void) | undefined;
  #ended = false;
  /** `refuse`: pushes reject (the decoder failed); `discard`: pushes are dropped (it is done). */
  #stopped: 'refuse' | 'discard' | undefined;

  push(bytes: Uint8Array): Promise<void> {
    if (this.#stopped === 'refuse') return Promise.reject(new DecoderStopped());
    if (this.#stopped === 'discard' || this.#ended) return Promise.resolve();
    return new Promise<void>((taken, refused) => {
      const reader = this.#reader;
      if (reader !== undefined) {
        this.#reader = undefined;
        reader({ done: false, value: bytes });
        taken();
      } else this.#chunk = { bytes, taken, refused };
    });
  }

  /** The download ended (resolved or rejected): the decoder's input ends. */
  end(): void {
    this.#ended = true;
    const reader = this.#reader;
    this.#reader = undefined;
    reader?.({ done: true, value: undefined });
  }

  /** The decoder will read no more: pending and later pushes reject (`refuse`) or are dropped (`discard`). */
  stop(how: 'refuse' | 'discard'): void {
    this.#stopped = how;
    const chunk = this.#chunk;
    this.#chunk = undefined;
    if (chunk !== undefined) {
      if (how === 'refuse') chunk.refused(new DecoderStopped());
      else chunk.taken();
    }
    this.end();
  }

  [Symbol.asyncIterator](): AsyncIterator<Uint8Array> {
    return {
      next: (): Promise<IteratorResult<Uint8Array>> => {
        const chunk = this.#chunk;
        if (chunk !== undefined) {
          this.#chunk = undefined;
          chunk.taken();
          return Promise.resolve({ done: false, value: chunk.bytes });
        }
        if (this.#ended) return Promise.resolve({ done: true, value: undefined });
        return new Promise((resolve) => {
          this.#reader = resolve;
        });
      },
      return: (): Promise<IteratorResult<Uint8Array>> => {
        this.stop('discard');
        return Promise.resolve({ done: true, value: undefined });
      },
    };
  }
}

/** `stored`, its first header's worth of bytes kept in `head` as they pass. */
function keepingHead(stored: AsyncIterable<Uint8Array>): {
  stream: AsyncIterable<Uint8Array>;
  head: () => Uint8Array;
} {
  const kept: Uint8Array[] = [];
  let keptBytes = 0;
  async function* stream(): AsyncGenerator<Uint8Array> {
    for await (const chunk of stored) {
      if (keptBytes < SEGMENT_OBJECT_MAX_HEADER_BYTES) {
        const part = chunk.slice(0, SEGMENT_OBJECT_MAX_HEADER_BYTES - keptBytes);
        kept.push(part);
        keptBytes += part.byteLength;
      }
      yield chunk;
    }
  }
  return { stream: stream(), head: () => new Uint8Array(Buffer.concat(kept)) };
}

/**
 * The decoder of a file object's bytes, its header checked by `check` before
 * the body is opened: also when no identity opens it, so a header that is
 * wrong is reported as such rather than as a missing key.
 */
async function openFileObject(
  key: string,
  stored: AsyncIterable<Uint8Array>,
  identities: NonNullable<ObjectOpenOptions['identities']>,
  check: (header: SegmentObjectHeader) => void,
): Promise<SegmentObjectStream> {
  const kept = keepingHead(stored);
  let opened: SegmentObjectStream;
  try {
    opened = await decodeSegmentObjectStream(kept.stream, { identities });
  } catch (error) {
    if (!SegmentObjectKeyError.isInstance(error)) throw error;
    check(readSegmentObjectHeader(kept.head()));
    throw keyErrorOf(key, error, identities);
  }
  check(opened.header);
  return opened;
}

/**
 * {@link downloadFileObject} for a `.snap` snapshot only.
 * @throws ObjectEncodingError (`key`) for any other key; as {@link downloadFileObject}.
 */
export async function downloadSnapshotObject(
  store: ObjectStore,
  prefix: string,
  entry: FileEntry,
  sink: (chunk: Uint8Array) => void | Promise<void>,
  options: VerifiedDownloadOptions & ObjectOpenOptions,
): Promise<GenerationEncryption> {
  if (!isSnapshotObject(prefix, entry.key))
    throw new ObjectEncodingError(entry.key, 'key', 'not a .snap snapshot key of this prefix');
  return downloadFileObject(store, prefix, entry, sink, options);
}

/**
 * Downloads the file object of `entry` (see {@link isFileObject}), checks
 * it stored and decoded, and hands the decoded bytes to `sink` in order
 * (calls never overlap; the next decoded chunk is pulled once the sink's
 * promise settled).
 * `options.onBytes` counts stored bytes, as for any other object.
 * Resolves to what its header states about its encryption.
 * @throws ObjectEncodingError — the envelope is invalid, does not decode to
 *   what its header says, or its header disagrees with the key, entry or
 *   `options.encryption`.
 * @throws ObjectKeyError — none of `options.identities` opens it (the rest
 *   of the object is not read).
 * @throws ObjectCorruptError, ObjectMissingError — as {@link downloadVerified}.
 * Also rejects with the sink's own error, a store error or the abort reason: the first failure.
 */
export async function downloadFileObject(
  store: ObjectStore,
  prefix: string,
  entry: FileEntry,
  sink: (chunk: Uint8Array) => void | Promise<void>,
  options: VerifiedDownloadOptions & ObjectOpenOptions,
): Promise<GenerationEncryption> {
  const expected = expectationOf(prefix, entry.key);
  if (expected === undefined) {
    throw new ObjectEncodingError(
      entry.key,
      'key',
      'not a .snap snapshot or .bko archive or side-file key of this prefix',
    );
  }
  options.signal?.throwIfAborted();
  const stop = new AbortController();
  const signal =
    options.signal === undefined ? stop.signal : AbortSignal.any([options.signal, stop.signal]);
  const handOver = new HandOver();
  // The first failure of either side is the one reported: the other side's
  // failure is its consequence (an aborted download, a truncated input).
  let first: { error: unknown } | undefined;
  const fail = (error: unknown): void => {
    first ??= { error };
  };

  const downloading = downloadVerified(store, entry, (chunk) => handOver.push(chunk), {
    ...options,
    signal,
  }).then(
    () => handOver.end(),
    (error: unknown) => {
      fail(error);
      handOver.end();
    },
  );

  const mismatch = headerMismatch(entry.key);
  let encryption: GenerationEncryption | undefined;
  const check = (header: SegmentObjectHeader): void => {
    if (header.kind !== expected.kind) mismatch('kind', header.kind, expected.kind, 'key');
    if (header.generation !== expected.generation)
      mismatch('generation', header.generation, expected.generation, 'key');
    if (header.commits !== entry.frames)
      mismatch('commits', header.commits, entry.frames, 'manifest entry');
    if (header.lineage !== entry.lineage)
      mismatch('lineage', header.lineage, entry.lineage, 'manifest entry');
    encryption = encryptionOfHeader(entry.key, header);
    checkSameEncryption(encryption, options.encryption);
  };

  try {
    const { body } = await openFileObject(entry.key, handOver, options.identities ?? [], check);
    for await (const chunk of body) {
      // The download failed: its input was cut short, nothing more is handed on.
      if (first !== undefined) break;
      await sink(chunk);
    }
    // The decoder read all it wanted; any rest of the object is still read
    // and checked (size, CRC-32) by the download.
    handOver.stop('discard');
  } catch (error) {
    fail(
      SegmentObjectError.isInstance(error)
        ? new ObjectEncodingError(entry.key, error.field, error.problem, { cause: error })
        : error,
    );
    handOver.stop('refuse');
    stop.abort(first!.error);
  }
  await downloading;
  if (first !== undefined) throw first.error;
  return encryption!;
}
