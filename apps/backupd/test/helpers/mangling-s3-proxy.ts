/**
 * An HTTP proxy in front of a loopback S3 test server that breaks the
 * service in the ways `backupd check` must report rather than hide: listings
 * under a chosen prefix come back empty (a listing that drops every key),
 * and deletes of chosen keys are refused with 403 AccessDenied. Everything
 * else is forwarded unchanged (the `Host` header too, so SigV4 stays valid).
 */
import {
  Agent,
  createServer,
  request as httpRequest,
  type IncomingMessage,
  type OutgoingHttpHeaders,
  type ServerResponse,
} from 'node:http';
import { pipeline } from 'node:stream/promises';

export interface ManglingOptions {
  /** ListObjectsV2 whose `prefix` parameter contains this is answered with an empty listing. */
  readonly emptyListingsUnder?: string;
  /** DELETE of an object whose path matches this is answered 403 AccessDenied. */
  readonly refuseDeletes?: RegExp;
}

export interface ManglingProxy {
  readonly url: string;
  close(): Promise<void>;
}

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'te', 'upgrade']);

function answer(request: IncomingMessage, response: ServerResponse, status: number, body: string) {
  request.on('end', () => {
    response.writeHead(status, { 'content-type': 'application/xml' });
    response.end(body);
  });
  request.resume();
}

export async function startManglingS3Proxy(
  target: string,
  options: ManglingOptions,
): Promise<ManglingProxy> {
  const targetUrl = new URL(target);
  const agent = new Agent({ keepAlive: true, maxSockets: 64 });
  const server = createServer({ keepAliveTimeout: 5_000 }, (request, response) => {
    const url = new URL(request.url ?? '/', 'http://proxy');
    const method = request.method ?? 'GET';
    const listPrefix = url.searchParams.get('prefix') ?? '';
    if (
      method === 'GET' &&
      url.searchParams.get('list-type') === '2' &&
      options.emptyListingsUnder !== undefined &&
      listPrefix.includes(options.emptyListingsUnder)
    ) {
      const bucket = url.pathname.split('/')[1] ?? '';
      answer(
        request,
        response,
        200,
        `<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>${bucket}</Name><Prefix>${listPrefix}</Prefix><KeyCount>0</KeyCount><MaxKeys>1000</MaxKeys><IsTruncated>false</IsTruncated></ListBucketResult>`,
      );
      return;
    }
    if (
      method === 'DELETE' &&
      !url.searchParams.has('uploadId') &&
      options.refuseDeletes?.test(decodeURIComponent(url.pathname))
    ) {
      answer(
        request,
        response,
        403,
        '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code><Message>Access Denied (mangling proxy)</Message><RequestId>mangled</RequestId></Error>',
      );
      return;
    }
    const headers: OutgoingHttpHeaders = {};
    for (const [name, value] of Object.entries(request.headers))
      if (value !== undefined && !HOP_BY_HOP.has(name)) headers[name] = value;
    const upstream = httpRequest({
      host: targetUrl.hostname,
      port: Number(targetUrl.port || 80),
      method,
      path: request.url,
      headers,
      agent,
    });
    upstream.on('error', () => request.socket.destroy());
    upstream.on('response', (reply) => {
      const out: string[] = [];
      for (let index = 0; index + 1 < reply.rawHeaders.length; index += 2) {
        const name = reply.rawHeaders[index]!.toLowerCase();
        if (HOP_BY_HOP.has(name) || name === 'transfer-encoding') continue;
        out.push(reply.rawHeaders[index]!, reply.rawHeaders[index + 1]!);
      }
      response.writeHead(reply.statusCode ?? 502, reply.statusMessage, out);
      pipeline(reply, response).catch(() => {
        // Either side went away; pipeline destroyed both.
      });
    });
    request.pipe(upstream);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no listening address');
  return {
    url: `http://127.0.0.1:${address.port}`,
    close: async () => {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      agent.destroy();
      await closed;
    },
  };
}
