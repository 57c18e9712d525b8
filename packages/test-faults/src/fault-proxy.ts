/**
 * A fault-injecting HTTP proxy for tests and the soak, placed between a store
 * adapter and a real S3, Azure or GCS server on this machine.
 *
 * The adapter's endpoint points at the proxy; the proxy forwards each request
 * to the target unchanged — method, path, query, headers, including the
 * `Host` header the client sent (so S3 SigV4 signatures, which cover `Host`,
 * stay valid) — while connecting to the target's address. A seeded schedule
 * (see `schedule.ts`) decides, per request in arrival order, which faults to
 * inject.
 *
 * Guarantees:
 * - Listens on 127.0.0.1 only, and connects only to the one loopback target
 *   it was given; a non-loopback target is refused at start.
 * - Every injected fault is counted by kind and recorded in memory (and as a
 *   JSON line in the `log` file when one is given).
 * - The write log lists every request that reached the server and changed
 *   the bucket: PUT, POST, PATCH or DELETE answered 2xx by the server —
 *   including those whose answer was then dropped (`lostResponse`).
 *
 * Limits:
 * - HTTP/1.1 over plain TCP only (the test servers speak nothing else).
 * - Answers the proxy makes up (500, 503, 409) are never forwarded: the
 *   server never sees those requests.
 * - The only rewrite is of a `Location` answer header naming the target (a
 *   GCS resumable upload session URL), so follow-up requests come back
 *   through the proxy.
 * - Deterministic in which faults fire given the seed and the order requests
 *   arrive; concurrent clients make arrival order itself a race.
 */
import { randomBytes } from 'node:crypto';
import { appendFileSync } from 'node:fs';
import {
  Agent,
  createServer,
  type IncomingMessage,
  type OutgoingHttpHeaders,
  type Server,
  type ServerResponse,
} from 'node:http';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import {
  afterRequestBody,
  answerHeadersToRelay,
  forwardToTarget,
  listenOnLoopback,
  parseLoopbackTarget,
} from './forwarding.ts';
import {
  emptyCounts,
  type FaultCounts,
  type FaultEvent,
  type FaultKind,
  type FaultSchedule,
  FaultScheduleError,
  ScheduleRunner,
  type TerminalFault,
} from './schedule.ts';

export interface FaultProxyOptions {
  /** The server to forward to: `http://127.0.0.1:<port>` (loopback only). */
  readonly target: string;
  readonly schedule: FaultSchedule;
  /** Integer; the same seed and request order give the same faults. */
  readonly seed: number;
  /** Path of a file to append every fault and every write-log entry to, one JSON object a line. */
  readonly log?: string;
  /** The request header whose value tags the write-log entry. Default `x-fault-caller`. */
  readonly callerHeader?: string;
  /**
   * Makes `If-Match` non-atomic, as a service that checks the version and
   * then writes: a PUT with `If-Match` the server refuses (412) is answered
   * 200 instead, with a made-up ETag, when another PUT to the same path with
   * the same `If-Match` arrived within `windowMs` of it and succeeded. So
   * every writer of a burst against one version is told it won, though the
   * bucket holds one of them. S3 and Azure (the `If-Match` header) only.
   */
  readonly nonAtomicIfMatch?: { readonly windowMs: number };
}

/** A request that changed the bucket (the server answered it 2xx). */
export interface WriteLogEntry {
  /** Order of the request among all requests the proxy saw (from 1). */
  readonly request: number;
  /** When the request arrived at the proxy (ms since epoch). */
  readonly startedAt: number;
  /** When the server's answer arrived at the proxy (ms since epoch). */
  readonly time: number;
  readonly method: string;
  /** The request path as sent (percent-encoded), without the query. */
  readonly path: string;
  /** The query string without `?`, empty when none. */
  readonly query: string;
  readonly status: number;
  /** The caller header's value; else the tag of the `urlFor` port it came through; else absent. */
  readonly caller?: string;
  /** True when the proxy then dropped the answer (`lostResponse`): applied, but the client saw an error. */
  readonly lost: boolean;
  /** True when the server refused it and `nonAtomicIfMatch` answered 200: the client was told it won. */
  readonly nonAtomic?: boolean;
}

