/**
 * An HTTP proxy in front of a loopback S3 test server that breaks the
 * service in the ways `backupd check` must report rather than hide: listings
 * under a chosen prefix come back empty (a listing that drops every key),
 * and deletes of chosen keys are refused with 403 AccessDenied. Everything
 * else is forwarded unchanged (the `Host` header too, so SigV4 stays valid):
 * `@x/test-faults`' intercepting proxy, with these two canned answers.
 */
import {
  type CannedAnswer,
  type InterceptedRequest,
  type InterceptingProxy,
  startInterceptingProxy,
} from '@x/test-faults';

export interface ManglingOptions {
  /** ListObjectsV2 whose `prefix` parameter contains this is answered with an empty listing. */
  readonly emptyListingsUnder?: string;
  /** DELETE of an object whose path matches this is answered 403 AccessDenied. */
  readonly refuseDeletes?: RegExp;
}

export type ManglingProxy = InterceptingProxy;

const XML = { 'content-type': 'application/xml' };

function mangle(request: InterceptedRequest, options: ManglingOptions): CannedAnswer | undefined {
  const query = new URLSearchParams(request.query);
  const listPrefix = query.get('prefix') ?? '';
  if (
    request.method === 'GET' &&
    query.get('list-type') === '2' &&
    options.emptyListingsUnder !== undefined &&
    listPrefix.includes(options.emptyListingsUnder)
  ) {
    const bucket = request.path.split('/')[1] ?? '';
    return {
      status: 200,
      headers: XML,
      body: `<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>${bucket}</Name><Prefix>${listPrefix}</Prefix><KeyCount>0</KeyCount><MaxKeys>1000</MaxKeys><IsTruncated>false</IsTruncated></ListBucketResult>`,
    };
  }
  if (
    request.method === 'DELETE' &&
    !query.has('uploadId') &&
    options.refuseDeletes?.test(decodeURIComponent(request.path))
  ) {
    return {
      status: 403,
      headers: XML,
      body: '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code><Message>Access Denied (mangling proxy)</Message><RequestId>mangled</RequestId></Error>',
    };
  }
  return undefined;
}

export function startManglingS3Proxy(
  target: string,
  options: ManglingOptions,
): Promise<ManglingProxy> {
  return startInterceptingProxy({ target, intercept: (request) => mangle(request, options) });
}
