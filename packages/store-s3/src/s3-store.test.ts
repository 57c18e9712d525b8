/**
 * UNIT TESTS ONLY, with a fake client: they pin the adapter's error mapping
 * and its retry decisions for answers a local server will not produce on
 * demand (409 ConditionalRequestConflict, 501, 500 with a request id). They
 * prove nothing about a real service — the suites in test/ do that, against
 * real servers.
 */
import type { S3Client } from '@aws-sdk/client-s3';
import {
  AlreadyExistsError,
  ConflictError,
  NotImplementedError,
  PreconditionFailedError,
  StoreError,
} from '@x/store';
import { describe, expect, it } from 'vitest';
import { classifyS3Error } from './errors.ts';
import { S3Store } from './s3-store.ts';

function serviceError(
  code: string,
  status: number,
  extra: Record<string, unknown> = {},
): Error & Record<string, unknown> {
  return Object.assign(new Error(`${code} message`), {
    name: code,
    $fault: status >= 500 ? 'server' : 'client',
    $metadata: { httpStatusCode: status, requestId: 'REQ123', attempts: 1 },
    ...extra,
  }) as unknown as Error & Record<string, unknown>;
}

/** A stand-in for S3Client.send that answers from a script, recording the commands. */
function fakeClient(answers: Array<(command: { input: Record<string, unknown> }) => unknown>) {
  const sent: { name: string; input: Record<string, unknown> }[] = [];
  const client = {
    async send(command: { constructor: { name: string }; input: Record<string, unknown> }) {
      sent.push({ name: command.constructor.name, input: command.input });
      const answer = answers.shift();
      if (!answer) throw new Error('fake client: no scripted answer left');
      return answer(command);
    },
  } as unknown as S3Client;
  return { client, sent };
}

function storeWith(
  client: S3Client,
  extra: Partial<ConstructorParameters<typeof S3Store>[0]> = {},
) {
  return new S3Store({
    bucket: 'b',
    prefix: 'p',
    client,
    conflictRetry: { attempts: 3, baseDelayMs: 1, maxDelayMs: 2 },
    ...extra,
  });
}

describe('classifyS3Error (unit, fake errors)', () => {
  const cases: [string, number, Parameters<typeof classifyS3Error>[1], string][] = [
    ['PreconditionFailed', 412, 'create', 'AlreadyExistsError'],
    ['PreconditionFailed', 412, 'complete-create', 'AlreadyExistsError'],
    ['PreconditionFailed', 412, 'replace', 'PreconditionFailedError'],
    ['PreconditionFailed', 412, 'conditional-delete', 'PreconditionFailedError'],
    ['NoSuchKey', 404, 'replace', 'PreconditionFailedError'],
    ['NoSuchKey', 404, 'conditional-delete', 'PreconditionFailedError'],
    ['ConditionalRequestConflict', 409, 'create', 'ConflictError'],
    ['NotImplemented', 501, 'replace', 'NotImplementedError'],
    ['SomethingNew', 501, 'create', 'NotImplementedError'],
    ['InternalError', 500, 'create', 'StoreError'],
    ['AccessDenied', 403, 'get', 'StoreError'],
    ['NoSuchBucket', 404, 'replace', 'StoreError'],
  ];
  it.each(cases)('%s (%i) on %s → %s', (code, status, operation, expected) => {
    const mapped = classifyS3Error(serviceError(code, status), operation, 'k');
    expect(mapped.name).toBe(expected);
    expect(mapped.key).toBe('k');
  });

  it('classifies by code when the status is missing, and by status when the code is unknown', () => {
    const byCode = classifyS3Error(
      Object.assign(new Error('x'), { name: 'PreconditionFailed' }),
      'create',
      'k',
    );
    expect(AlreadyExistsError.isInstance(byCode)).toBe(true);
    const byStatus = classifyS3Error(serviceError('Unknown', 412), 'replace', 'k');
    expect(PreconditionFailedError.isInstance(byStatus)).toBe(true);
  });

  it('keeps the key, status and request id in the message, and drops the SDK error (it can echo the access key id)', () => {
    const raw = serviceError('SignatureDoesNotMatch', 403, {
      AWSAccessKeyId: 'AKIAEXAMPLEKEYID',
      StringToSign: 'AWS4-HMAC-SHA256\n…',
    });
    const mapped = classifyS3Error(raw, 'put', 'dir/key');
    expect(mapped.message).toContain('dir/key');
    expect(mapped.message).toContain('status 403');
    expect(mapped.message).toContain('REQ123');
    expect(JSON.stringify({ message: mapped.message, cause: String(mapped.cause) })).not.toContain(
      'AKIAEXAMPLEKEYID',
    );
    expect(mapped.cause).not.toBe(raw);
    expect(Object.keys(mapped.cause as object)).not.toContain('AWSAccessKeyId');
  });
});