export interface FaultProxy {
  /** `http://127.0.0.1:<port>`: point the adapter's endpoint here. */
  readonly url: string;
  /**
   * Another port of the same proxy (same schedule, counts, partition and
   * write log) whose requests are tagged `caller` in the write log unless
   * they carry the caller header. Give each process under test its own, to
   * tell their writes apart without their cooperation. One port per tag.
   */
  urlFor(caller: string): Promise<string>;
  /** Faults injected so far, by kind. */
  counts(): FaultCounts;
  /** Every fault injected so far, in order. */
  faults(): readonly FaultEvent[];
  /** Every request that changed the bucket, in the order the server answered. */
  writeLog(): readonly WriteLogEntry[];
  /** How many requests arrived so far. */
  requests(): number;
  /**
   * Starts (or moves the end of) a partition: until `untilMs` (ms since
   * epoch, `Date.now()` scale; `Infinity` for until further notice) every
   * request hangs unanswered; when it ends, the hung requests' connections
   * are destroyed. `false` ends the partition now.
   */
  setPartition(untilMs: number | false): void;
  /** `setPartition(Date.now() + durationMs)`. */
  partitionFor(durationMs: number): void;
  /** True while a partition holds requests. */
  partitioned(): boolean;
  /** Replaces the schedule; every rule's match count starts again. */
  setSchedule(schedule: FaultSchedule): void;
  /** Stops listening, destroys every connection (hung ones too) and releases timers. */
  close(): Promise<void>;
}

const WRITE_METHODS = new Set(['PUT', 'POST', 'PATCH', 'DELETE']);

type Flavor = 's3' | 'azure' | 'gcs';

function flavorOf(request: IncomingMessage, path: string): Flavor {
  if (/^\/(upload\/|download\/)?storage\/v1\//.test(path) || path.startsWith('/batch/')) {
    return 'gcs';
  }
  if (request.headers['x-ms-version'] !== undefined) return 'azure';
  return 's3';
}

interface MadeUpAnswer {
  readonly status: number;
  readonly code: string;
  readonly message: string;
}

const MADE_UP: Record<'error500' | 'error503' | 'conflict', MadeUpAnswer> = {
  error500: { status: 500, code: 'InternalError', message: 'injected fault: internal error' },
  error503: {
    status: 503,
    code: 'ServiceUnavailable',
    message: 'injected fault: service unavailable',
  },
  conflict: {
    status: 409,
    code: 'ConditionalRequestConflict',
    message: 'injected fault: a conflicting conditional operation is in progress',
  },
};

function answerBody(
  flavor: Flavor,
  answer: MadeUpAnswer,
  request: number,
): {
  readonly contentType: string;
  readonly body: string;
} {
  if (flavor === 'gcs') {
    return {
      contentType: 'application/json; charset=UTF-8',
      body: JSON.stringify({
        error: {
          code: answer.status,
          message: answer.message,
          errors: [{ reason: answer.code, message: answer.message }],
        },
      }),
    };
  }
  const azureCode =
    answer.status === 503 ? 'ServerBusy' : answer.status === 500 ? 'InternalError' : answer.code;
  const code = flavor === 'azure' ? azureCode : answer.code;
  return {
    contentType: 'application/xml',
    body: `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${code}</Code><Message>${answer.message}</Message><RequestId>fault-${request}</RequestId></Error>`,
  };
}

/** A 200 answer with an ETag no write has: what a non-atomic `If-Match` tells a writer that lost. */
function madeUpWin(): IncomingMessage {
  const answer = Readable.from([]) as unknown as IncomingMessage;
  const etag = `"${randomBytes(16).toString('hex')}"`;
  Object.assign(answer, {
    statusCode: 200,
    statusMessage: 'OK',
    rawHeaders: ['ETag', etag, 'Content-Length', '0', 'x-fault-injected', 'nonAtomicIfMatch'],
  });
  return answer;
}

/** A PUT with `If-Match` under `nonAtomicIfMatch`. */
interface ConditionalWrite {
  /** Its answer's status (0: none came); the first call counts. */
  settle(status: number): void;
  /** Whether another PUT of the burst (same path and `If-Match`, within the window) succeeded. */
  lostRace(): Promise<boolean>;
}

/** The PUTs with `If-Match` seen lately, to tell which ones raced one version. */
class ConditionalWrites {
  /** How long a seen write is kept beyond its window: the slowest answer a test waits for. */
  static readonly KEPT_MS = 60_000;
  readonly #windowMs: number | undefined;
  #seen: { path: string; ifMatch: string; at: number; status: Promise<number> }[] = [];

  constructor(windowMs: number | undefined) {
    if (windowMs !== undefined && !(Number.isFinite(windowMs) && windowMs > 0))
      throw new FaultScheduleError('nonAtomicIfMatch.windowMs must be a positive number of ms');
    this.#windowMs = windowMs;
  }

