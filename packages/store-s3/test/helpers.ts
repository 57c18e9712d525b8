/** Building stores on the harness's S3 servers. */
import { ListMultipartUploadsCommand, S3Client } from '@aws-sdk/client-s3';
import type { S3TestServer } from '@x/test-servers';
import { type S3CapabilityOptions, S3Store, type S3StoreOptions } from '../src/index.ts';

/**
 * What the adapter is configured to claim on each harness server, from what
 * the probe measured (docs/compatibility.md).
 */
const MEASURED_CAPABILITIES: Readonly<Record<S3TestServer['name'], Required<S3CapabilityOptions>>> =
  {
    versitygw: {
      conditionalPut: true,
      conditionalDelete: true,
      multipartCreate: true,
      distinctVersions: false,
    },
    // MinIO ignores If-Match on DELETE (minio/minio#21677): declared off, refused by the adapter.
    minio: {
      conditionalPut: true,
      conditionalDelete: false,
      multipartCreate: true,
      distinctVersions: false,
    },
    // s3rver ignores every conditional header: declared off in real use (its tests claim everything on purpose).
    s3rver: {
      conditionalPut: false,
      conditionalDelete: false,
      multipartCreate: false,
      distinctVersions: false,
    },
  };

/** Every conditional capability claimed: for measuring what a server does, not what it is configured for. */
export const CLAIMING_ALL = {
  conditionalPut: true,
  conditionalDelete: true,
  multipartCreate: true,
} as const satisfies S3CapabilityOptions;

/** What each server honours, as measured; S3 versions are content hashes on every server. */
export function declaredCapabilities(server: S3TestServer): Required<S3CapabilityOptions> {
  return { ...MEASURED_CAPABILITIES[server.name] };
}

export function clientFor(server: S3TestServer): S3Client {
  return new S3Client({
    endpoint: server.endpoint,
    region: server.region,
    forcePathStyle: server.forcePathStyle,
    credentials: { accessKeyId: server.accessKeyId, secretAccessKey: server.secretAccessKey },
  });
}

export function storeFor(
  server: S3TestServer,
  prefix: string,
  extra: Partial<S3StoreOptions> = {},
): S3Store {
  return new S3Store({
    bucket: server.bucket,
    prefix,
    endpoint: server.endpoint,
    region: server.region,
    forcePathStyle: server.forcePathStyle,
    credentials: { accessKeyId: server.accessKeyId, secretAccessKey: server.secretAccessKey },
    capabilities: declaredCapabilities(server),
    ...extra,
  });
}

/** Multipart uploads still open under a key prefix (should be none after any upload, failed or not). */
export async function openUploads(store: S3Store, keyPrefix: string): Promise<string[]> {
  const response = await store.client.send(
    new ListMultipartUploadsCommand({ Bucket: store.bucket, Prefix: keyPrefix }),
  );
  return (response.Uploads ?? []).map((upload) => upload.Key ?? '');
}

/** Deterministic pseudo-random bytes, so two bodies differ everywhere. */
export function patternBytes(size: number, seed: number): Uint8Array {
  const bytes = new Uint8Array(size);
  let state = seed >>> 0 || 1;
  for (let index = 0; index < size; index += 1) {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    bytes[index] = state & 0xff;
  }
  return bytes;
}

/** Streams `bytes` in uneven chunks, as a real source would. */
export async function* unevenChunks(bytes: Uint8Array): AsyncIterable<Uint8Array> {
  const sizes = [1, 4096, 65_537, 1_000_003, 3 * 1024 * 1024 + 7];
  let offset = 0;
  for (let turn = 0; offset < bytes.byteLength; turn += 1) {
    const size = sizes[turn % sizes.length] ?? 4096;
    yield bytes.subarray(offset, offset + size);
    offset += size;
  }
}
