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
  /** Every request received, in order of arrival (clear it between tests). */
  readonly seen: SeenRequest[];
  close(): Promise<void>;
}

/** Starts the target; `answer` is called once a request's whole body has arrived and been recorded. */
export async function startRecordingTarget(
  answer: (seen: SeenRequest, request: IncomingMessage, response: ServerResponse) => void,
): Promise<RecordingTarget> {
  const seen: SeenRequest[] = [];
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
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