describe('S3Store retry decisions (unit, fake client)', () => {
  it('retries 409 ConditionalRequestConflict with back-off, then succeeds', async () => {
    const { client, sent } = fakeClient([
      () => Promise.reject(serviceError('ConditionalRequestConflict', 409)),
      () => Promise.reject(serviceError('ConditionalRequestConflict', 409)),
      () => ({ ETag: '"e1"' }),
    ]);
    const result = await storeWith(client).put('k', new Uint8Array([1]), { mode: 'create' });
    expect(result.version).toEqual({ etag: '"e1"' });
    expect(sent.map((command) => command.input.IfNoneMatch)).toEqual(['*', '*', '*']);
  });

  it('gives up on 409 after the configured attempts with ConflictError', async () => {
    const { client, sent } = fakeClient([
      () => Promise.reject(serviceError('ConditionalRequestConflict', 409)),
      () => Promise.reject(serviceError('ConditionalRequestConflict', 409)),
      () => Promise.reject(serviceError('ConditionalRequestConflict', 409)),
    ]);
    const error = await storeWith(client)
      .put('k', new Uint8Array([1]), { mode: { ifMatch: { etag: '"e0"' } } })
      .catch((caught: unknown) => caught);
    expect(ConflictError.isInstance(error)).toBe(true);
    expect(sent).toHaveLength(3);
  });

  it('sends the ETag exactly as given (quotes included) and the key under the prefix', async () => {
    const { client, sent } = fakeClient([() => ({ ETag: '"e2"' })]);
    await storeWith(client).put('a/b', new Uint8Array([1]), {
      mode: { ifMatch: { etag: '"e1-3"' } },
    });
    expect(sent[0]?.input).toMatchObject({ Bucket: 'b', Key: 'p/a/b', IfMatch: '"e1-3"' });
  });

  it('does not read back after a 412 answered on the first attempt (that is a lost race, not a lost answer)', async () => {
    const { client, sent } = fakeClient([
      () => Promise.reject(serviceError('PreconditionFailed', 412)),
    ]);
    const error = await storeWith(client)
      .put('k', new Uint8Array([1]), { mode: 'create' })
      .catch((caught: unknown) => caught);
    expect(AlreadyExistsError.isInstance(error)).toBe(true);
    expect(sent.map((command) => command.name)).toEqual(['PutObjectCommand']);
  });

  it('reports ConflictError when a conflicted multipart completion finds its upload gone, and aborts the upload', async () => {
    const { client, sent } = fakeClient([
      () => ({ UploadId: 'u1' }),
      () => ({ ETag: '"p1"' }),
      () => ({ ETag: '"p2"' }),
      () => Promise.reject(serviceError('ConditionalRequestConflict', 409)),
      () => Promise.reject(serviceError('NoSuchUpload', 404)),
      () => ({}),
    ]);
    const error = await storeWith(client)
      .upload('k', new Uint8Array(6 * 1024 * 1024), { mode: 'create', partSize: 5 * 1024 * 1024 })
      .catch((caught: unknown) => caught);
    expect(ConflictError.isInstance(error)).toBe(true);
    expect(sent.map((command) => command.name)).toEqual([
      'CreateMultipartUploadCommand',
      'UploadPartCommand',
      'UploadPartCommand',
      'CompleteMultipartUploadCommand',
      'CompleteMultipartUploadCommand',
      'AbortMultipartUploadCommand',
    ]);
    expect(sent[3]?.input.IfNoneMatch).toBe('*');
  });

  it('maps 501 to NotImplementedError and 500 to StoreError', async () => {
    const { client } = fakeClient([
      () => ({ ETag: '"e"', ContentLength: 1 }),
      () => Promise.reject(serviceError('NotImplemented', 501)),
      () => Promise.reject(serviceError('InternalError', 500)),
    ]);
    const store = storeWith(client);
    const first = await store
      .delete('k', { ifMatch: { etag: '"e"' } })
      .catch((caught: unknown) => caught);
    expect(NotImplementedError.isInstance(first)).toBe(true);
    const second = await store.put('k', new Uint8Array()).catch((caught: unknown) => caught);
    expect(StoreError.isInstance(second)).toBe(true);
    expect(NotImplementedError.isInstance(second)).toBe(false);
  });

  it('refuses a mode declared off, without sending anything', async () => {
    const { client, sent } = fakeClient([]);
    const store = storeWith(client, {
      capabilities: { conditionalDelete: false, conditionalPut: false, multipartCreate: false },
    });
    for (const call of [
      () => store.delete('k', { ifMatch: { etag: '"e"' } }),
      () => store.put('k', new Uint8Array(), { mode: 'create' }),
      () => store.upload('k', new Uint8Array(), { mode: 'create' }),
    ]) {
      const error = await call().catch((caught: unknown) => caught);
      expect(NotImplementedError.isInstance(error)).toBe(true);
    }
    expect(sent).toEqual([]);
    expect(store.capabilities).toEqual({
      conditionalPut: false,
      conditionalDelete: false,
      multipartCreate: false,
      distinctVersions: false,
    });
  });

  it('declares distinctVersions false (content-hash ETags) and refuses a claim of true', () => {
    const { client } = fakeClient([]);
    expect(storeWith(client).capabilities.distinctVersions).toBe(false);
    expect(() =>
      storeWith(client, {
        capabilities: { distinctVersions: true } as unknown as { distinctVersions: false },
      }),
    ).toThrow(/distinctVersions/);
  });

  it('conditional delete of a missing key: HEAD finds nothing → PreconditionFailedError, no DELETE sent', async () => {
    const { client, sent } = fakeClient([() => Promise.reject(serviceError('NotFound', 404))]);
    const error = await storeWith(client)
      .delete('k', { ifMatch: { etag: '"e"' } })
      .catch((caught: unknown) => caught);
    expect(PreconditionFailedError.isInstance(error)).toBe(true);
    expect(sent.map((command) => command.name)).toEqual(['HeadObjectCommand']);
  });

  it('conditional delete of a present key: HEAD, then DELETE with If-Match even when the ETags differ (the service decides)', async () => {
    const { client, sent } = fakeClient([
      () => ({ ETag: '"other"', ContentLength: 1 }),
      () => Promise.reject(serviceError('PreconditionFailed', 412)),
      () => ({ ETag: '"e"', ContentLength: 1 }),
      // 204: versitygw's answer also when the object vanished after the HEAD; success either way.
      () => ({}),
    ]);
    const store = storeWith(client);
    const stale = await store
      .delete('k', { ifMatch: { etag: '"e"' } })
      .catch((caught: unknown) => caught);
    expect(PreconditionFailedError.isInstance(stale)).toBe(true);
    await store.delete('k', { ifMatch: { etag: '"e"' } });
    expect(sent.map((command) => command.name)).toEqual([
      'HeadObjectCommand',
      'DeleteObjectCommand',
      'HeadObjectCommand',
      'DeleteObjectCommand',
    ]);
    expect(sent[1]?.input).toMatchObject({ Key: 'p/k', IfMatch: '"e"' });
  });

  it('never puts credentials in the description', () => {
    const store = new S3Store({
      bucket: 'b',
      prefix: 'p/q',
      endpoint: 'https://user:hunter2@example.com:9000/path',
      credentials: { accessKeyId: 'AKIAEXAMPLE', secretAccessKey: 'secret-value' },
    });
    expect(store.description).toBe('s3://b/p/q at https://example.com:9000');
    expect(store.description).not.toMatch(/hunter2|AKIAEXAMPLE|secret-value/);
  });

  it('refuses a part size S3 would refuse', () => {
    expect(() => new S3Store({ bucket: 'b', partSize: 1024, client: {} as S3Client })).toThrow(
      /partSize/,
    );
  });
});