  arrived(method: string, path: string, ifMatch: unknown): ConditionalWrite | undefined {
    const windowMs = this.#windowMs;
    if (windowMs === undefined || method !== 'PUT' || typeof ifMatch !== 'string') return undefined;
    const at = Date.now();
    this.#seen = this.#seen.filter((seen) => at - seen.at <= windowMs + ConditionalWrites.KEPT_MS);
    let resolve: (status: number) => void = () => {};
    const status = new Promise<number>((settle) => {
      resolve = settle;
    });
    const entry = { path, ifMatch, at, status };
    this.#seen.push(entry);
    let settled = false;
    return {
      settle: (answered) => {
        if (settled) return;
        settled = true;
        resolve(answered);
      },
      lostRace: async () => {
        const burst = this.#seen.filter(
          (other) =>
            other !== entry &&
            other.path === path &&
            other.ifMatch === ifMatch &&
            Math.abs(other.at - at) <= windowMs,
        );
        const statuses = await Promise.all(burst.map((other) => other.status));
        return statuses.some((answered) => answered >= 200 && answered < 300);
      },
    };
  }
}

/** One listening port: its origin, and the caller tag of its requests (extra listeners only). */
interface Listener {
  readonly server: Server;
  readonly origin: string;
  readonly caller: string | undefined;
}

/** A request being held by a partition. */
interface HungRequest {
  readonly request: IncomingMessage;
  readonly response: ServerResponse;
}

/**
 * Starts the proxy on 127.0.0.1 with a free port.
 * @throws FaultScheduleError for a non-loopback or malformed target, a bad seed or schedule.
 */
