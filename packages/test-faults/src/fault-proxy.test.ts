/**
 * The proxy against a small local HTTP target that records what reaches it:
 * forwarding, each fault kind, the write log and determinism. The same kinds
 * through the real store adapters and servers are in test/.
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type FaultProxy, type FaultProxyOptions, startFaultProxy } from './fault-proxy.ts';
import {
  type RecordingTarget,
  type SeenRequest,
  sendClosing as send,
  startRecordingTarget,
} from './recording-target.ts';
import type { FaultRule } from './schedule.ts';

let target: RecordingTarget;
let targetUrl: string;
let seen: SeenRequest[];

beforeAll(async () => {
  target = await startRecordingTarget(({ method, url, body }, _request, response) => {
    if (url.includes('refuse')) {
      response.writeHead(412).end('refused');
    } else if (url === '/redirect') {
      response.writeHead(201, { location: `${targetUrl}/session?id=1` }).end();
    } else if (url === '/body') {
      response.writeHead(200, { 'content-length': '10' }).end('0123456789');
    } else {
      response.writeHead(200, { 'content-type': 'application/json', 'x-target': 'yes' });
      response.end(JSON.stringify({ method, url, body }));
    }
  });
  ({ url: targetUrl, seen } = target);
});

afterAll(() => target.close());

afterEach(() => target.endTest());

async function proxyWith(
  rules: FaultRule[],
  extra: Partial<FaultProxyOptions> = {},
): Promise<FaultProxy> {
  return target.own(
    await startFaultProxy({ target: targetUrl, schedule: { rules }, seed: 3, ...extra }),
  );
}

describe('startFaultProxy', () => {
  it('refuses a target that is not on this machine', async () => {
    const schedule = { rules: [] };
    for (const bad of [
      'http://10.0.0.1:9000',
      'http://example.com',
      'https://127.0.0.1:1',
      'nope',
    ]) {
      await expect(startFaultProxy({ target: bad, schedule, seed: 1 })).rejects.toThrow(/target/);
    }
  });

  it('forwards method, path, query, headers (the Host too) and body unchanged', async () => {
    const proxy = await proxyWith([]);
    expect(proxy.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const response = await send(`${proxy.url}/bucket/a%2Fb?x-id=PutObject&partNumber=2`, {
      method: 'PUT',
      body: 'payload',
      headers: { 'x-amz-date': '20260101T000000Z', 'content-type': 'text/plain' },
    });
    expect(response.status).toBe(200);
    expect(response.headers.get('x-target')).toBe('yes');
    expect(await response.json()).toEqual({
      method: 'PUT',
      url: '/bucket/a%2Fb?x-id=PutObject&partNumber=2',
      body: 'payload',
    });
    expect(seen[0]!.headers.host).toBe(new URL(proxy.url).host);
    expect(seen[0]!.headers['x-amz-date']).toBe('20260101T000000Z');
    expect(proxy.requests()).toBe(1);
  });

  it('adds latency before forwarding', async () => {
    const proxy = await proxyWith([{ kind: 'latency', methods: ['GET'], latencyMs: 150 }]);
    const started = performance.now();
    const response = await send(`${proxy.url}/slow`);
    expect(response.status).toBe(200);
    expect(performance.now() - started).toBeGreaterThanOrEqual(140);
    expect(proxy.counts().latency).toBe(1);
  });

  it('resets the connection without forwarding', async () => {
    const proxy = await proxyWith([{ kind: 'reset', methods: ['PUT'] }]);
    await expect(send(`${proxy.url}/b/k`, { method: 'PUT', body: 'x' })).rejects.toThrow();
    expect(seen).toHaveLength(0);
    expect(proxy.counts().reset).toBe(1);
    expect(proxy.writeLog()).toEqual([]);
  });

  it('answers 500, 503 and 409 ConditionalRequestConflict itself, without forwarding', async () => {
    const proxy = await proxyWith([
      { kind: 'error500', path: '/five-hundred' },
      { kind: 'error503', path: '/five-oh-three' },
      { kind: 'conflict', path: '/conflict' },
    ]);
    const first = await send(`${proxy.url}/b/five-hundred`, { method: 'PUT', body: 'x' });
    const second = await send(`${proxy.url}/b/five-oh-three`);
    const third = await send(`${proxy.url}/b/conflict`, { method: 'PUT', body: 'x' });
    expect(first.status).toBe(500);
    expect(await first.text()).toContain('<Code>InternalError</Code>');
    expect(second.status).toBe(503);
    expect(third.status).toBe(409);
    expect(await third.text()).toContain('<Code>ConditionalRequestConflict</Code>');
    expect(seen).toHaveLength(0);
    expect(proxy.counts()).toMatchObject({ error500: 1, error503: 1, conflict: 1 });
  });

  it('answers GCS-shaped requests with a JSON error', async () => {
    const proxy = await proxyWith([{ kind: 'error503' }]);
    const response = await send(`${proxy.url}/storage/v1/b/bucket/o/key`);
    expect(response.status).toBe(503);
    expect(((await response.json()) as { error: { code: number } }).error.code).toBe(503);
  });

  it('forwards a lost response to the server and then drops the answer', async () => {
    const proxy = await proxyWith([{ kind: 'lostResponse', methods: ['PUT'] }]);
    await expect(
      send(`${proxy.url}/b/LEASE`, {
        method: 'PUT',
        body: 'mine',
        headers: { 'x-fault-caller': 'A' },
      }),
    ).rejects.toThrow();
    expect(seen.map((request) => [request.method, request.url, request.body])).toEqual([
      ['PUT', '/b/LEASE', 'mine'],
    ]);
    expect(proxy.counts().lostResponse).toBe(1);
    expect(proxy.writeLog()).toEqual([
      expect.objectContaining({
        method: 'PUT',
        path: '/b/LEASE',
        status: 200,
        caller: 'A',
        lost: true,
      }),
    ]);
  });

  it('sends the headers of a stalled answer at once and its body after the stall', async () => {
    const proxy = await proxyWith([{ kind: 'stall', stallMs: 300, stallAfterBytes: 4 }]);
    const started = performance.now();
    const response = await send(`${proxy.url}/body`);
    const headersAfter = performance.now() - started;
    const body = await response.text();
    expect(headersAfter).toBeLessThan(250);
    expect(performance.now() - started).toBeGreaterThanOrEqual(290);
    expect(body).toBe('0123456789');
    expect(proxy.counts().stall).toBe(1);
  });

  it('lets the client give up on a stalled body', async () => {
    const proxy = await proxyWith([{ kind: 'stall', stallMs: 5_000 }]);
    const response = await send(`${proxy.url}/body`, { signal: AbortSignal.timeout(200) });
    await expect(response.text()).rejects.toThrow();
  });

  it('hangs every request during a partition until the client aborts', async () => {
    const proxy = await proxyWith([]);
    proxy.setPartition(Number.POSITIVE_INFINITY);
    expect(proxy.partitioned()).toBe(true);
    const started = performance.now();
    await expect(send(`${proxy.url}/b/k`, { signal: AbortSignal.timeout(200) })).rejects.toThrow(
      /abort|timeout/i,
    );
    expect(performance.now() - started).toBeGreaterThanOrEqual(190);
    expect(seen).toHaveLength(0);
    proxy.setPartition(false);
    expect((await send(`${proxy.url}/b/k`)).status).toBe(200);
    expect(proxy.counts().partition).toBe(1);
  });

  it('drops the requests it held when setPartition(false) ends the partition', async () => {
    const proxy = await proxyWith([]);
    proxy.setPartition(Number.POSITIVE_INFINITY);
    const hung = send(`${proxy.url}/b/k`, { method: 'PUT', body: 'x' }).then(
      () => 'answered',
      () => 'dropped',
    );
    await new Promise((resolve) => setTimeout(resolve, 100));
    const started = performance.now();
    proxy.setPartition(false);
    expect(await hung).toBe('dropped');
    expect(performance.now() - started).toBeLessThan(1000);
    expect(proxy.partitioned()).toBe(false);
    expect(seen).toHaveLength(0);
  });

  it('starts a partition from the schedule and drops the hung requests when it ends', async () => {
    const proxy = await proxyWith([
      { kind: 'partition', methods: ['PUT'], durationMs: 300, limit: 1 },
    ]);
    const started = performance.now();
    const put = send(`${proxy.url}/b/k`, { method: 'PUT', body: 'x' });
    await new Promise((resolve) => setTimeout(resolve, 50));
    const get = send(`${proxy.url}/b/k`);
    const [putOutcome, getOutcome] = await Promise.allSettled([put, get]);
    expect(putOutcome.status).toBe('rejected');
    expect(getOutcome.status).toBe('rejected');
    expect(performance.now() - started).toBeGreaterThanOrEqual(290);
    expect(seen).toHaveLength(0);
    expect((await send(`${proxy.url}/b/k`, { method: 'PUT', body: 'y' })).status).toBe(200);
    expect(proxy.counts().partition).toBe(2);
  });

  it('logs exactly the writes the server applied, with the caller tag, to memory and file', async () => {
    const directory = mkdtempSync(join(tmpdir(), 'fault-proxy-'));
    const log = join(directory, 'faults.jsonl');
    const proxy = await proxyWith([{ kind: 'error503', path: '/injected' }], { log });
    const tag = { 'x-fault-caller': 'worker-1' };
    await send(`${proxy.url}/b/one`, { method: 'PUT', body: '1', headers: tag });
    await send(`${proxy.url}/b/one`); // a read changes nothing
    await send(`${proxy.url}/b/refuse`, { method: 'PUT', body: '2', headers: tag }); // 412 from the server
    await send(`${proxy.url}/b/injected`, { method: 'PUT', body: '3', headers: tag }); // never forwarded
    await send(`${proxy.url}/b/one`, { method: 'DELETE' });
    await send(`${proxy.url}/b/upload?uploads`, {
      method: 'POST',
      headers: { 'x-fault-caller': 'w2' },
    });
    const writes = proxy
      .writeLog()
      .map((entry) => [entry.method, entry.path, entry.query, entry.caller]);
    expect(writes).toEqual([
      ['PUT', '/b/one', '', 'worker-1'],
      ['DELETE', '/b/one', '', undefined],
      ['POST', '/b/upload', 'uploads', 'w2'],
    ]);
    const lines = readFileSync(log, 'utf8')
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    expect(lines.map((line) => line.event)).toEqual(['write', 'fault', 'write', 'write']);
    expect(lines[1]).toMatchObject({ kind: 'error503', method: 'PUT', path: '/b/injected' });
  });

  it('tags the writes that come through a per-caller port, sharing one schedule and write log', async () => {
    const proxy = await proxyWith([{ kind: 'error500', methods: ['PUT'], skip: 2, limit: 1 }]);
    const first = await proxy.urlFor('one');
    const second = await proxy.urlFor('two');
    expect(await proxy.urlFor('one')).toBe(first);
    expect(new Set([proxy.url, first, second]).size).toBe(3);
    await send(`${first}/b/k`, { method: 'PUT', body: '1' });
    await send(`${second}/b/k`, { method: 'PUT', body: '2' });
    const third = await send(`${first}/b/k`, { method: 'PUT', body: '3' }); // the third PUT overall
    await send(`${second}/b/k`, {
      method: 'PUT',
      body: '4',
      headers: { 'x-fault-caller': 'explicit' },
    });
    await send(`${proxy.url}/b/k`, { method: 'DELETE' });
    expect(third.status).toBe(500);
    expect(proxy.writeLog().map((entry) => entry.caller)).toEqual([
      'one',
      'two',
      'explicit',
      undefined,
    ]);
    expect(seen[0]!.headers.host).toBe(new URL(first).host);
  });

  it('rewrites a Location answer header that names the target, so follow-ups come back through it', async () => {
    const proxy = await proxyWith([]);
    const response = await send(`${proxy.url}/redirect`, { method: 'POST', redirect: 'manual' });
    expect(response.headers.get('location')).toBe(`${proxy.url}/session?id=1`);
  });

  it('injects the same faults for the same seed and request sequence', async () => {
    const rules: FaultRule[] = [
      { kind: 'error503', probability: 0.3 },
      { kind: 'conflict', methods: ['PUT'], probability: 0.3 },
    ];
    async function run(seed: number): Promise<string[]> {
      const proxy = await proxyWith(rules, { seed });
      const statuses: string[] = [];
      for (let index = 0; index < 30; index += 1) {
        const method = index % 3 === 0 ? 'GET' : 'PUT';
        const response = await send(`${proxy.url}/b/k${index % 4}`, {
          method,
          ...(method === 'PUT' ? { body: `${index}` } : {}),
        });
        statuses.push(`${method} ${response.status}`);
        await response.arrayBuffer();
      }
      expect(proxy.faults().map((fault) => fault.request)).toEqual(
        statuses.flatMap((status, index) => (status.endsWith(' 200') ? [] : [index + 1])),
      );
      return statuses;
    }
    const first = await run(21);
    expect(await run(21)).toEqual(first);
    expect(await run(22)).not.toEqual(first);
    expect(first.some((status) => status.endsWith('503'))).toBe(true);
    expect(first.some((status) => status.endsWith('409'))).toBe(true);
  });

  it('destroys hung requests and stops listening on close', async () => {
    const proxy = await startFaultProxy({ target: targetUrl, schedule: { rules: [] }, seed: 1 });
    proxy.setPartition(Number.POSITIVE_INFINITY);
    const hung = send(`${proxy.url}/b/k`);
    await new Promise((resolve) => setTimeout(resolve, 50));
    await proxy.close();
    await expect(hung).rejects.toThrow();
    await expect(send(`${proxy.url}/b/k`)).rejects.toThrow();
  });
});

describe('nonAtomicIfMatch', () => {
  /** A target whose `If-Match` is atomic: the first PUT against a version wins, the rest get 412. */
  async function atomicTarget(): Promise<RecordingTarget> {
    let version = 'v1';
    let next = 1;
    return startRecordingTarget(({ method, headers }, _request, response) => {
      if (method === 'PUT' && headers['if-match'] === version) {
        next += 1;
        version = `v${next}`;
        response.writeHead(200, { etag: version }).end();
      } else if (method === 'PUT') response.writeHead(412).end('refused');
      else response.writeHead(200).end();
    });
  }

  async function burst(url: string, writers: number): Promise<number[]> {
    const answers = await Promise.all(
      Array.from({ length: writers }, (_, index) =>
        send(`${url}/obj`, { method: 'PUT', headers: { 'if-match': 'v1' }, body: `w${index}` }),
      ),
    );
    return answers.map((answer) => answer.status).sort();
  }

  it('tells every writer of a burst against one version that it won; the server applied one', async () => {
    const server = await atomicTarget();
    const proxy = await startFaultProxy({
      target: server.url,
      schedule: { rules: [] },
      seed: 1,
      nonAtomicIfMatch: { windowMs: 500 },
    });
    try {
      expect(await burst(proxy.url, 4)).toEqual([200, 200, 200, 200]);
      expect(server.seen.filter((seen) => seen.method === 'PUT')).toHaveLength(4);
      const log = proxy.writeLog();
      expect(log).toHaveLength(4);
      expect(log.filter((entry) => entry.nonAtomic === true)).toHaveLength(3);
      // A write after the window against the same stale version is refused, as by the server.
      await new Promise((resolve) => setTimeout(resolve, 600));
      expect(await burst(proxy.url, 1)).toEqual([412]);
    } finally {
      await proxy.close();
      await server.close();
    }
  });

  it('without the mode, one writer of the burst wins and the rest are refused', async () => {
    const server = await atomicTarget();
    const proxy = await startFaultProxy({ target: server.url, schedule: { rules: [] }, seed: 1 });
    try {
      expect(await burst(proxy.url, 4)).toEqual([200, 412, 412, 412]);
      expect(proxy.writeLog().some((entry) => entry.nonAtomic === true)).toBe(false);
    } finally {
      await proxy.close();
      await server.close();
    }
  });

  it('refuses a window that is not a positive number', async () => {
    await expect(
      startFaultProxy({
        target: targetUrl,
        schedule: { rules: [] },
        seed: 1,
        nonAtomicIfMatch: { windowMs: 0 },
      }),
    ).rejects.toThrow(/nonAtomicIfMatch.windowMs/);
  });
});
