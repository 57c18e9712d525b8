/**
 * A transparent HTTP proxy for the S3 tests: forwards every request to a
 * loopback test server unchanged (the `Host` header too, so SigV4 stays
 * valid) and records what was sent — method, path, query, the names of the
 * request headers (never their values: `Authorization` carries the
 * signature) and the status the server answered.
 *
 * `refuseHeader` makes it behave like an S3-compatible service that does not
 * implement some request headers: a request carrying a header it matches is
 * answered 501 `NotImplemented`, naming the header in `<Header>`, and never
 * reaches the server — the answer such a service gave to the SDK's default
 * checksum headers.
 *
 * Not built on `@x/test-faults`' intercepting proxy, which does the same:
 * `@x/test-faults` devDepends on this package (its proxy tests drive the real
 * adapters), so a devDependency back would be a package cycle turbo refuses.
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

export interface RecordedRequest {
  readonly method: string;
  readonly path: string;
  /** Without `?`; empty when none. */
  readonly query: string;
  /** Lower-case request header names, sorted. */
  readonly headerNames: readonly string[];
  /** The status answered (by the server, or 501 when refused here); undefined when none came. */
  status?: number;
  /** True when the proxy answered it itself (`refuseHeader`). */
  readonly refused: boolean;
}

export interface RecordingProxy {
  /** `http://127.0.0.1:<port>`: use as the store's endpoint. */
  readonly url: string;
  requests(): readonly RecordedRequest[];
  close(): Promise<void>;
}

export interface RecordingProxyOptions {
  /** Answer 501 NotImplemented, naming the header, to a request carrying a header whose name this matches. */
  readonly refuseHeader?: RegExp;
}

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'te', 'upgrade']);

export const NOT_IMPLEMENTED_MESSAGE =
  'A header you provided implies functionality that is not implemented';

export async function startRecordingProxy(
  target: string,
  options: RecordingProxyOptions = {},
): Promise<RecordingProxy> {
  const targetUrl = new URL(target);
  if (targetUrl.hostname !== '127.0.0.1' && targetUrl.hostname !== 'localhost')
    throw new Error(`recording proxy: target must be a loopback test server, got ${target}`);
  const agent = new Agent({ keepAlive: true, maxSockets: 32 });
  const recorded: RecordedRequest[] = [];

  const handle = (request: IncomingMessage, response: ServerResponse) => {
    const rawUrl = request.url ?? '/';
    const queryAt = rawUrl.indexOf('?');
    const headerNames = Object.keys(request.headers)
      .map((name) => name.toLowerCase())
      .sort();
    const refusedHeader = options.refuseHeader
      ? headerNames.find((name) => options.refuseHeader!.test(name))
      : undefined;
    const entry: RecordedRequest = {
      method: request.method ?? 'GET',
      path: queryAt === -1 ? rawUrl : rawUrl.slice(0, queryAt),
      query: queryAt === -1 ? '' : rawUrl.slice(queryAt + 1),
      headerNames,
      refused: refusedHeader !== undefined,
    };
    recorded.push(entry);
    if (refusedHeader !== undefined) {
      const body = `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>NotImplemented</Code><Message>${NOT_IMPLEMENTED_MESSAGE}</Message><Header>${refusedHeader}</Header><RequestId>recording-proxy-${recorded.length}</RequestId></Error>`;
      const answer = () => {
        entry.status = 501;
        response.writeHead(501, { 'content-type': 'application/xml' });
        response.end(request.method === 'HEAD' ? undefined : body);
      };
      // Read the body first, as a server would before answering.
      request.on('end', answer);
      request.resume();
      return;
    }
    const headers: OutgoingHttpHeaders = {};
    for (const [name, value] of Object.entries(request.headers))
      if (value !== undefined && !HOP_BY_HOP.has(name)) headers[name] = value;
    const upstream = httpRequest({
      host: targetUrl.hostname,
      port: Number(targetUrl.port || 80),
      method: request.method,
      path: rawUrl,
      headers,
      agent,
    });
    upstream.on('error', () => request.socket.destroy());
    upstream.on('response', (answer) => {
      entry.status = answer.statusCode;
      const out: string[] = [];
      for (let index = 0; index + 1 < answer.rawHeaders.length; index += 2) {
        const name = answer.rawHeaders[index]!;
        if (HOP_BY_HOP.has(name.toLowerCase()) || name.toLowerCase() === 'transfer-encoding')
          continue;
        out.push(name, answer.rawHeaders[index + 1]!);
      }
      response.writeHead(answer.statusCode ?? 502, answer.statusMessage, out);
      pipeline(answer, response).catch(() => {
        // Either side went away; pipeline destroyed both.
      });
    });
    request.pipe(upstream);
  };

  const server = createServer({ keepAliveTimeout: 5_000 }, handle);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  if (address === null || typeof address === 'string')
    throw new Error('recording proxy: no listening address');
  return {
    url: `http://127.0.0.1:${address.port}`,
    requests: () => [...recorded],
    close: async () => {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      agent.destroy();
      await closed;
    },
  };
}
