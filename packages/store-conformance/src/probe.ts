/**
 * `probeConditionalWrites`: whether a store honours create-if-absent,
 * replace-if-version and delete-if-version, by behaviour (`capabilities` is a
 * claim; this is the evidence). Each refusal is first checked one request at a
 * time, then create and replace race concurrent writers on one key: a store
 * that checks, then writes, passes the first and fails the second. Multipart
 * create uses a real two-part upload, since a service may honour
 * `If-None-Match` on `PutObject` but not on `CompleteMultipartUpload` (about
 * 10 MiB up, 5 MiB down). A race that happens to serialise can hide
 * non-atomicity. All it writes is deleted at the end (`cleanup` says what was
 * left). Details: package README.
 */
import {
  AlreadyExistsError,
  ConflictError,
  NotImplementedError,
  normalizePrefix,
  type ObjectStore,
  type ObjectVersion,
  PreconditionFailedError,
  sameVersion,
} from '@x/store';
import { describeError, randomSuffix, readText, sameBytes, text } from './assertions.ts';
import {
  type CleanupFailure,
  cleanUpPrefix,
  describeCleanupFailure,
  KeyRecordingStore,
} from './cleanup.ts';

export type VerdictOutcome = 'honoured' | 'ignored' | 'not-implemented' | 'error';

export interface Verdict {
  readonly outcome: VerdictOutcome;
  /** What the probe did and saw, for a person to read. */
  readonly evidence: string;
}

export interface ProbeReport {
  readonly create: Verdict;
  readonly replace: Verdict;
  readonly delete: Verdict;
  /** Present unless `multipart: false` was passed. */
  readonly multipartCreate?: Verdict;
  /** Set when deleting the probe's objects failed: {@link describeCleanupFailure} of `cleanup`. */
  readonly cleanupError?: string;
  /** Set when deleting the probe's objects failed: what was left where, and the errors. */
  readonly cleanup?: CleanupFailure;
}

/** The default part size of the probe's multipart uploads: S3's smallest part (a multiple of GCS's 256 KiB). */
export const PROBE_UPLOAD_PART_SIZE = 5 * 1024 * 1024;
/** The probe's multipart uploads are one full part and this many bytes more. */
const PROBE_UPLOAD_TAIL = 4096;

export interface ProbeOptions {
  readonly signal?: AbortSignal;
  /** Also probe `upload` in create mode, with a two-part upload (default `true`). */
  readonly multipart?: boolean;
  /**
   * `partSize` of the multipart probe's uploads, which are this many bytes
   * and a short last part (default {@link PROBE_UPLOAD_PART_SIZE}). Use the
   * store's smallest accepted part size.
   */
  readonly uploadPartSize?: number;
  /** Concurrent writers in the race checks (default 8; at least 2). */
  readonly concurrency?: number;
  /**
   * Rounds of each race check (default 4; at least 1): a precondition that is
   * not atomic lets two writers win only when their requests overlap inside
   * the service, so one round can miss it. The probe stops at the first
   * round with two winners; a race check costs at most `rounds × (concurrency
   * + 1)` requests.
   */
  readonly rounds?: number;
}

/** Raised inside a probe step to end it with a verdict. */
class VerdictReached extends Error {
  readonly verdict: Verdict;
  constructor(verdict: Verdict) {
    super(verdict.evidence);
    this.verdict = verdict;
  }
}

function ignored(evidence: string): never {
  throw new VerdictReached({ outcome: 'ignored', evidence });
}

function probeError(evidence: string): never {
  throw new VerdictReached({ outcome: 'error', evidence });
}

async function attempt(
  operation: Promise<unknown>,
): Promise<{ ok: true } | { ok: false; error: unknown }> {
  try {
    await operation;
    return { ok: true };
  } catch (error) {
    return { ok: false, error };
  }
}

/** Runs one probe step, turning NotImplementedError and unexpected errors into verdicts. */
async function judge(
  step: () => Promise<string>,
  signal: AbortSignal | undefined,
): Promise<Verdict> {
  try {
    return { outcome: 'honoured', evidence: await step() };
  } catch (error) {
    if (error instanceof VerdictReached) return error.verdict;
    // An abort of the whole probe is the caller's decision, not a verdict.
    if (signal?.aborted) throw error;
    if (NotImplementedError.isInstance(error))
      return { outcome: 'not-implemented', evidence: describeError(error) };
    return { outcome: 'error', evidence: describeError(error) };
  }
}

