// A small object store as an outside author would write one: a tiny HTTP
// object server (in memory, one process) and the ObjectStore that talks to it.
// `startTinyServer({ ignoreIfMatchOnDelete: true })` starts a server with one
// precondition broken, as some services have it: the suite must fail then.
import { once } from 'node:events';
import { createServer, request as httpRequest } from 'node:http';
import {
  AlreadyExistsError,
  chunksOf,
  compareKeys,
  PreconditionFailedError,
  StoreError,
  validateKey,
} from '@x/store';

export async function startTinyServer({ ignoreIfMatchOnDelete = false } = {}) {
  const objects = new Map(); // key -> { body, etag }
  let writes = 0;
  const server = createServer((request, response) => {
    const url = new URL(request.url, 'http://tiny');
    const reply = (status, headers = {}, body) => {
      response.writeHead(status, headers);
      response.end(body);
    };
    if (url.pathname === '/list') {
      const prefix = url.searchParams.get('prefix') ?? '';
      const delimiter = url.searchParams.get('delimiter') ?? '';
      const after = url.searchParams.get('after');
      const limit = Number(url.searchParams.get('limit') ?? 1000);
      const entries = new Map(); // key or rolled-up prefix -> entry, for one listing
      for (const [key, object] of objects) {
        if (!key.startsWith(prefix)) continue;
        const cut = delimiter ? key.indexOf(delimiter, prefix.length) : -1;
        if (cut >= 0) {
          const rolled = key.slice(0, cut + delimiter.length);
          entries.set(rolled, { prefix: rolled });
        } else entries.set(key, { key, size: object.body.byteLength, etag: object.etag });
      }
      const sorted = [...entries.entries()]
        .sort(([a], [b]) => compareKeys(a, b))
        .filter(([name]) => after === null || compareKeys(name, after) > 0);
      const page = sorted.slice(0, limit);
      const next = sorted.length > limit ? page.at(-1)[0] : null;
      return reply(
        200,
        { 'content-type': 'application/json' },
        JSON.stringify({ entries: page.map(([, entry]) => entry), next }),
      );
    }
    const key = decodeURIComponent(url.pathname.slice('/o/'.length));
    const current = objects.get(key);
    const ifMatch = request.headers['if-match'];
    const stale = ifMatch !== undefined && current?.etag !== ifMatch;
    if (request.method === 'GET' || request.method === 'HEAD') {
      if (!current) return reply(404);
      const headers = { etag: current.etag, 'content-length': current.body.byteLength };
      return reply(200, headers, request.method === 'GET' ? current.body : undefined);
    }
    if (request.method === 'DELETE') {
      if (stale && !ignoreIfMatchOnDelete) return reply(412);
      objects.delete(key);
      return reply(204);
    }
    if (request.method === 'PUT') {
      const parts = [];
      request.on('data', (part) => parts.push(part));
      // Only a complete body is stored; a request cut off midway leaves nothing.
      request.on('end', () => {
        // Checked when the body is complete, so a create is atomic at completion.
        const now = objects.get(key);
        if (request.headers['if-none-match'] === '*' && now) return reply(412);
        if (ifMatch !== undefined && now?.etag !== ifMatch) return reply(412);
        const body = Buffer.concat(parts);
        const etag = `"${++writes}"`;
        objects.set(key, { body, etag });
        reply(200, { etag, 'x-size': body.byteLength });
      });
      return;
    }
    reply(405);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    close: async () => {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };
}

export class TinyHttpStore {
  capabilities = {
    conditionalPut: true,
    conditionalDelete: true,
    multipartCreate: true,
    distinctVersions: true,
  };

  constructor(baseUrl) {
    this.baseUrl = baseUrl;
    this.description = `tiny-http ${baseUrl}`;
  }

  async get(key, options = {}) {
    const response = await this.#send('GET', key, {}, options.signal);
    if (response.status === 404) return null;
    this.#expect(response, 200, 'get', key);
    const body = new Uint8Array(await response.arrayBuffer());
    return { key, size: body.byteLength, version: { etag: response.headers.get('etag') }, body };
  }

  async getStream(key, options = {}) {
    const response = await this.#send('GET', key, {}, options.signal);
    if (response.status === 404) return null;
    this.#expect(response, 200, 'getStream', key);
    const size = Number(response.headers.get('content-length'));
    return { key, size, version: { etag: response.headers.get('etag') }, body: response.body };
  }

  async head(key, options = {}) {
    const response = await this.#send('HEAD', key, {}, options.signal);
    if (response.status === 404) return null;
    this.#expect(response, 200, 'head', key);
    const size = Number(response.headers.get('content-length'));
    return { key, size, version: { etag: response.headers.get('etag') } };
  }

  async put(key, body, options = {}) {
    const { version } = await this.#write(key, body, options.mode ?? 'overwrite', options.signal);
    return { version };
  }

  async upload(key, source, options = {}) {
    validateKey(key);
    const { signal } = options;
    signal?.throwIfAborted();
    const mode = options.mode ?? 'overwrite';
    // Streamed: each chunk is written to the request as it comes, waiting
    // for the socket to drain, so memory stays at a few chunks.
    const request = httpRequest(`${this.baseUrl}/o/${encodeURIComponent(key)}`, {
      method: 'PUT',
      headers: mode === 'create' ? { 'if-none-match': '*' } : {},
      signal,
    });
    const answered = once(request, 'response');
    answered.catch(() => {}); // an abort is reported below
    try {
      for await (const chunk of chunksOf(source)) {
        signal?.throwIfAborted();
        if (!request.write(chunk)) await once(request, 'drain', { signal });
      }
      request.end();
      const [response] = await answered;
      response.resume();
      if (response.statusCode === 412) throw new AlreadyExistsError(key);
      if (response.statusCode !== 200)
        throw new StoreError(`${this.description}: upload ${key}: HTTP ${response.statusCode}`);
      const size = Number(response.headers['x-size']);
      return { version: { etag: response.headers.etag }, size };
    } catch (error) {
      request.destroy(); // a cut-off request stores nothing
      if (signal?.aborted) throw signal.reason;
      if (error instanceof StoreError) throw error;
      throw new StoreError(`${this.description}: upload ${key} failed`, { cause: error });
    }
  }

  async delete(key, options = {}) {
    const headers = options.ifMatch ? { 'if-match': options.ifMatch.etag ?? '' } : {};
    const response = await this.#send('DELETE', key, { headers }, options.signal);
    if (response.status === 412) throw new PreconditionFailedError(key);
    this.#expect(response, 204, 'delete', key);
  }

  async list(prefix, options = {}) {
    const objects = [];
    const commonPrefixes = [];
    for await (const page of this.listPages(prefix, options)) {
      objects.push(...page.objects);
      commonPrefixes.push(...page.commonPrefixes);
    }
    return { objects, commonPrefixes };
  }

  async *listPages(prefix, options = {}) {
    let after = null;
    do {
      const query = new URLSearchParams({ prefix, limit: String(options.pageSize ?? 1000) });
      if (options.delimiter) query.set('delimiter', options.delimiter);
      if (after !== null) query.set('after', after);
      const response = await this.#fetch(`${this.baseUrl}/list?${query}`, {}, options.signal);
      this.#expect(response, 200, 'list', prefix);
      const { entries, next } = await response.json();
      const objects = entries
        .filter((entry) => entry.key !== undefined)
        .map(({ key, size, etag }) => ({ key, size, version: { etag } }));
      const commonPrefixes = entries.filter((entry) => entry.prefix).map((entry) => entry.prefix);
      if (objects.length + commonPrefixes.length > 0) yield { objects, commonPrefixes };
      after = next;
    } while (after !== null);
  }

  async #write(key, body, mode, signal) {
    const headers = {};
    if (mode === 'create') headers['if-none-match'] = '*';
    else if (mode !== 'overwrite') headers['if-match'] = mode.ifMatch.etag ?? '';
    const response = await this.#send('PUT', key, { headers, body }, signal);
    if (response.status === 412)
      throw mode === 'create' ? new AlreadyExistsError(key) : new PreconditionFailedError(key);
    this.#expect(response, 200, 'put', key);
    const size = Number(response.headers.get('x-size'));
    return { version: { etag: response.headers.get('etag') }, size };
  }

  #send(method, key, init, signal) {
    validateKey(key); // InvalidKeyError before any request, as every store does
    return this.#fetch(`${this.baseUrl}/o/${encodeURIComponent(key)}`, { method, ...init }, signal);
  }

  async #fetch(url, init, signal) {
    try {
      return await fetch(url, { ...init, signal });
    } catch (error) {
      if (signal?.aborted) throw signal.reason;
      throw new StoreError(`${this.description}: ${init.method ?? 'GET'} failed`, { cause: error });
    }
  }

  #expect(response, status, operation, key) {
    if (response.status !== status)
      throw new StoreError(`${this.description}: ${operation} ${key}: HTTP ${response.status}`, {
        key,
      });
  }
}
