/**
 * A resumable upload in bounded memory (one chunk) that can be cancelled. The
 * SDK opens the session (authentication, precondition, metadata); the chunks
 * go to the session URI with `fetch`, which takes the caller's signal, and
 * carry no credentials (the URI authorises its upload). Nothing is visible at
 * the key until the last chunk is accepted, when the precondition is checked
 * (a 412 then). A failed or aborted upload cancels its session (best effort).
 * A failed chunk is not resent: resuming needs a status query
 * (`Content-Range: bytes *\/*`), which fake-gcs-server v1.56.1 answers by
 * finalizing a truncated object, so none is ever sent.
 */
import type { File, FileMetadata, PreconditionOptions } from '@google-cloud/storage';
import { chunksOf, type UploadSource } from '@x/store';
import { type RetryPolicy, raceAbort, withRetries } from './retry.ts';

/** GCS accepts intermediate chunks in multiples of this. */
export const RESUMABLE_CHUNK_GRANULARITY = 256 * 1024;

/** Default bytes per chunk. */
export const DEFAULT_CHUNK_SIZE = 8 * 1024 * 1024;

/** An HTTP error answer, shaped like the SDK's errors (`code`, `errors[].reason`). */
export class GcsHttpError extends Error {
  readonly code: number;
  readonly errors: { reason: string }[];

  constructor(status: number, reason: string, message: string) {
    super(message);
    this.name = 'GcsHttpError';
    this.code = status;
    this.errors = [{ reason }];
  }
}

async function errorOf(response: Response): Promise<GcsHttpError> {
  const text = await response.text().catch(() => '');
  let reason = '';
  let message = `HTTP ${response.status}`;
  try {
    const parsed = JSON.parse(text) as {
      error?: { message?: unknown; errors?: { reason?: unknown }[] };
    };
    if (typeof parsed.error?.message === 'string' && parsed.error.message !== '')
      message = parsed.error.message;
    const first = parsed.error?.errors?.[0]?.reason;
    if (typeof first === 'string') reason = first;
  } catch {
    // Not JSON (e.g. a proxy's HTML page): the status is all there is to report.
  }
  return new GcsHttpError(response.status, reason, message);
}

type ChunkAnswer =
  | { readonly done: true; readonly metadata: FileMetadata }
  | { readonly done: false; readonly committed: number };

async function sendChunk(
  uri: string,
  body: Uint8Array,
  start: number,
  total: number | undefined,
  signal: AbortSignal | undefined,
): Promise<ChunkAnswer> {
  const range =
    body.byteLength === 0
      ? `bytes */${total}`
      : `bytes ${start}-${start + body.byteLength - 1}/${total ?? '*'}`;
  const response = await fetch(uri, {
    method: 'PUT',
    headers: { 'Content-Range': range },
    body,
    ...(signal ? { signal } : {}),
  });
  if (response.status === 308) {
    await response.body?.cancel();
    const persisted = /bytes=0-(\d+)/.exec(response.headers.get('range') ?? '');
    return { done: false, committed: persisted ? Number(persisted[1]) + 1 : 0 };
  }
  if (response.ok) return { done: true, metadata: (await response.json()) as FileMetadata };
  throw await errorOf(response);
}

async function cancelSession(uri: string): Promise<void> {
  try {
    const response = await fetch(uri, { method: 'DELETE', signal: AbortSignal.timeout(5000) });
    await response.body?.cancel();
  } catch {
    // Best effort: an abandoned session expires on the service after a week and never becomes an object.
  }
}

export interface ResumableUploadRequest {
  readonly file: File;
  readonly source: UploadSource;
  readonly chunkSize: number;
  readonly precondition: PreconditionOptions | undefined;
  readonly customMetadata: Record<string, string>;
  readonly retry: RetryPolicy;
  readonly signal: AbortSignal | undefined;
}

/** Uploads `source`; resolves with the object's metadata and the bytes sent. */
export async function resumableUpload(
  request: ResumableUploadRequest,
): Promise<{ metadata: FileMetadata; size: number }> {
  const { file, chunkSize, signal } = request;
  // Opening a session twice is harmless (an unused session expires), so it is retried.
  const [uri] = await withRetries(request.retry, signal, () =>
    file.createResumableUpload({
      metadata: { contentType: 'application/octet-stream', metadata: request.customMetadata },
      ...(request.precondition === undefined ? {} : { preconditionOpts: request.precondition }),
    }),
  );
  try {
    return await raceAbort(sendAll(uri, request.source, chunkSize, signal), signal);
  } catch (error) {
    // Harmless on a session that already ended (a refused last chunk); needed on any other.
    await cancelSession(uri);
    throw error;
  }
}

async function sendAll(
  uri: string,
  source: UploadSource,
  chunkSize: number,
  signal: AbortSignal | undefined,
): Promise<{ metadata: FileMetadata; size: number }> {
  const buffer = Buffer.allocUnsafe(chunkSize);
  let filled = 0;
  // Bytes the service has persisted; the buffer holds the bytes from here on.
  let committed = 0;

  for await (const chunk of chunksOf(source)) {
    signal?.throwIfAborted();
    let offset = 0;
    while (offset < chunk.byteLength) {
      if (filled === chunkSize) {
        // More data follows, so a full buffer goes out as an intermediate chunk.
        const answer = await sendChunk(
          uri,
          buffer.subarray(0, filled),
          committed,
          undefined,
          signal,
        );
        if (answer.done)
          throw new GcsHttpError(
            500,
            'unexpectedCompletion',
            'the upload completed before its last chunk',
          );
        const accepted = answer.committed - committed;
        if (accepted <= 0 || accepted > filled)
          throw new GcsHttpError(
            500,
            'unexpectedRange',
            `the service persisted ${answer.committed} bytes after ${committed}`,
          );
        buffer.copyWithin(0, accepted, filled);
        filled -= accepted;
        committed = answer.committed;
      }
      const take = Math.min(chunkSize - filled, chunk.byteLength - offset);
      buffer.set(chunk.subarray(offset, offset + take), filled);
      filled += take;
      offset += take;
    }
  }
  signal?.throwIfAborted();

  const total = committed + filled;
  for (;;) {
    const answer = await sendChunk(uri, buffer.subarray(0, filled), committed, total, signal);
    if (answer.done) return { metadata: answer.metadata, size: total };
    // The service kept only part of the last chunk: send the rest.
    const accepted = answer.committed - committed;
    if (accepted <= 0 || accepted > filled)
      throw new GcsHttpError(
        500,
        'unexpectedRange',
        `the service persisted ${answer.committed} of ${total} bytes`,
      );
    buffer.copyWithin(0, accepted, filled);
    filled -= accepted;
    committed = answer.committed;
  }
}
