/**
 * The worker's request layer. Every request runs under an operation deadline
 * and the shutdown signal; one that changes the bucket also under the lease's
 * fence (it starts only while writes are allowed, else `WRITE_FENCED`, and
 * is aborted when they stop, rejecting with the abort's `BackupError` or a
 * `WRITE_FENCED` one). Immutable objects are create-if-absent (an existing one
 * is accepted with the same CRC only; unconditional without the store's mode
 * or with `conditional: false`): a request the store already received still
 * completes after the fence falls.
 */
import type { AgeRecipient } from '@x/age-envelope';
import type { FrameCounting, OpenedFile } from '@x/engine';
import type { Clock } from '@x/lease';
import { Crc32, crc32Hex, type FileEntry } from '@x/manifest';
import {
  AlreadyExistsError,
  ConflictError,
  type DeleteFailure,
  deleteKeys,
  getCapped,
  isTooLarge,
  NotImplementedError,
  type ObjectStore,
  type ObjectVersion,
} from '@x/store';
import { encodeSegmentObjectInMemory, encodeSegmentObjectStream } from '@x/wal-segment';
import { BackupError, messageOf } from './errors.ts';
import type { WorkerCallbacks } from './worker-callbacks.ts';
import type { WorkerHooks } from './worker-options.ts';

/**
 * Largest compressed snapshot envelope `putFile` builds in memory from one
 * read (see there); a larger one is read twice and streamed.
 */
export const IN_MEMORY_ENVELOPE_BYTES = 64 * 1024 * 1024;

/** Keys per batch delete: one S3 `DeleteObjects` request holds at most this many. */
const DELETE_CHUNK = 1000;

async function* chunksOf(chunks: readonly Uint8Array[]): AsyncIterable<Uint8Array> {
  yield* chunks;
}

/** A deadline on the injected clock; cancel it when the request ends. */
export interface Deadline {
  readonly signal: AbortSignal;
  cancel(): void;
  /** The abort reason once it fired, else `undefined`. */
  reason(): unknown;
  /** Starts the deadline again (progress was made). */
  rearm(): void;
}

export interface RequestsOptions {
  readonly store: ObjectStore;
  readonly clock: Clock;
  readonly operationTimeoutMs: number;
  /** `false`: every write is unconditional (best-effort exclusion). */
  readonly conditional: boolean;
  readonly partSize?: number | undefined;
  readonly hooks?: WorkerHooks | undefined;
  readonly callbacks: Pick<WorkerCallbacks, 'runSignal' | 'writeFence' | 'conflict'>;
}

export class Requests {
  readonly #options: RequestsOptions;

  constructor(options: RequestsOptions) {
    this.#options = options;
  }

  /**
   * The same requests, also aborted by `signal`: for work off the step (a
   * compaction) that a stop must end at once rather than wait out its
   * request's deadline.
   */
  alsoAbortedBy(signal: AbortSignal): Requests {
    const { callbacks } = this.#options;
    return new Requests({
      ...this.#options,
      callbacks: {
        ...callbacks,
        runSignal: () => AbortSignal.any([callbacks.runSignal(), signal]),
      },
    });
  }

  /**
   * A deadline on the injected clock: its signal aborts with an
   * `OPERATION_TIMEOUT` `BackupError` after `ms` (default: the operation deadline).
   */
  deadline(operation: string, ms: number = this.#options.operationTimeoutMs): Deadline {
    const clock = this.#options.clock;
    const controller = new AbortController();
    let cancelTimer = clock.setTimer(ms, () =>
      controller.abort(BackupError.timeout(operation, ms)),
    );
    return {
      signal: controller.signal,
      cancel: () => cancelTimer(),
      reason: () => (controller.signal.aborted ? controller.signal.reason : undefined),
      rearm: () => {
        if (controller.signal.aborted) return;
        cancelTimer();
        cancelTimer = clock.setTimer(ms, () =>
          controller.abort(BackupError.timeout(operation, ms)),
        );
      },
    };
  }