/**
 * Listing entries a local server will not produce on demand: a directory
 * placeholder without an ETag (test/list-placeholders.test.ts shows real
 * servers' placeholders, which carry one), and other entries without one.
 * The answers have the SDK's `ListObjectsV2` output shape.
 */
describe('S3Store list entries without an ETag (unit, fake client)', () => {
  const page =
    (contents: Record<string, unknown>[], extra: Record<string, unknown> = {}) =>
    () => ({
      Contents: contents,
      IsTruncated: false,
      ...extra,
    });

  it('skips zero-byte keys ending in / (directory placeholders), with or without an ETag', async () => {
    const { client, sent } = fakeClient([
      page([
        { Key: 'p/', Size: 0 },
        { Key: 'p/dir/', Size: 0 },
        { Key: 'p/dir/a', Size: 3, ETag: '"e1"' },
        { Key: 'p/other/', Size: 0, ETag: '"d41d8cd98f00b204e9800998ecf8427e"' },
        { Key: 'p/z', Size: 1, ETag: '"e2"' },
      ]),
    ]);
    const result = await storeWith(client).list('');
    expect(sent[0]?.input).toMatchObject({ Bucket: 'b', Prefix: 'p/' });
    expect(result.objects).toEqual([
      { key: 'dir/a', size: 3, version: { etag: '"e1"' } },
      { key: 'z', size: 1, version: { etag: '"e2"' } },
    ]);
  });

  it.each([
    ['an object', { Key: 'p/dir/a', Size: 3 }, 'p/dir/a', '3 bytes'],
    ['an object with an empty ETag', { Key: 'p/dir/a', Size: 3, ETag: '' }, 'p/dir/a', '3 bytes'],
    ['a key ending in / that holds bytes', { Key: 'p/dir/', Size: 5 }, 'p/dir/', '5 bytes'],
    ['a key ending in / without a size', { Key: 'p/dir/' }, 'p/dir/', 'unknown bytes'],
    ['a zero-byte key not ending in /', { Key: 'p/empty', Size: 0 }, 'p/empty', '0 bytes'],
  ])(
    'fails the listing, naming the key, for %s without an ETag',
    async (_what, entry, key, size) => {
      const { client } = fakeClient([
        page([{ Key: 'p/before', Size: 1, ETag: '"e0"' }, entry], {
          IsTruncated: true,
          NextContinuationToken: 't',
        }),
      ]);
      const error = await storeWith(client)
        .list('dir/')
        .catch((caught: unknown) => caught);
      expect(StoreError.isInstance(error)).toBe(true);
      expect(error).toMatchObject({
        key,
        message: `s3 list of "dir/": the service returned no ETag for "${key}" (${size}), so the object has no version; the listing is refused rather than given without it`,
      });
    },
  );
});

