/**
 * A small forwarding HTTP proxy for tests that need a service to answer some
 * requests differently (an S3-compatible service that refuses a header, a
 * listing that drops keys, a delete that is denied) or need to see what a
 * client sent.
 *
 * Each request is shown to `intercept` first: a canned answer it returns is
 * sent (after the request's body has been read, as a server would) and the
 * request never reaches the target; otherwise the request is forwarded
 * unchanged — method, path, query, body and headers, the `Host` the client
 * sent included, so SigV4 signatures stay valid — and the target's answer is
 * relayed unchanged but for hop-by-hop headers.
 *
 * Guarantees:
 * - Listens on 127.0.0.1 only and connects only to its one loopback target
 *   (`InterceptingProxyError` at start for any other).
 * - What it reports (`onAnswered`) carries header names, never their values
 *   (`Authorization` carries the signature).
 *
 * Limits:
 * - HTTP/1.1 over plain TCP only.
 * - A request that got no answer (the target failed, the client went away
 *   first) is not reported; its client sees its connection drop.
 * - No faults of its own: the seeded fault schedule is `startFaultProxy`'s.
 */
import { Agent, createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { pipeline } from 'node:stream/promises';
import {
  afterRequestBody,
  answerHeadersToRelay,
  forwardToTarget,
  listenOnLoopback,
  parseLoopbackTarget,
} from './forwarding.ts';

/** A request as `intercept` sees it. */
export interface InterceptedRequest {
  /** Order of arrival among all requests the proxy saw (from 1). */
  readonly request: number;
  readonly method: string;
  /** The request path as sent (percent-encoded), without the query. */
  readonly path: string;
  /** The query string without `?`, empty when none. */
  readonly query: string;
  /** The request header names, lower-case, sorted. */
  readonly headerNames: readonly string[];
}

/** An answer the proxy sends itself instead of forwarding. */
export interface CannedAnswer {
  readonly status: number;
  readonly headers?: Readonly<Record<string, string>>;
  /** Not sent to a HEAD request. */
  readonly body?: string;
}

/** A request and the status it was answered with. */
export interface AnsweredRequest extends InterceptedRequest {
  readonly status: number;
  /** True when the proxy answered it itself (a canned answer); false when the target did. */
  readonly intercepted: boolean;
}

export interface InterceptingProxyOptions {
  /** The server to forward to: `http://127.0.0.1:<port>` (loopback only, no path). */
  readonly target: string;
  /** A canned answer for this request, or `undefined` to forward it. */
  readonly intercept?: (request: InterceptedRequest) => CannedAnswer | undefined;
  /** Told of every request once its answer's status is sent to the client, in the order answers go out. */
  readonly onAnswered?: (answered: AnsweredRequest) => void;
}

export interface InterceptingProxy {
  /** `http://127.0.0.1:<port>`: point the client's endpoint here. */
  readonly url: string;
  /** Stops listening and destroys every connection. */
  close(): Promise<void>;
}

/** A target the proxy refuses to forward to. */
export class InterceptingProxyError extends Error {
  readonly code = 'INTERCEPTING_PROXY_TARGET';

  constructor(message: string) {
    super(`intercepting proxy: ${message}`);
    this.name = 'InterceptingProxyError';
  }
}

/**
 * Starts the proxy on 127.0.0.1 with a free port.
 * @throws InterceptingProxyError for a non-loopback, non-`http:` or malformed target.
 */
export async function startInterceptingProxy(
  options: InterceptingProxyOptions,
): Promise<InterceptingProxy> {
  const target = parseLoopbackTarget(
    options.target,
    (message) => new InterceptingProxyError(message),
  );
  const agent = new Agent({ keepAlive: true, maxSockets: 64 });
  let arrivals = 0;

  function answerCanned(
    request: IncomingMessage,
    response: ServerResponse,
    seen: InterceptedRequest,
    canned: CannedAnswer,
  ): void {
    afterRequestBody(request, () => {
      if (response.destroyed) return;
      response.writeHead(canned.status, { ...canned.headers });
      options.onAnswered?.({ ...seen, status: canned.status, intercepted: true });
      response.end(request.method === 'HEAD' ? undefined : canned.body);
    });
  }

  function forward(
    request: IncomingMessage,
    response: ServerResponse,
    seen: InterceptedRequest,
  ): void {
    const upstream = forwardToTarget(target, agent, request, response);
    upstream.on('response', (answer) => {
      const status = answer.statusCode ?? 502;
      response.writeHead(status, answer.statusMessage, answerHeadersToRelay(answer.rawHeaders));
      options.onAnswered?.({ ...seen, status, intercepted: false });
      // pipeline, not pipe: an answer that breaks off mid-body must break
      // the client's connection too, not leave it waiting for the rest.
      pipeline(answer, response).catch(() => {
        // Either side went away; pipeline has destroyed both.
      });
    });
  }

  const server = createServer({ keepAliveTimeout: 5_000 }, (request, response) => {
    const rawUrl = request.url ?? '/';
    const queryAt = rawUrl.indexOf('?');
    const seen: InterceptedRequest = {
      request: ++arrivals,
      method: request.method ?? 'GET',
      path: queryAt === -1 ? rawUrl : rawUrl.slice(0, queryAt),
      query: queryAt === -1 ? '' : rawUrl.slice(queryAt + 1),
      headerNames: Object.keys(request.headers).sort(),
    };
    let canned: CannedAnswer | undefined;
    try {
      canned = options.intercept?.(seen);
    } catch {
      // A throwing intercept is a bug in the test: the client sees its
      // connection drop rather than the proxy crashing the run.
      request.socket.destroy();
      return;
    }
    if (canned === undefined) forward(request, response, seen);
    else answerCanned(request, response, seen, canned);
  });
  let url: string;
  try {
    url = await listenOnLoopback(server, 'intercepting proxy');
  } catch (error) {
    agent.destroy();
    throw error;
  }
  return {
    url,
    close: async () => {
      const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      agent.destroy();
      await stopped;
    },
  };
}