  /** The signals a request that changes the bucket runs under. */
  writeSignals(deadline: AbortSignal): AbortSignal {
    const signals = [deadline, this.#options.callbacks.runSignal()];
    const fence = this.#options.callbacks.writeFence();
    if (fence !== null) signals.push(fence);
    return AbortSignal.any(signals);
  }

  /** Runs `request` under the operation deadline (and, for writes, the fence); rethrows an abort as its reason. */
  async request<T>(
    operation: string,
    write: boolean,
    request: (signal: AbortSignal, rearm: () => void) => Promise<T>,
  ): Promise<T> {
    const deadline = this.deadline(operation);
    try {
      const signal = write
        ? this.writeSignals(deadline.signal)
        : AbortSignal.any([deadline.signal, this.#options.callbacks.runSignal()]);
      try {
        return await request(signal, deadline.rearm);
      } catch (error) {
        this.#abortReason(operation, signal, error);
      }
    } finally {
      deadline.cancel();
    }
  }

  /** A PUT with `mode`; the conditional modes fall back to overwrite where the store cannot do them or conditional writes are off. */
  async putConditional(
    key: string,
    body: Uint8Array,
    mode: 'create' | { ifMatch: ObjectVersion },
  ): Promise<ObjectVersion> {
    const { store, conditional, hooks } = this.#options;
    const effective = conditional ? mode : 'overwrite';
    hooks?.beforeWrite?.();
    try {
      return (
        await this.request(`PUT ${key}`, true, (signal) =>
          store.put(key, body, { mode: effective, signal }),
        )
      ).version;
    } catch (error) {
      if (!NotImplementedError.isInstance(error)) throw error;
      hooks?.beforeWrite?.();
      return (
        await this.request(`PUT ${key}`, true, (signal) =>
          store.put(key, body, { mode: 'overwrite', signal }),
        )
      ).version;
    }
  }

  /**
   * An immutable object, create-if-absent; one already there is accepted
   * with the same CRC, or when `sameContent` says it holds what `body`
   * does (a sealed object is new bytes at every encoding, so a retried PUT
   * whose first answer was lost finds other bytes of the same content).
   * Returns the bytes the bucket holds under `key`.
   */
  async putImmutable(
    key: string,
    body: Uint8Array,
    crc32: string,
    sameContent?: (existing: Uint8Array) => boolean,
  ): Promise<Uint8Array> {
    try {
      await this.putConditional(key, body, 'create');
      return body;
    } catch (error) {
      if (!AlreadyExistsError.isInstance(error) && !ConflictError.isInstance(error)) throw error;
      const existing = await this.get(key);
      if (existing !== null && crc32Hex(existing.body) === crc32) return existing.body;
      if (existing !== null && sameContent?.(existing.body) === true) return existing.body;
      throw this.#options.callbacks.conflict(
        `${key} already exists with other content`,
        key,
        error,
      );
    }
  }

  /**
   * Uploads `file` create-if-absent under `key` (a key with a generation
   * this worker allocated, so one already there is another writer's: checked
   * absent first, created conditionally at completion where the store can)
   * and returns its manifest entry (size and CRC-32 of the bytes stored).
   * The deadline applies to progress: it is re-armed at every chunk.
   * `counter` counts the frames of a raw file as it streams; otherwise the
   * entry has `frames`. With `envelope`, the stored object is the file in
   * the object envelope of `@x/wal-segment` (kind `envelope.kind`, zstd;
   * sealed to `envelope.recipients` when any; `frames` is its commits),
   * built in memory up to {@link IN_MEMORY_ENVELOPE_BYTES}, else read twice
   * (docs/format.md, _Writing a snapshot_: a second read that differs fails
   * the upload before the object is complete).
   */
  async putFile(
    file: OpenedFile,
    key: string,
    counter: FrameCounting | null,
    frames: number,
    lineage: string,
    envelope?: {
      readonly kind: 'snapshot' | 'file';
      readonly generation: number;
      readonly recipients: readonly AgeRecipient[];
    },
  ): Promise<FileEntry> {
    const { store, conditional, hooks, partSize } = this.#options;
    const { conflict } = this.#options.callbacks;
    if (
      (await this.request(`HEAD ${key}`, false, (signal) => store.head(key, { signal }))) !== null
    )
      throw conflict(`${key} already exists`, key);
    if (envelope !== undefined && counter !== null)
      throw new BackupError(
        `${key}: an envelope states its commits before the upload, give frames`,
      );
    const fields = (length: number) => ({
      codec: 'zstd' as const,
      kind: envelope?.kind ?? 'snapshot',
      generation: envelope?.generation ?? 0,
      start: 0,
      end: length,
      commits: frames,
      previousCrc32: 0,
      lineage,
    });
    const buffered =
      envelope === undefined
        ? null
        : await encodeSegmentObjectInMemory(
            file.read({ signal: this.#options.callbacks.runSignal() }),
            file.size,
            fields(file.size),
            { maxStoredBytes: IN_MEMORY_ENVELOPE_BYTES, recipients: envelope.recipients },
          );
    // The source keeps the file readable until the step ends (its afterStep):
    // letting it go here would make a retry of an abandoned upload (a
    // shutdown's flush) find no snapshot, start a new generation and defer.
    hooks?.beforeWrite?.();
    const crc = new Crc32();
    let size = 0;
    const mode = conditional && store.capabilities.multipartCreate ? 'create' : 'overwrite';
    try {
      await this.request(`upload ${key}`, true, (signal, rearm) => {
        const stored = (): AsyncIterable<Uint8Array> =>
          buffered === null
            ? file.read({ signal })
            : buffered.stored !== null
              ? chunksOf(buffered.stored)
              : encodeSegmentObjectStream(
                  { length: buffered.length, crc32: buffered.crc32, read: file.read({ signal }) },
                  fields(buffered.length),
                  { recipients: envelope?.recipients ?? [] },
                );
        async function* body(): AsyncIterable<Uint8Array> {
          for await (const chunk of stored()) {
            crc.update(chunk);
            counter?.push(chunk);
            size += chunk.byteLength;
            rearm();
            yield chunk;
          }
        }
        return store.upload(key, body(), {
          mode,
          signal,
          ...(partSize === undefined ? {} : { partSize }),
        });
      });
    } catch (error) {
      if (AlreadyExistsError.isInstance(error) || ConflictError.isInstance(error))
        throw conflict(`${key} appeared during the upload`, key, error);
      throw error;
    }
    return {
      name: file.name,
      key,
      size,
      crc32: crc.hex(),
      frames: counter ? counter.frames : frames,
      lineage,
    };
  }

  async get(key: string): Promise<{ body: Uint8Array; version: ObjectVersion } | null> {
    return this.request(`GET ${key}`, false, (signal) => this.#options.store.get(key, { signal }));
  }

  /**
   * Reads an object of the bucket that this worker does not trust to be
   * small (LATEST, manifests): at most `limit` bytes are read; `'too-large'`
   * past that.
   */
  async getCapped(
    key: string,
    limit: number,
  ): Promise<{ body: Uint8Array; version: ObjectVersion } | null | 'too-large'> {
    const found = await this.request(`GET ${key}`, false, (signal) =>
      getCapped(this.#options.store, key, limit, { signal }),
    );
    return found !== null && isTooLarge(found) ? 'too-large' : found;
  }

  /**
   * A streamed GET; `missing` makes the error for no object. The operation deadline is re-armed
   * at every chunk, so a body that stalls times out and a long one does not;
   * the run's signal aborts it. Iterate it once, to the end or not at all.
   */
  async *getStream(key: string, missing: () => Error): AsyncGenerator<Uint8Array, void> {
    const operation = `GET ${key}`;
    const deadline = this.deadline(operation);
    const signal = AbortSignal.any([deadline.signal, this.#options.callbacks.runSignal()]);
    try {
      const found = await this.#options.store.getStream(key, { signal });
      if (found === null) throw missing();
      for await (const chunk of found.body) {
        deadline.rearm();
        yield chunk;
      }
    } catch (error) {
      this.#abortReason(operation, signal, error);
    } finally {
      deadline.cancel();
    }
  }

  /** Rethrows `error`, or the abort's reason when `signal` aborted (as `request` does). */
  #abortReason(operation: string, signal: AbortSignal, error: unknown): never {
    if (!signal.aborted) throw error;
    const reason: unknown = signal.reason;
    if (BackupError.isInstance(reason)) throw reason;
    throw new BackupError(`${operation} was aborted: ${messageOf(reason)}`, {
      code: 'WRITE_FENCED',
      cause: error,
    });
  }

  /**
   * Deletes `keys` in as few requests as the store allows, `DELETE_CHUNK`
   * keys per request under one deadline each. Every key is tried; the keys
   * that could not be deleted come back with their errors, in key order.
   */
  async deleteMany(keys: readonly string[]): Promise<DeleteFailure[]> {
    const failed: DeleteFailure[] = [];
    for (let start = 0; start < keys.length; start += DELETE_CHUNK) {
      const chunk = keys.slice(start, start + DELETE_CHUNK);
      this.#options.hooks?.beforeWrite?.();
      const result = await this.request(
        `DELETE ${chunk.length} objects from ${chunk[0]}`,
        true,
        (signal) => deleteKeys(this.#options.store, chunk, { signal }),
      );
      failed.push(...result.failed);
    }
    return failed;
  }

  async list(prefix: string, delimiter?: string) {
    this.#options.hooks?.beforeList?.(prefix);
    return this.request(`LIST ${prefix}`, false, (signal) =>
      this.#options.store.list(
        prefix,
        delimiter === undefined ? { signal } : { delimiter, signal },
      ),
    );
  }
}
