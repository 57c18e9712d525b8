/**
 * Just enough request signing to create one bucket on an S3 server (AWS
 * Signature Version 4) and one container on Azurite (Shared Key), so the
 * harness needs no cloud SDK. Used only against the local test servers.
 */
import { createHash, createHmac } from 'node:crypto';

function sha256Hex(data: string): string {
  return createHash('sha256').update(data).digest('hex');
}

function hmac(key: string | Buffer, data: string): Buffer {
  return createHmac('sha256', key).update(data).digest();
}

/** Sends a signed, body-less S3 request (path-style) and returns the response. */
export async function s3SignedRequest(options: {
  method: 'PUT' | 'GET' | 'HEAD';
  endpoint: string;
  path: string;
  region: string;
  accessKeyId: string;
  secretAccessKey: string;
}): Promise<Response> {
  const url = new URL(options.path, options.endpoint);
  const amzDate = new Date()
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d{3}/, '');
  const day = amzDate.slice(0, 8);
  const payloadHash = sha256Hex('');
  const headers: Record<string, string> = {
    host: url.host,
    'x-amz-content-sha256': payloadHash,
    'x-amz-date': amzDate,
  };
  const signedHeaders = Object.keys(headers).sort().join(';');
  const canonicalHeaders = Object.keys(headers)
    .sort()
    .map((name) => `${name}:${headers[name]}\n`)
    .join('');
  const canonicalRequest = [
    options.method,
    url.pathname,
    '',
    canonicalHeaders,
    signedHeaders,
    payloadHash,
  ].join('\n');
  const scope = `${day}/${options.region}/s3/aws4_request`;
  const stringToSign = ['AWS4-HMAC-SHA256', amzDate, scope, sha256Hex(canonicalRequest)].join('\n');
  let key = hmac(`AWS4${options.secretAccessKey}`, day);
  key = hmac(key, options.region);
  key = hmac(key, 's3');
  key = hmac(key, 'aws4_request');
  const signature = createHmac('sha256', key).update(stringToSign).digest('hex');
  const { host: _host, ...sent } = headers;
  return fetch(url, {
    method: options.method,
    headers: {
      ...sent,
      authorization: `AWS4-HMAC-SHA256 Credential=${options.accessKeyId}/${scope}, SignedHeaders=${signedHeaders}, Signature=${signature}`,
    },
    signal: AbortSignal.timeout(10_000),
  });
}

/** Creates a blob container on Azurite (path-style URL) with Shared Key auth. */
export async function azureCreateContainer(options: {
  blobEndpoint: string;
  accountName: string;
  accountKey: string;
  container: string;
}): Promise<Response> {
  const url = new URL(
    `${options.blobEndpoint.replace(/\/$/, '')}/${options.container}?restype=container`,
  );
  const date = new Date().toUTCString();
  const version = '2021-12-02';
  const canonicalHeaders = `x-ms-date:${date}\nx-ms-version:${version}\n`;
  const canonicalResource = `/${options.accountName}${url.pathname}\nrestype:container`;
  // VERB, then the eleven standard headers (all empty here; Content-Length is empty when zero).
  const stringToSign = [
    'PUT',
    '',
    '',
    '',
    '',
    '',
    '',
    '',
    '',
    '',
    '',
    '',
    canonicalHeaders + canonicalResource,
  ].join('\n');
  const signature = createHmac('sha256', Buffer.from(options.accountKey, 'base64'))
    .update(stringToSign, 'utf8')
    .digest('base64');
  return fetch(url, {
    method: 'PUT',
    headers: {
      'x-ms-date': date,
      'x-ms-version': version,
      authorization: `SharedKey ${options.accountName}:${signature}`,
    },
    signal: AbortSignal.timeout(10_000),
  });
}
