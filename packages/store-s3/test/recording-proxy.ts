/**
 * The recording proxy of the S3 tests: `@x/test-faults`' intercepting proxy
 * in front of a loopback test server, recording what was sent — method,
 * path, query, the names of the request headers (never their values:
 * `Authorization` carries the signature) and the status answered.
 *
 * `refuseHeader` makes it behave like an S3-compatible service that does not
 * implement some request headers: a request carrying a header it matches is
 * answered 501 `NotImplemented`, naming the header in `<Header>`, and never
 * reaches the server — the answer such a service gave to the SDK's default
 * checksum headers.
 */
import { startInterceptingProxy } from '@x/test-faults';

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
  /** Every request, in order of arrival. */
  requests(): readonly RecordedRequest[];
  close(): Promise<void>;
}

export interface RecordingProxyOptions {
  /** Answer 501 NotImplemented, naming the header, to a request carrying a header whose name this matches. */
  readonly refuseHeader?: RegExp;
}

export const NOT_IMPLEMENTED_MESSAGE =
  'A header you provided implies functionality that is not implemented';

export async function startRecordingProxy(
  target: string,
  options: RecordingProxyOptions = {},
): Promise<RecordingProxy> {
  // By arrival number: a request is recorded when it arrives, its status when answered.
  const recorded = new Map<number, RecordedRequest>();
  const proxy = await startInterceptingProxy({
    target,
    intercept(request) {
      const refusedHeader = options.refuseHeader
        ? request.headerNames.find((name) => options.refuseHeader!.test(name))
        : undefined;
      recorded.set(request.request, {
        method: request.method,
        path: request.path,
        query: request.query,
        headerNames: request.headerNames,
        refused: refusedHeader !== undefined,
      });
      if (refusedHeader === undefined) return undefined;
      return {
        status: 501,
        headers: { 'content-type': 'application/xml' },
        body: `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>NotImplemented</Code><Message>${NOT_IMPLEMENTED_MESSAGE}</Message><Header>${refusedHeader}</Header><RequestId>recording-proxy-${request.request}</RequestId></Error>`,
      };
    },
    onAnswered(answered) {
      const entry = recorded.get(answered.request);
      if (entry) entry.status = answered.status;
    },
  });
  return {
    url: proxy.url,
    requests: () => [...recorded.values()],
    close: () => proxy.close(),
  };
}
