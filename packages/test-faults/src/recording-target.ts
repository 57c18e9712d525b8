/**
 * A small HTTP server on 127.0.0.1 for the proxies' own tests: it records
 * every request that reaches it (method, URL, headers, body), then lets the
 * test answer it. What the proxy never forwarded is not in `seen`.
 */
import {
  createServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type ServerResponse,
} from 'node:http';
import { listenOnLoopback } from './forwarding.ts';

export interface SeenRequest {
  readonly method: string;
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
}

export interface RecordingTarget {
  /** `http://127.0.0.1:<port>`. */
  readonly url: string;
  /** Every request received since the last `endTest`, in order of arrival. */
  readonly seen: SeenRequest[];
  /** Closes `closable` (a proxy in front of this target) at the next `endTest`; returns it. */
  own<T extends { close(): Promise<void> }>(closable: T): T;
  /** Clears `seen` and closes everything `own`ed since the last call. */
  endTest(): Promise<void>;
  close(): Promise<void>;
}

/** Fetch without connection reuse, so a dropped socket never leaks into the next request. */
export function sendClosing(url: string, init: RequestInit = {}): Promise<Response> {
  return fetch(url, { ...init, headers: { connection: 'close', ...init.headers } });
}

/** Starts the target; `answer` is called once a request's whole body has arrived and been recorded. */
export async function startRecordingTarget(
  answer: (seen: SeenRequest, request: IncomingMessage, response: ServerResponse) => void,
): Promise<RecordingTarget> {
  const seen: SeenRequest[] = [];
  const owned: { close(): Promise<void> }[] = [];
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const entry: SeenRequest = {
        method: request.method ?? 'GET',
        url: request.url ?? '/',
        headers: request.headers,
        body: Buffer.concat(chunks).toString(),
      };
      seen.push(entry);
      answer(entry, request, response);
    });
  });
  const url = await listenOnLoopback(server, 'recording target');
  return {
    url,
    seen,
    own: (closable) => {
      owned.push(closable);
      return closable;
    },
    endTest: async () => {
      seen.length = 0;
      await Promise.all(owned.splice(0).map((closable) => closable.close()));
    },
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