describe('501 NotImplemented names what the service did not implement (unit, fake errors)', () => {
  const message = 'A header you provided implies functionality that is not implemented';

  it("carries the service's message and the header from <Header>, and the checksums switch for a checksum header", () => {
    const mapped = classifyS3Error(
      serviceError('NotImplemented', 501, { message, Header: 'x-amz-checksum-crc32' }),
      'create',
      'LEASE',
    );
    expect(NotImplementedError.isInstance(mapped)).toBe(true);
    expect(mapped.message).toContain(`the service said: "${message}"`);
    expect(mapped.message).toContain('header x-amz-checksum-crc32');
    expect(mapped.message).toContain("checksums: 'when-required'");
    expect(mapped.message).toContain('status 501');
    expect(mapped.message).toContain('request id REQ123');
  });

  it('takes the header from the message when the service names it only there', () => {
    const mapped = classifyS3Error(
      serviceError('NotImplemented', 501, {
        message: 'x-amz-checksum-mode is not supported',
      }),
      'get',
      'k',
    );
    expect(mapped.message).toContain('header x-amz-checksum-mode');
  });

  it('names another header without the checksums hint, and reports no header value', () => {
    const mapped = classifyS3Error(
      serviceError('NotImplemented', 501, {
        message,
        Header: 'Transfer-Encoding',
        HeaderValue: 'secret-looking-value',
      }),
      'put',
      'k',
    );
    expect(mapped.message).toContain('header transfer-encoding');
    expect(mapped.message).not.toContain('checksums');
    expect(mapped.message).not.toContain('secret-looking-value');
  });

  it('ignores a <Header> that is no header name', () => {
    const mapped = classifyS3Error(
      serviceError('NotImplemented', 501, { message, Header: 'x: y\nz' }),
      'put',
      'k',
    );
    expect(mapped.message).not.toContain('header x');
  });

  it('a 501 without a body (a HEAD answer) still says NotImplemented and the status', () => {
    const mapped = classifyS3Error(
      Object.assign(new Error('UnknownError'), {
        name: 'NotImplemented',
        $metadata: { httpStatusCode: 501, attempts: 1 },
      }),
      'head',
      'k',
    );
    expect(mapped.message).toBe(
      'not implemented by this store: s3 head (NotImplemented, status 501)',
    );
  });
});

