/**
 * The intercepting proxy against a small local target that records what
 * reaches it: unchanged forwarding, canned answers that never reach the
 * target, what is reported (header names, never values), and the refusal of
 * a target off this machine.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  type AnsweredRequest,
  type InterceptingProxy,
  InterceptingProxyError,
  type InterceptingProxyOptions,
  startInterceptingProxy,
} from './intercepting-proxy.ts';
import {
  type RecordingTarget,
  type SeenRequest,
  sendClosing as send,
  startRecordingTarget,
} from './recording-target.ts';

let target: RecordingTarget;
let targetUrl: string;
let seen: SeenRequest[];

beforeAll(async () => {
  target = await startRecordingTarget(({ method, url, body }, request, response) => {
    if (url === '/broken') {
      request.socket.destroy();
      return;
    }
    response.writeHead(url.includes('refuse') ? 412 : 200, {
      'content-type': 'application/json',
      'x-target': 'yes',
    });
    response.end(JSON.stringify({ method, url, body }));
  });
  ({ url: targetUrl, seen } = target);
});

afterAll(() => target.close());

afterEach(() => target.endTest());

async function proxyWith(
  extra: Omit<InterceptingProxyOptions, 'target'> = {},
): Promise<{ proxy: InterceptingProxy; answered: AnsweredRequest[] }> {
  const answered: AnsweredRequest[] = [];
  const proxy = target.own(
    await startInterceptingProxy({
      target: targetUrl,
      onAnswered: (entry) => answered.push(entry),
      ...extra,
    }),
  );
  return { proxy, answered };
}

describe('startInterceptingProxy', () => {
  it('refuses a target that is not a loopback http origin, with a typed error naming it', async () => {
    for (const bad of [
      'http://10.0.0.1:9000',
      'https://127.0.0.1:1',
      'http://127.0.0.1:1/p',
      'nope',
    ]) {
      const attempt = startInterceptingProxy({ target: bad });
      await expect(attempt).rejects.toBeInstanceOf(InterceptingProxyError);
      await expect(attempt).rejects.toThrow(/target/);
    }
  });

  it('forwards method, path, query, headers (the Host too) and body unchanged, and reports header names only', async () => {
    const { proxy, answered } = await proxyWith();
    expect(proxy.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const response = await send(`${proxy.url}/bucket/a%2Fb?x-id=PutObject&partNumber=2`, {
      method: 'PUT',
      body: 'payload',
      headers: {
        authorization: 'AWS4-HMAC-SHA256 secret-signature',
        'x-amz-date': '20260101T000000Z',
      },
    });
    expect(response.status).toBe(200);
    expect(response.headers.get('x-target')).toBe('yes');
    expect(await response.json()).toEqual({
      method: 'PUT',
      url: '/bucket/a%2Fb?x-id=PutObject&partNumber=2',
      body: 'payload',
    });
    expect(seen[0]!.headers.host).toBe(new URL(proxy.url).host);
    expect(seen[0]!.headers.authorization).toBe('AWS4-HMAC-SHA256 secret-signature');
    // Hop-by-hop: the client's own 'close' stays between it and the proxy.
    expect(seen[0]!.headers.connection).not.toBe('close');
    expect(answered).toEqual([
      {
        request: 1,
        method: 'PUT',
        path: '/bucket/a%2Fb',
        query: 'x-id=PutObject&partNumber=2',
        headerNames: expect.arrayContaining(['authorization', 'host', 'x-amz-date']),
        status: 200,
        intercepted: false,
      },
    ]);
    expect([...answered[0]!.headerNames]).toEqual([...answered[0]!.headerNames].sort());
    expect(JSON.stringify(answered)).not.toContain('secret-signature');
  });

  it('reports the status the target answered', async () => {
    const { proxy, answered } = await proxyWith();
    expect((await send(`${proxy.url}/b/refuse`, { method: 'PUT', body: 'x' })).status).toBe(412);
    expect(answered.map((entry) => [entry.status, entry.intercepted])).toEqual([[412, false]]);
  });

  it('sends a canned answer itself, after reading the body, and the target never sees the request', async () => {
    const { proxy, answered } = await proxyWith({
      intercept: (request) =>
        request.method !== 'GET' && request.headerNames.includes('x-refuse-me')
          ? { status: 501, headers: { 'content-type': 'application/xml' }, body: '<Error/>' }
          : undefined,
    });
    const refused = await send(`${proxy.url}/b/k?q=1`, {
      method: 'PUT',
      body: 'x'.repeat(256 * 1024),
      headers: { 'x-refuse-me': 'value' },
    });
    expect(refused.status).toBe(501);
    expect(refused.headers.get('content-type')).toBe('application/xml');
    expect(await refused.text()).toBe('<Error/>');
    const head = await send(`${proxy.url}/b/k`, {
      method: 'HEAD',
      headers: { 'x-refuse-me': 'v' },
    });
    expect(head.status).toBe(501);
    expect(await head.text()).toBe('');
    const passed = await send(`${proxy.url}/b/k`, { headers: { 'x-refuse-me': 'v' } });
    expect(passed.status).toBe(200);
    expect(seen.map((request) => [request.method, request.url])).toEqual([['GET', '/b/k']]);
    expect(
      answered.map((entry) => [
        entry.request,
        entry.method,
        entry.query,
        entry.status,
        entry.intercepted,
      ]),
    ).toEqual([
      [1, 'PUT', 'q=1', 501, true],
      [2, 'HEAD', '', 501, true],
      [3, 'GET', '', 200, false],
    ]);
  });

  it('drops the client connection when the target fails, and reports nothing for it', async () => {
    const { proxy, answered } = await proxyWith();
    await expect(send(`${proxy.url}/broken`)).rejects.toThrow();
    expect(seen).toHaveLength(1);
    expect(answered).toEqual([]);
  });
});