export async function startFaultProxy(options: FaultProxyOptions): Promise<FaultProxy> {
  const target = parseLoopbackTarget(options.target, (message) => new FaultScheduleError(message));
  const runner = new ScheduleRunner(options.schedule, options.seed, {
    caseInsensitiveMethods: true,
  });
  const callerHeader = (options.callerHeader ?? 'x-fault-caller').toLowerCase();
  const agent = new Agent({ keepAlive: true, maxSockets: 64 });

  const counts = emptyCounts();
  const faults: FaultEvent[] = [];
  const writes: WriteLogEntry[] = [];
  const hung = new Set<HungRequest>();
  const timers = new Set<NodeJS.Timeout>();
  let requestCount = 0;
  let partitionUntil = Number.NEGATIVE_INFINITY;
  let partitionTimer: NodeJS.Timeout | undefined;
  let closed = false;
  const listeners = new Map<string | undefined, Listener>();
  const conditionalWrites = new ConditionalWrites(options.nonAtomicIfMatch?.windowMs);

  function appendLog(entry: object): void {
    if (options.log === undefined) return;
    appendFileSync(options.log, `${JSON.stringify(entry)}\n`);
  }

  function record(
    request: number,
    kind: FaultKind,
    method: string,
    path: string,
    rule: number,
    ms?: number,
  ): void {
    counts[kind] += 1;
    const event: FaultEvent =
      ms === undefined || !Number.isFinite(ms)
        ? { request, time: Date.now(), kind, method, path, rule }
        : { request, time: Date.now(), kind, method, path, rule, ms };
    faults.push(event);
    appendLog({ event: 'fault', ...event });
  }

  function later(ms: number, callback: () => void): NodeJS.Timeout {
    const timer = setTimeout(() => {
      timers.delete(timer);
      callback();
    }, ms);
    timers.add(timer);
    return timer;
  }

  function wait(ms: number): Promise<void> {
    return new Promise((resolve) => later(ms, resolve));
  }

  function isPartitioned(): boolean {
    return Date.now() < partitionUntil;
  }

  function releaseHung(): void {
    for (const entry of hung) {
      // The client sees its connection drop, as after a real partition heals
      // with the peer's state gone; the request never reached the server.
      entry.request.socket.destroy();
    }
    hung.clear();
  }

  function schedulePartitionEnd(): void {
    if (partitionTimer !== undefined) {
      clearTimeout(partitionTimer);
      timers.delete(partitionTimer);
      partitionTimer = undefined;
    }
    if (partitionUntil === Number.POSITIVE_INFINITY) return; // until further notice
    const remaining = partitionUntil - Date.now();
    if (remaining <= 0) {
      partitionUntil = Number.NEGATIVE_INFINITY;
      releaseHung();
      return;
    }
    partitionTimer = later(remaining, schedulePartitionEnd);
  }

  function setPartition(untilMs: number | false): void {
    if (untilMs !== false && (typeof untilMs !== 'number' || Number.isNaN(untilMs))) {
      throw new FaultScheduleError('setPartition takes a time in ms (Date.now() scale) or false');
    }
    partitionUntil = untilMs === false ? Number.NEGATIVE_INFINITY : untilMs;
    schedulePartitionEnd();
  }

  function hang(request: IncomingMessage, response: ServerResponse): void {
    const entry: HungRequest = { request, response };
    hung.add(entry);
    response.on('close', () => hung.delete(entry));
  }

  function answerMadeUp(
    request: IncomingMessage,
    response: ServerResponse,
    fault: 'error500' | 'error503' | 'conflict',
    sequence: number,
    path: string,
  ): void {
    const answer = MADE_UP[fault];
    const { contentType, body } = answerBody(flavorOf(request, path), answer, sequence);
    const send = () => {
      if (response.destroyed) return;
      const headers: OutgoingHttpHeaders = {
        'content-type': contentType,
        'x-fault-injected': fault,
      };
      if (fault === 'error503') headers['retry-after'] = '0';
      if (flavorOf(request, path) === 'azure') headers['x-ms-error-code'] = answer.code;
      response.writeHead(answer.status, headers);
      response.end(request.method === 'HEAD' ? undefined : body);
    };
    afterRequestBody(request, send);
  }

  function forward(
    listener: Listener,
    request: IncomingMessage,
    response: ServerResponse,
    sequence: number,
    startedAt: number,
    path: string,
    query: string,
    fault: TerminalFault | undefined,
  ): void {
    const method = request.method ?? 'GET';
    // A client that goes away (or whose answer is dropped) stops the upstream
    // exchange; a failure of the target is no injected fault: the client sees
    // its connection drop, as it would without the proxy.
    const upstream = forwardToTarget(target, agent, request, response);
    const conditional = conditionalWrites.arrived(method, path, request.headers['if-match']);
    upstream.on('close', () => conditional?.settle(0));
    upstream.on('response', async (served) => {
      let answer = served;
      conditional?.settle(served.statusCode ?? 502);
      if (
        conditional !== undefined &&
        served.statusCode === 412 &&
        (await conditional.lostRace())
      ) {
        served.resume();
        answer = madeUpWin();
      }
      const status = answer.statusCode ?? 502;
      const lost = fault?.kind === 'lostResponse';
      if (WRITE_METHODS.has(method) && status >= 200 && status < 300) {
        const callerValue = request.headers[callerHeader];
        const caller =
          (Array.isArray(callerValue) ? callerValue.join(',') : callerValue) ?? listener.caller;
        const entry: WriteLogEntry = {
          request: sequence,
          startedAt,
          time: Date.now(),
          method,
          path,
          query,
          status,
          ...(caller === undefined ? {} : { caller }),
          lost,
          ...(answer !== served ? { nonAtomic: true } : {}),
        };
        writes.push(entry);
        appendLog({ event: 'write', ...entry });
      }
      if (lost) {
        record(sequence, 'lostResponse', method, path, fault.rule);
        // The server applied the request; drain its answer so the upstream
        // connection stays reusable, and cut the client off before it sees any of it.
        answer.resume();
        request.socket.destroy();
        return;
      }
      // A Location naming the target (a GCS resumable-session URL) is made to
      // name the port the request came through, so follow-ups come back here.
      const responseHeaders = answerHeadersToRelay(answer.rawHeaders, (lower, value) =>
        lower === 'location' && value.startsWith(target.url.origin)
          ? listener.origin + value.slice(target.url.origin.length)
          : value,
      );
      response.writeHead(status, answer.statusMessage, responseHeaders);
      if (fault?.kind === 'stall') {
        record(sequence, 'stall', method, path, fault.rule, fault.stallMs);
        void relayWithStall(answer, response, fault.stallAfterBytes, fault.stallMs);
        return;
      }
      // pipeline, not pipe: an answer that breaks off mid-body must break
      // the client's connection too, not leave it waiting for the rest.
      pipeline(answer, response).catch(() => {
        // Either side went away; pipeline has destroyed both, which is all there is to do.
      });
    });
  }

  async function relayWithStall(
    answer: IncomingMessage,
    response: ServerResponse,
    afterBytes: number,
    stallMs: number,
  ): Promise<void> {
    response.flushHeaders();
    let delivered = 0;
    let stalled = false;
    const write = async (chunk: Uint8Array) => {
      if (chunk.byteLength === 0 || response.destroyed) return;
      if (!response.write(chunk)) {
        await new Promise<void>((resolve) => {
          response.once('drain', resolve);
          response.once('close', resolve);
        });
      }
    };
    try {
      if (afterBytes === 0) {
        stalled = true;
        await wait(stallMs);
      }
      for await (const chunk of answer as AsyncIterable<Buffer>) {
        if (response.destroyed) return;
        if (!stalled && delivered + chunk.byteLength >= afterBytes) {
          const head = chunk.subarray(0, afterBytes - delivered);
          await write(head);
          stalled = true;
          await wait(stallMs);
          await write(chunk.subarray(head.byteLength));
        } else {
          await write(chunk);
        }
        delivered += chunk.byteLength;
      }
      if (!stalled) await wait(stallMs); // the body was shorter than afterBytes: stall before its end
      if (!response.destroyed) response.end();
    } catch {
      // The upstream answer broke off mid-body: pass the break on to the client.
      response.destroy();
    }
  }

  async function handle(
    listener: Listener,
    request: IncomingMessage,
    response: ServerResponse,
  ): Promise<void> {
    const sequence = ++requestCount;
    const startedAt = Date.now();
    const method = request.method ?? 'GET';
    const rawUrl = request.url ?? '/';
    const queryAt = rawUrl.indexOf('?');
    const path = queryAt === -1 ? rawUrl : rawUrl.slice(0, queryAt);
    const query = queryAt === -1 ? '' : rawUrl.slice(queryAt + 1);
    request.socket.setNoDelay(true);
    let clientGone = false;
    response.once('close', () => {
      clientGone = true;
    });

    if (isPartitioned()) {
      record(sequence, 'partition', method, path, -1, partitionUntil - startedAt);
      hang(request, response);
      return;
    }
    const decision = runner.decide(method, path, query);
    for (const latency of decision.latencies) {
      record(sequence, 'latency', method, path, latency.rule, latency.ms);
    }
    if (decision.latencyMs > 0) {
      await wait(decision.latencyMs);
      // A client that gave up during the delay sent nothing on: forward nothing.
      if (clientGone || response.destroyed || closed) return;
      if (isPartitioned()) {
        record(sequence, 'partition', method, path, -1, partitionUntil - Date.now());
        hang(request, response);
        return;
      }
    }
    const fault = decision.fault;
    switch (fault?.kind) {
      case 'reset':
        record(sequence, 'reset', method, path, fault.rule);
        request.socket.destroy();
        return;
      case 'error500':
      case 'error503':
      case 'conflict':
        record(sequence, fault.kind, method, path, fault.rule);
        answerMadeUp(request, response, fault.kind, sequence, path);
        return;
      case 'partition':
        record(sequence, 'partition', method, path, fault.rule, fault.durationMs);
        setPartition(Date.now() + fault.durationMs);
        hang(request, response);
        return;
      default:
        forward(listener, request, response, sequence, startedAt, path, query, fault);
    }
  }

  async function listen(caller: string | undefined): Promise<Listener> {
    const existing = listeners.get(caller);
    if (existing !== undefined) return existing;
    // A request with `Expect: 100-continue` is told to continue at once (no
    // `checkContinue` handler): the proxy decides its fault after the headers.
    // No request timeout: a request held by a long partition must stay
    // hung (Node's default would answer 408 after 300 s).
    const server: Server = createServer({ keepAliveTimeout: 5_000, requestTimeout: 0 });
    const origin = await listenOnLoopback(server, 'fault proxy');
    const listener: Listener = { server, origin, caller };
    server.on('request', (request: IncomingMessage, response: ServerResponse) => {
      handle(listener, request, response).catch(() => {
        // Nothing in handle is expected to throw; if it does, the client sees
        // its connection drop rather than the proxy crashing the test run.
        request.socket.destroy();
      });
    });
    listeners.set(caller, listener);
    return listener;
  }

  const main = await listen(undefined);

  return {
    url: main.origin,
    urlFor: async (caller: string) => {
      if (closed) throw new Error('fault proxy: closed');
      if (typeof caller !== 'string' || caller === '') {
        throw new FaultScheduleError('urlFor takes a non-empty caller tag');
      }
      return (await listen(caller)).origin;
    },
    counts: () => ({ ...counts }),
    faults: () => [...faults],
    writeLog: () => [...writes],
    requests: () => requestCount,
    setPartition,
    partitionFor: (durationMs: number) => setPartition(Date.now() + durationMs),
    partitioned: isPartitioned,
    setSchedule: (schedule: FaultSchedule) => runner.replace(schedule),
    close: async () => {
      if (closed) return;
      closed = true;
      partitionUntil = Number.NEGATIVE_INFINITY;
      for (const timer of timers) clearTimeout(timer);
      timers.clear();
      releaseHung();
      const stopped = [...listeners.values()].map(
        ({ server }) => new Promise<void>((resolve) => server.close(() => resolve())),
      );
      for (const { server } of listeners.values()) server.closeAllConnections();
      agent.destroy();
      await Promise.all(stopped);
    },
  };
}
