/**
 * Store URLs, parsed without touching the network or loading any SDK:
 *
 * | URL | store |
 * | --- | --- |
 * | `s3://bucket/prefix?endpoint=…&region=…&forcePathStyle=true` | S3 and S3-compatible (R2, MinIO, …) |
 * | `az://container/prefix?account=…&endpoint=…` | Azure Blob Storage |
 * | `gs://bucket/prefix?endpoint=…&project=…` | Google Cloud Storage |
 * | `file:///absolute/path` | a local directory (FsStore); the prefix is `backup` |
 * | `memory:name` | in-process memory (tests only) |
 *
 * Credentials are never taken from a URL: a URL with a user or password part
 * is refused, so secrets cannot end up in shell history, process lists or logs.
 * They come from the environment or the SDKs' standard chains.
 */

export type StoreLocation =
  | {
      readonly scheme: 's3';
      readonly bucket: string;
      readonly prefix: string;
      readonly endpoint?: string;
      readonly region?: string;
      readonly forcePathStyle?: boolean;
    }
  | {
      readonly scheme: 'az';
      readonly container: string;
      readonly prefix: string;
      readonly account?: string;
      readonly endpoint?: string;
    }
  | {
      readonly scheme: 'gs';
      readonly bucket: string;
      readonly prefix: string;
      readonly endpoint?: string;
      readonly project?: string;
    }
  | { readonly scheme: 'file'; readonly root: string; readonly prefix: string }
  | { readonly scheme: 'memory'; readonly name: string; readonly prefix: string };

export const SUPPORTED_SCHEMES = ['s3', 'az', 'gs', 'file', 'memory'] as const;

/** The prefix used inside a `file://` directory and a `memory:` store. */
export const LOCAL_PREFIX = 'backup';

const QUERY_KEYS: Record<string, readonly string[]> = {
  s3: ['endpoint', 'region', 'forcePathStyle'],
  az: ['account', 'endpoint'],
  gs: ['endpoint', 'project'],
  file: [],
  memory: [],
};

export class StoreUrlError extends Error {
  readonly code = 'STORE_URL_INVALID';
  constructor(message: string) {
    super(message);
    this.name = 'StoreUrlError';
  }
}

/** Parses a store URL; throws {@link StoreUrlError} with a message naming the problem. */
export function parseStoreUrl(text: string): StoreLocation {
  const problem = (message: string) => new StoreUrlError(message);
  if (typeof text !== 'string' || text.trim() === '') throw problem('empty store URL');
  const schemeMatch = /^([a-zA-Z][a-zA-Z0-9+.-]*):/.exec(text);
  if (!schemeMatch)
    throw problem(
      `not a URL (expected one of ${SUPPORTED_SCHEMES.map((s) => `${s}:`).join(', ')})`,
    );
  const scheme = schemeMatch[1]!.toLowerCase();
  if (!(SUPPORTED_SCHEMES as readonly string[]).includes(scheme)) {
    throw problem(`unknown scheme "${schemeMatch[1]}"`);
  }
  if (scheme === 'memory') {
    const name = text.slice('memory:'.length).replace(/^\/+/, '') || 'default';
    return { scheme: 'memory', name, prefix: LOCAL_PREFIX };
  }
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw problem(`malformed ${scheme} URL`);
  }
  if (url.username !== '' || url.password !== '') {
    throw problem(
      'credentials in a store URL are not accepted; use the environment or the SDK credential chain',
    );
  }
  const allowed = QUERY_KEYS[scheme] ?? [];
  for (const key of url.searchParams.keys()) {
    if (!allowed.includes(key)) {
      throw problem(
        allowed.length === 0
          ? `${scheme} URLs take no options, got "${key}"`
          : `unknown option "${key}" for ${scheme} (known: ${allowed.join(', ')})`,
      );
    }
  }
  const option = (key: string) => url.searchParams.get(key) ?? undefined;
  if (scheme === 'file') {
    if (url.hostname !== '' && url.hostname !== 'localhost')
      throw problem('file URLs must be local (file:///path)');
    const root = decodeURIComponent(url.pathname);
    if (!root.startsWith('/') || root === '/')
      throw problem('file URLs need an absolute directory (file:///path/to/dir)');
    return { scheme: 'file', root: root.replace(/\/+$/, ''), prefix: LOCAL_PREFIX };
  }
  const container = url.hostname;
  if (container === '')
    throw problem(`${scheme} URL has no ${scheme === 'az' ? 'container' : 'bucket'}`);
  const prefix = decodeURIComponent(url.pathname).replace(/^\/+/, '').replace(/\/+$/, '');
  if (prefix === '')
    throw problem(
      `${scheme} URL needs a prefix after the ${scheme === 'az' ? 'container' : 'bucket'} (e.g. ${scheme}://name/db1)`,
    );
  const endpoint = option('endpoint');
  if (endpoint !== undefined) {
    // The endpoint's text is never echoed: it may carry a credential (a
    // user:password part, perhaps from a `${VAR}` in a config file).
    let parsed: URL | undefined;
    try {
      parsed = new URL(endpoint);
    } catch {
      parsed = undefined;
    }
    if (parsed && (parsed.username || parsed.password))
      throw problem('credentials in an endpoint are not accepted');
    if (!parsed || (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')) {
      throw problem(
        `endpoint must be an http(s) URL such as https://s3.example.com, got ${parsed ? `a ${parsed.protocol.slice(0, -1)}: URL` : 'text that is not a URL'}`,
      );
    }
  }
  if (scheme === 's3') {
    const pathStyle = option('forcePathStyle');
    if (pathStyle !== undefined && pathStyle !== 'true' && pathStyle !== 'false') {
      throw problem(`forcePathStyle must be true or false, got ${JSON.stringify(pathStyle)}`);
    }
    return {
      scheme: 's3',
      bucket: container,
      prefix,
      ...(endpoint !== undefined ? { endpoint } : {}),
      ...(option('region') !== undefined ? { region: option('region')! } : {}),
      ...(pathStyle !== undefined ? { forcePathStyle: pathStyle === 'true' } : {}),
    };
  }
  if (scheme === 'az') {
    return {
      scheme: 'az',
      container,
      prefix,
      ...(option('account') !== undefined ? { account: option('account')! } : {}),
      ...(endpoint !== undefined ? { endpoint } : {}),
    };
  }
  return {
    scheme: 'gs',
    bucket: container,
    prefix,
    ...(endpoint !== undefined ? { endpoint } : {}),
    ...(option('project') !== undefined ? { project: option('project')! } : {}),
  };
}

/** A URL for display: the location without options that could carry secrets (none can; still canonical). */
export function describeLocation(location: StoreLocation): string {
  switch (location.scheme) {
    case 's3':
      return `s3://${location.bucket}/${location.prefix}${location.endpoint ? ` (endpoint ${location.endpoint})` : ''}`;
    case 'az':
      return `az://${location.container}/${location.prefix}`;
    case 'gs':
      return `gs://${location.bucket}/${location.prefix}`;
    case 'file':
      return `file://${location.root}`;
    case 'memory':
      return `memory:${location.name}`;
  }
}