describe('the checksums option (unit)', () => {
  async function sdkSettings(store: S3Store): Promise<[string, string]> {
    const config = store.client.config as unknown as {
      requestChecksumCalculation: () => Promise<string>;
      responseChecksumValidation: () => Promise<string>;
    };
    return [await config.requestChecksumCalculation(), await config.responseChecksumValidation()];
  }
  const credentials = { accessKeyId: 'id', secretAccessKey: 'secret' };

  it("defaults to 'when-required' with a custom endpoint, and gives the SDK WHEN_REQUIRED", async () => {
    const store = new S3Store({ bucket: 'b', endpoint: 'http://127.0.0.1:1', credentials });
    expect(store.checksums).toBe('when-required');
    expect(await sdkSettings(store)).toEqual(['WHEN_REQUIRED', 'WHEN_REQUIRED']);
  });

  it("'when-supported' with an endpoint gives the SDK WHEN_SUPPORTED", async () => {
    const store = new S3Store({
      bucket: 'b',
      endpoint: 'http://127.0.0.1:1',
      credentials,
      checksums: 'when-supported',
    });
    expect(store.checksums).toBe('when-supported');
    expect(await sdkSettings(store)).toEqual(['WHEN_SUPPORTED', 'WHEN_SUPPORTED']);
  });

  it('leaves AWS itself to the SDK (no endpoint, no option)', () => {
    const store = new S3Store({ bucket: 'b', region: 'eu-west-1', credentials });
    expect(store.checksums).toBeUndefined();
  });

  it("'when-required' for AWS too when asked", async () => {
    const store = new S3Store({
      bucket: 'b',
      region: 'eu-west-1',
      credentials,
      checksums: 'when-required',
    });
    expect(await sdkSettings(store)).toEqual(['WHEN_REQUIRED', 'WHEN_REQUIRED']);
  });

  it('refuses an unknown value, naming it', () => {
    expect(
      () =>
        new S3Store({
          bucket: 'b',
          credentials,
          checksums: 'always' as unknown as 'when-required',
        }),
    ).toThrow(/checksums must be 'when-required' or 'when-supported', got "always"/);
  });
});
