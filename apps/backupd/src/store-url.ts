/**
 * Store URLs (`s3://`, `az://`, `gs://`, `file://` or a plain absolute
 * path, `memory:`), parsed without touching the network or loading any SDK;
 * the forms and their options are the README's "Store URLs" table.
 * Credentials are never taken from a URL, so they cannot reach shell
 * history, process lists or logs. A relative `file:` URL or a `file://host/`
 * one is refused rather than read as WHATWG parsing reads it (under the
 * filesystem root, or on another machine); a plain relative path is the
 * command line's working directory's ({@link commandLineUrl}).
 */
import { isAbsolute, resolve } from 'node:path';

export type StoreLocation =
  | {
      readonly scheme: 's3';
      readonly bucket: string;
      readonly prefix: string;
      readonly endpoint?: string;
      readonly region?: string;
      readonly forcePathStyle?: boolean;
      readonly checksums?: 'when-required' | 'when-supported';
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
  s3: ['endpoint', 'region', 'forcePathStyle', 'checksums'],
  az: ['account', 'endpoint'],
  gs: ['endpoint', 'project'],
  file: [],
  memory: [],
};

export type StoreUrlErrorCode = 'STORE_URL_INVALID' | 'STORE_URL_FILE_NOT_ABSOLUTE';

/** A store URL that cannot be used; the command line reports it as a usage error (exit 2). */
export class StoreUrlError extends Error {
  /** Whether the same call, made again later, may succeed with nothing else changed. */
  get retryable(): boolean {
    return false;
  }

  readonly code: StoreUrlErrorCode;
  constructor(message: string, code: StoreUrlErrorCode = 'STORE_URL_INVALID') {
    super(message);
    this.name = 'StoreUrlError';
    this.code = code;
  }
}

/**
 * A `file:` URL (or `file` location) that does not name an absolute local
 * directory: relative (`file:rel`, `file:./x`, `file:../x`) or on a host other
 * than the local one (`file://host/x`). Nothing is created for it.
 */
export class FileUrlNotAbsoluteError extends StoreUrlError {
  /** The URL as given. */
  readonly url: string;
  constructor(url: string, problem: string) {
    super(
      `${JSON.stringify(url)} ${problem}; use file:///absolute/path or a plain absolute path such as /absolute/path`,
      'STORE_URL_FILE_NOT_ABSOLUTE',
    );
    this.name = 'FileUrlNotAbsoluteError';
    this.url = url;
  }
}

/**
 * The directory a `file:` URL names, checked on the text as given: WHATWG URL
 * parsing turns `file:rel` into `/rel` and `file:../x` into `/x`, so the
 * parsed pathname alone cannot tell a relative URL from an absolute one.
 * RFC 8089's absolute forms are `file:/path`, `file:///path` and
 * `file://localhost/path`.
 */
function fileUrlRoot(text: string, url: URL): string {
  const rest = text.slice('file:'.length);
  if (rest.startsWith('//')) {
    const pathStart = rest.indexOf('/', 2);
    const authority = pathStart === -1 ? rest.slice(2) : rest.slice(2, pathStart);
    if (authority !== '' && authority.toLowerCase() !== 'localhost')
      throw new FileUrlNotAbsoluteError(
        text,
        `names the host "${authority}"; a file URL must name a directory on this machine (a directory relative to here is not a file URL)`,
      );
  } else if (!rest.startsWith('/')) {
    throw new FileUrlNotAbsoluteError(
      text,
      `is a relative file URL: it would name ${url.pathname}, under the filesystem root, not a directory relative to here`,
    );
  }
  // The text's form was checked above; the parser's view must agree (it also
  // strips tabs and newlines, and reads backslashes as slashes).
  if (url.hostname !== '' && url.hostname !== 'localhost')
    throw new FileUrlNotAbsoluteError(text, `names the host "${url.hostname}"`);
  let root: string;
  try {
    root = decodeURIComponent(url.pathname);
  } catch {
    throw new StoreUrlError(`malformed file URL ${JSON.stringify(text)}: bad percent-encoding`);
  }
  return checkedRoot(root, text);
}

function checkedRoot(root: string, text: string): string {
  if (!isAbsolute(root)) throw new FileUrlNotAbsoluteError(text, 'is not an absolute directory');
  if (root.includes('\0'))
    throw new StoreUrlError(`file location ${JSON.stringify(text)} contains a NUL character`);
  const trimmed = root.replace(/\/+$/, '');
  if (trimmed === '')
    throw new StoreUrlError(
      'the filesystem root cannot be the backup directory; name a directory (file:///path/to/dir)',
    );
  return trimmed;
}

/**
 * A store URL as given on the command line: a plain relative path (no
 * scheme) is resolved against `cwd`, the caller's working directory; every
 * other text, relative `file:` URLs included, is returned as it is.
 */
export function commandLineUrl(text: string, cwd: string): string {
  const plainRelative = text.trim() !== '' && !text.startsWith('/') && !text.includes(':');
  return plainRelative ? resolve(cwd, text) : text;
}

/** Parses a store URL; throws {@link StoreUrlError} with a message naming the problem. */
export function parseStoreUrl(text: string): StoreLocation {
  const problem = (message: string) => new StoreUrlError(message);
  if (typeof text !== 'string' || text.trim() === '') throw problem('empty store URL');
  if (text.startsWith('/'))
    return { scheme: 'file', root: checkedRoot(text, text), prefix: LOCAL_PREFIX };
  const schemeMatch = /^([a-zA-Z][a-zA-Z0-9+.-]*):/.exec(text);
  if (!schemeMatch && !text.includes(':'))
    throw problem(
      `${JSON.stringify(text)} is a relative path; name a local directory absolutely: /absolute/path or file:///absolute/path`,
    );
  if (!schemeMatch)
    throw problem(
      `not a URL or an absolute path (expected one of ${SUPPORTED_SCHEMES.map((s) => `${s}:`).join(', ')}, or /absolute/path for a local directory)`,
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
  for (const key of new Set(url.searchParams.keys())) {
    if (!allowed.includes(key)) {
      throw problem(
        allowed.length === 0
          ? `${scheme} URLs take no options, got "${key}"`
          : `unknown option "${key}" for ${scheme} (known: ${allowed.join(', ')})`,
      );
    }
    if (url.searchParams.getAll(key).length > 1)
      throw problem(`option "${key}" is given more than once; give it once`);
  }
  const option = (key: string) => url.searchParams.get(key) ?? undefined;
  if (scheme === 'file')
    return { scheme: 'file', root: fileUrlRoot(text, url), prefix: LOCAL_PREFIX };
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
    const checksums = option('checksums');
    if (
      checksums !== undefined &&
      checksums !== 'when-required' &&
      checksums !== 'when-supported'
    ) {
      throw problem(
        `checksums must be when-required or when-supported, got ${JSON.stringify(checksums)}`,
      );
    }
    return {
      scheme: 's3',
      bucket: container,
      prefix,
      ...(endpoint !== undefined ? { endpoint } : {}),
      ...(option('region') !== undefined ? { region: option('region')! } : {}),
      ...(pathStyle !== undefined ? { forcePathStyle: pathStyle === 'true' } : {}),
      ...(checksums !== undefined ? { checksums } : {}),
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