function madeUpVersion(like: ObjectVersion): ObjectVersion {
  return like.generation !== undefined
    ? { generation: '1700000000000001' }
    : { etag: '"0123456789abcdef0123456789abcdef"' };
}

/** Deterministic bytes for the multipart probe, different for each seed. */
function uploadBody(size: number, seed: number): Uint8Array {
  const bytes = new Uint8Array(size);
  let state = seed >>> 0 || 1;
  for (let index = 0; index < size; index++) {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    bytes[index] = state & 0xff;
  }
  return bytes;
}

/** `bytes` in 64 KiB chunks, as a streamed source. */
async function* chunked(bytes: Uint8Array): AsyncIterable<Uint8Array> {
  for (let offset = 0; offset < bytes.byteLength; offset += 64 * 1024)
    yield bytes.subarray(offset, offset + 64 * 1024);
}

export async function probeConditionalWrites(
  target: ObjectStore,
  prefix: string,
  options: ProbeOptions = {},
): Promise<ProbeReport> {
  const { signal } = options;
  // Every key written is remembered, so cleanup does not rest on the listing.
  const store = new KeyRecordingStore(target);
  const uploadPartSize = options.uploadPartSize ?? PROBE_UPLOAD_PART_SIZE;
  const concurrency = Math.max(2, options.concurrency ?? 8);
  const rounds = Math.max(1, options.rounds ?? 4);
  const base = normalizePrefix(prefix);
  const root = `${base === '' ? '' : `${base}/`}conditional-write-probe-${randomSuffix()}`;
  const call = signal ? { signal } : {};
  const keyOf = (name: string) => `${root}/${name}`;

  /** `rounds` rounds of `concurrency` concurrent writes each; exactly one of each round must win. */
  const race = async (
    name: string,
    roundWrites: (round: number) => Promise<(index: number) => Promise<unknown>>,
    refused: (error: unknown) => boolean,
  ): Promise<void> => {
    for (let round = 1; round <= rounds; round += 1) {
      const write = await roundWrites(round);
      const settled = await Promise.allSettled(
        Array.from({ length: concurrency }, (_, index) => write(index)),
      );
      const unexpected = settled.find(
        (result) => result.status === 'rejected' && !refused(result.reason),
      );
      if (unexpected) throw (unexpected as PromiseRejectedResult).reason;
      const winners = settled.filter((result) => result.status === 'fulfilled').length;
      if (winners !== 1)
        ignored(
          `honoured one request at a time but not atomically: in round ${round} of ${rounds}, ${winners} of ${concurrency} concurrent ${name} succeeded`,
        );
    }
  };

  try {
    const create = await judge(async () => {
      await store.put(keyOf('create'), text('first'), call);
      const second = await attempt(
        store.put(keyOf('create'), text('second'), { ...call, mode: 'create' }),
      );
      if (second.ok)
        ignored('a create-if-absent of an existing key succeeded and replaced its content');
      if (!AlreadyExistsError.isInstance(second.error)) throw second.error;
      if ((await readText(store, keyOf('create'), signal)) !== 'first')
        probeError('a create-if-absent was refused but the content changed anyway');
      await race(
        'creates of a fresh key',
        async (round) => (index) =>
          store.put(keyOf(`create-race-${round}`), text(`writer ${index}`), {
            ...call,
            mode: 'create',
          }),
        (error) => AlreadyExistsError.isInstance(error) || ConflictError.isInstance(error),
      );
      return `a second create of an existing key was refused with AlreadyExistsError and the content kept; in each of ${rounds} rounds exactly 1 of ${concurrency} concurrent creates of a fresh key succeeded`;
    }, signal);

    const replace = await judge(async () => {
      const first = await store.put(keyOf('replace'), text('one'), call);
      const second = await store.put(keyOf('replace'), text('two'), call);
      if (sameVersion(first.version, second.version))
        ignored(
          `two writes returned the same version ${JSON.stringify(first.version)}: a replace-if-version cannot tell them apart`,
        );
      const stale = await attempt(
        store.put(keyOf('replace'), text('stale'), { ...call, mode: { ifMatch: first.version } }),
      );
      if (stale.ok) ignored('a write with a stale version succeeded');
      if (!PreconditionFailedError.isInstance(stale.error)) throw stale.error;
      if ((await readText(store, keyOf('replace'), signal)) !== 'two')
        probeError('a stale-version write was refused but the content changed anyway');
      const missing = await attempt(
        store.put(keyOf('replace-missing'), text('x'), {
          ...call,
          mode: { ifMatch: madeUpVersion(first.version) },
        }),
      );
      if (missing.ok)
        ignored('a replace-if-version of a missing key with a made-up version succeeded');
      if (!PreconditionFailedError.isInstance(missing.error)) throw missing.error;
      const current = await attempt(
        store.put(keyOf('replace'), text('three'), { ...call, mode: { ifMatch: second.version } }),
      );
      if (!current.ok) {
        if (NotImplementedError.isInstance(current.error)) throw current.error;
        probeError(`a write with the current version was refused: ${describeError(current.error)}`);
      }
      await race(
        'replace-if-version writes against one version',
        async (round) => {
          const head = await store.head(keyOf('replace'), call);
          if (!head) probeError('the object vanished after a write with the current version');
          // Distinct bytes each round: a content-hash version must change with every win.
          return (index) =>
            store.put(keyOf('replace'), text(`round ${round} writer ${index}`), {
              ...call,
              mode: { ifMatch: head.version },
            });
        },
        (error) => PreconditionFailedError.isInstance(error) || ConflictError.isInstance(error),
      );
      return `a stale version and a made-up version on a missing key were refused with PreconditionFailedError, the current version accepted; in each of ${rounds} rounds exactly 1 of ${concurrency} concurrent writes against one version succeeded`;
    }, signal);

    const deleteVerdict = await judge(async () => {
      const first = await store.put(keyOf('delete'), text('one'), call);
      const second = await store.put(keyOf('delete'), text('two'), call);
      if (sameVersion(first.version, second.version))
        ignored(
          `two writes returned the same version ${JSON.stringify(first.version)}: a delete-if-version cannot tell them apart`,
        );
      const stale = await attempt(
        store.delete(keyOf('delete'), { ...call, ifMatch: first.version }),
      );
      const after = await store.head(keyOf('delete'), call);
      if (stale.ok) {
        if (after === null) ignored('a delete with a stale version removed the object');
        probeError('a delete with a stale version reported success but kept the object');
      }
      if (!PreconditionFailedError.isInstance(stale.error)) throw stale.error;
      if (after === null)
        probeError('a stale-version delete was refused but the object is gone anyway');
      const current = await attempt(
        store.delete(keyOf('delete'), { ...call, ifMatch: second.version }),
      );
      if (!current.ok)
        probeError(
          `a delete with the current version was refused: ${describeError(current.error)}`,
        );
      if ((await store.head(keyOf('delete'), call)) !== null)
        probeError('a delete with the current version succeeded but the object is still there');
      return 'a delete with a stale version was refused with PreconditionFailedError and kept the object; the current version deleted it';
    }, signal);

    let multipartCreate: Verdict | undefined;
    if (options.multipart !== false) {
      multipartCreate = await judge(async () => {
        const size = uploadPartSize + PROBE_UPLOAD_TAIL;
        const first = uploadBody(size, 1);
        const uploadOptions = { ...call, partSize: uploadPartSize };
        const created = await attempt(
          store.upload(keyOf('upload'), chunked(first), { ...uploadOptions, mode: 'create' }),
        );
        if (!created.ok) {
          if (NotImplementedError.isInstance(created.error)) throw created.error;
          probeError(
            `an upload in create mode (two parts) of a fresh key was refused: ${describeError(created.error)}`,
          );
        }
        const second = await attempt(
          store.upload(keyOf('upload'), chunked(uploadBody(size, 2)), {
            ...uploadOptions,
            mode: 'create',
          }),
        );
        if (second.ok)
          ignored(
            'an upload in create mode (two parts) over an existing key succeeded: the condition is not checked when a multipart upload completes',
          );
        if (!AlreadyExistsError.isInstance(second.error)) throw second.error;
        const kept = await store.get(keyOf('upload'), call);
        if (kept === null || !sameBytes(kept.body, first))
          probeError('a create upload was refused but the content changed anyway');
        return `an upload in create mode (two parts, ${size} bytes, partSize ${uploadPartSize}) of a fresh key succeeded; a second over it was refused with AlreadyExistsError and the first content kept`;
      }, signal);
    }

    const cleanup = await cleanUpPrefix(target, root, store.written(), signal);
    return {
      create,
      replace,
      delete: deleteVerdict,
      ...(multipartCreate ? { multipartCreate } : {}),
      ...(cleanup ? { cleanup, cleanupError: describeCleanupFailure(cleanup) } : {}),
    };
  } catch (error) {
    // Aborted or failed outside a step: still try to leave nothing behind,
    // without the caller's (possibly aborted) signal.
    await cleanUpPrefix(target, root, store.written()).catch(() => {
      // Best effort; the original error is what the caller needs.
    });
    throw error;
  }
}
