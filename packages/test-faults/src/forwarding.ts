/**
 * What the proxies of this package share about forwarding one HTTP exchange
 * to a loopback test server: which targets they accept, which headers cross
 * them, how a request is sent on, and how an answer of their own waits for
 * the request's body.
 *
 * Guarantees: a target is accepted only when it is plain `http:` on
 * 127.0.0.0/8, `::1` or `localhost`, without a path; request and answer
 * headers cross unchanged (the `Host` the client sent included, so S3 SigV4
 * signatures, which cover it, stay valid) except the hop-by-hop ones, which
 * describe one connection and never cross.
 */
import {
  type Agent,
  type ClientRequest,
  request as httpRequest,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type OutgoingHttpHeaders,
  type Server,
  type ServerResponse,
} from 'node:http';
import { isIP } from 'node:net';

/** Hop-by-hop headers: about one connection, never forwarded. */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'upgrade',
]);

/** A loopback target, as the proxies connect to it. */
export interface LoopbackTarget {
  readonly url: URL;
  /** The host to connect to (an IPv6 address without brackets). */
  readonly host: string;
  readonly port: number;
}

function isLoopbackHost(hostname: string): boolean {
  const bare = hostname.startsWith('[') ? hostname.slice(1, -1) : hostname;
  if (bare === 'localhost') return true;
  if (isIP(bare) === 4) return bare.startsWith('127.');
  if (isIP(bare) === 6) return bare === '::1' || bare === '0:0:0:0:0:0:0:1';
  return false;
}

/**
 * Parses and checks a proxy's target.
 * @param fail makes the caller's own typed error from a message naming what was wrong.
 */
export function parseLoopbackTarget(
  target: string,
  fail: (message: string) => Error,
): LoopbackTarget {
  let url: URL;
  try {
    url = new URL(target);
  } catch {
    throw fail(`target must be a URL such as http://127.0.0.1:9000`);
  }
  if (url.protocol !== 'http:') {
    throw fail(`target must be plain http (the test servers), got ${url.protocol}`);
  }
  if (!isLoopbackHost(url.hostname)) {
    throw fail(
      `target must be on this machine (127.0.0.0/8, ::1 or localhost), got ${url.hostname}: the proxy only forwards to a loopback test server`,
    );
  }
  if (url.pathname !== '/' && url.pathname !== '') {
    throw fail('target must be an origin without a path');
  }
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  return { url, host, port: Number(url.port || 80) };
}

/** The request headers to send on to the target: all but the hop-by-hop ones, values unchanged. */
function requestHeadersToForward(headers: IncomingHttpHeaders): OutgoingHttpHeaders {
  const forwarded: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined && !HOP_BY_HOP.has(name)) forwarded[name] = value;
  }
  return forwarded;
}

/**
 * The answer headers to relay to the client, as raw name/value pairs in the
 * target's order and spelling: all but the hop-by-hop ones and
 * `Transfer-Encoding` (the proxy frames the body itself). `rewrite` may
 * change a value (given the lower-case name).
 */
export function answerHeadersToRelay(
  rawHeaders: readonly string[],
  rewrite?: (lowerName: string, value: string) => string,
): string[] {
  const relayed: string[] = [];
  for (let index = 0; index + 1 < rawHeaders.length; index += 2) {
    const name = rawHeaders[index]!;
    const lower = name.toLowerCase();
    if (HOP_BY_HOP.has(lower) || lower === 'transfer-encoding') continue;
    const value = rawHeaders[index + 1]!;
    relayed.push(name, rewrite === undefined ? value : rewrite(lower, value));
  }
  return relayed;
}

/**
 * Sends `request` on to the target unchanged (method, path and query, body,
 * headers but the hop-by-hop ones) and returns the upstream request: the
 * caller relays its `response`. Should the client go away before its whole
 * answer was sent, the upstream exchange is stopped (a finished one stays,
 * for the agent to reuse); should the target fail, the client's connection
 * is dropped, as it would be without a proxy.
 */
export function forwardToTarget(
  target: LoopbackTarget,
  agent: Agent,
  request: IncomingMessage,
  response: ServerResponse,
): ClientRequest {
  const upstream = httpRequest({
    host: target.host,
    port: target.port,
    method: request.method ?? 'GET',
    path: request.url,
    headers: requestHeadersToForward(request.headers),
    agent,
  });
  response.on('close', () => {
    if (!response.writableFinished) upstream.destroy();
  });
  upstream.on('error', () => {
    request.socket.destroy();
  });
  request.pipe(upstream);
  return upstream;
}

/**
 * Runs `send` once the request's body has been read (and dropped), as a
 * server that answers after reading it would: answering mid-upload makes
 * some clients report a broken pipe instead of the answer.
 */
export function afterRequestBody(request: IncomingMessage, send: () => void): void {
  if (request.complete) send();
  else {
    request.on('end', send);
    request.resume();
  }
}

/**
 * Listens on 127.0.0.1 on a free port and resolves to its origin,
 * `http://127.0.0.1:<port>`; rejects when the server cannot listen (then
 * closed), naming `what`.
 */
export async function listenOnLoopback(server: Server, what: string): Promise<string> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address();
  if (address === null || typeof address === 'string') {
    server.close();
    throw new Error(`${what}: could not read its own listening address`);
  }
  return `http://127.0.0.1:${address.port}`;
}
