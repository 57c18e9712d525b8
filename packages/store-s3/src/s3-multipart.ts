/**
 * The S3 store's multipart upload, for a source larger than one part: parts
 * uploaded in order from one reused buffer, completed with
 * `If-None-Match: *` in create mode (through the conditional-write
 * recovery), and aborted on any failure so its parts stop costing storage.
 */
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { type ObjectVersion, StoreError } from '@x/store';
import { abortReasonOr, newWriteId } from '@x/store/adapter';

import { MAX_PARTS, WRITE_ID_METADATA } from './s3-options.ts';
import { conditional, type S3Context, send, versionOf } from './s3-requests.ts';

export async function multipartUpload(
  context: S3Context,
  key: string,
  fullKey: string,
  mode: 'create' | 'overwrite',
  signal: AbortSignal | undefined,
  buffer: Buffer,
  firstLength: number,
  fill: () => Promise<number>,
  atEnd: () => Promise<boolean>,
  chunks: AsyncIterator<Uint8Array>,
): Promise<{ version: ObjectVersion; size: number }> {
  const writeId = newWriteId();
  const started = await send('start-upload', key, signal, (abortSignal) =>
    context.client.send(
      new CreateMultipartUploadCommand({
        Bucket: context.bucket,
        Key: fullKey,
        ...(mode === 'create' ? { Metadata: { [WRITE_ID_METADATA]: writeId } } : {}),
      }),
      { abortSignal },
    ),
  );
  const uploadId = started.UploadId;
  if (!uploadId) {
    throw new StoreError(`s3 upload of ${key}: the service returned no upload id`, { key });
  }
  const parts: { PartNumber: number; ETag: string }[] = [];
  let size = 0;
  let completed = false;
  try {
    let length = firstLength;
    for (let partNumber = 1; ; partNumber += 1) {
      if (partNumber > MAX_PARTS) {
        throw new StoreError(
          `s3 upload of ${key}: more than ${MAX_PARTS} parts; use a larger partSize`,
          { key },
        );
      }
      const body = buffer.subarray(0, length);
      const response = await send('upload-part', key, signal, (abortSignal) =>
        context.client.send(
          new UploadPartCommand({
            Bucket: context.bucket,
            Key: fullKey,
            UploadId: uploadId,
            PartNumber: partNumber,
            Body: body,
          }),
          { abortSignal },
        ),
      );
      parts.push({
        PartNumber: partNumber,
        ETag: versionOf(response.ETag, key, 'upload-part').etag!,
      });
      size += length;
      if (await atEnd()) break;
      length = await fill();
    }

    const complete = () =>
      context.client.send(
        new CompleteMultipartUploadCommand({
          Bucket: context.bucket,
          Key: fullKey,
          UploadId: uploadId,
          MultipartUpload: { Parts: parts },
          ...(mode === 'create' ? { IfNoneMatch: '*' } : {}),
        }),
        { abortSignal: signal },
      );
    let version: ObjectVersion;
    if (mode === 'create') {
      version = await conditional(
        context,
        'complete-create',
        key,
        fullKey,
        signal,
        async () => versionOf((await complete()).ETag, key, 'complete'),
        (readBack) => (readBack?.writeId === writeId ? readBack.version : undefined),
      );
    } else {
      const response = await send('complete', key, signal, () => complete());
      version = versionOf(response.ETag, key, 'complete');
    }
    completed = true;
    return { version, size };
  } catch (error) {
    throw abortReasonOr(signal, error);
  } finally {
    if (!completed) {
      await chunks.return?.();
      await abortUpload(context, fullKey, uploadId);
    }
  }
}

/**
 * Aborts a multipart upload so its parts stop costing storage. Runs with its
 * own timeout, not the caller's (possibly fired) signal. Best effort: a
 * failure here is not reported over the error that caused it, and the
 * bucket's lifecycle rule for incomplete uploads is the backstop.
 */
export async function abortUpload(
  context: S3Context,
  fullKey: string,
  uploadId: string,
): Promise<void> {
  try {
    await context.client.send(
      new AbortMultipartUploadCommand({ Bucket: context.bucket, Key: fullKey, UploadId: uploadId }),
      { abortSignal: AbortSignal.timeout(30_000) },
    );
  } catch {
    // Best effort (see above); the original failure is what the caller needs.
  }
}
