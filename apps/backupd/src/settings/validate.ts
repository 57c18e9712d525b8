/**
 * Checks a config document (after `${VAR}`) by its rows: every problem as
 * `path: problem`, all at once. A refused setting counts as its default, so
 * the checks after it still run.
 */
import { isAbsolute, resolve } from 'node:path';
import { describe } from '../duration.ts';
import { parseStoreUrl, type StoreLocation, StoreUrlError } from '../store-url.ts';
import { DATABASE_SETTINGS, settingsOf } from './database-settings.ts';
import { validateDirectory } from './directory.ts';
import { isMapping } from './document.ts';
import { validateEncryption } from './encryption.ts';
import { ENCRYPTION_SETTINGS, keysAt } from './other-settings.ts';
import type {
  BackupdConfig,
  DatabaseConfig,
  DatabaseSettings,
  SourceKind,
} from './parsed-config.ts';
import { cpuPriority, listenAddress } from './values.ts';

const TOP_KEYS = [...keysAt('top'), 'databases'];
const DATABASE_KEYS = [
  ...keysAt('database'),
  ...new Set(
    [
      ...DATABASE_SETTINGS.map((setting) => setting.key),
      ...ENCRYPTION_SETTINGS.flatMap((setting) => setting.keys),
    ].map((key) => key.split('.')[0]!),
  ),
];

// Problems come out in the order they always have: these four first, then the rows' order.
const CHECKED_FIRST = ['interval', 'restorePointInterval', 'shutdownGrace', 'leaseTtl'];
const CHECK_ORDER = [
  ...CHECKED_FIRST.map((key) => DATABASE_SETTINGS.find((setting) => setting.key === key)!),
  ...DATABASE_SETTINGS.filter((setting) => !CHECKED_FIRST.includes(setting.key)),
];

export function validateConfig(
  document: unknown,
  baseDir: string,
  problems: string[],
): BackupdConfig | undefined {
  if (!isMapping(document)) {
    problems.push(`(root): must be a mapping with a "databases" list, got ${describe(document)}`);
    return undefined;
  }
  unknownKeys(document, TOP_KEYS, '', problems);
  const listen =
    document.listen === undefined ? undefined : listenAddress(document.listen, 'listen', problems);
  const priority =
    document.cpuPriority === undefined
      ? undefined
      : cpuPriority(document.cpuPriority, 'cpuPriority', problems);
  const list = document.databases;
  if (!Array.isArray(list) || list.length === 0) {
    problems.push(
      `databases: must be a non-empty list, got ${list === undefined ? 'nothing' : describe(list)}`,
    );
    return undefined;
  }
  const databases: DatabaseConfig[] = [];
  const seenPaths = new Map<string, number>();
  const seenUrls = new Map<string, string>();
  list.forEach((entry, index) => {
    const path = `databases[${index}]`;
    const database = validateDatabase(entry, path, baseDir, problems);
    if (!database) return;
    const earlier = seenPaths.get(database.path);
    if (earlier !== undefined)
      problems.push(`${path}.path: same database as databases[${earlier}] (${database.path})`);
    seenPaths.set(database.path, index);
    for (const url of database.urls) {
      const previous = seenUrls.get(url.text);
      if (previous !== undefined)
        problems.push(
          `${path}.url: ${url.text} is also used by ${previous}; one prefix holds one database`,
        );
      seenUrls.set(url.text, path);
    }
    databases.push(database);
  });
  return {
    ...(listen ? { listen } : {}),
    ...(priority ? { cpuPriority: priority } : {}),
    databases,
  };
}

function validateDatabase(
  entry: unknown,
  path: string,
  baseDir: string,
  problems: string[],
): DatabaseConfig | undefined {
  if (!isMapping(entry)) {
    problems.push(`${path}: must be a mapping, got ${describe(entry)}`);
    return undefined;
  }
  const before = problems.length;
  unknownKeys(entry, DATABASE_KEYS, path, problems);
  const directory = validateDirectory(entry, path, baseDir, problems);
  const databasePath =
    entry.directory !== undefined
      ? (directory?.path ?? '')
      : validatePath(entry.path, path, baseDir, problems);
  const type = validateType(entry.type, path, problems);
  const urls = validateUrls(entry, path, type, problems);
  const settings = validateSettings(entry, path, problems);
  const encryption = validateEncryption(entry.encryption, `${path}.encryption`, baseDir, problems);
  if (problems.length > before) return undefined;
  return {
    path: databasePath,
    type,
    urls,
    ...settings,
    ...(encryption ? { encryption } : {}),
    ...(directory ? { directory: directory.directory } : {}),
  };
}

/** Each row's setting in one entry; a mapping such as `checkpoint` is checked when first read. */
function validateSettings(
  entry: Record<string, unknown>,
  path: string,
  problems: string[],
): DatabaseSettings {
  const settled = new Map<string, unknown>();
  const mappings = new Map<string, Record<string, unknown> | undefined>();
  const lookUp = (key: string): unknown => {
    const [outer, inner] = key.split('.') as [string, string?];
    if (inner === undefined) return entry[key];
    if (!mappings.has(outer))
      mappings.set(outer, checkedMapping(entry[outer], `${path}.${outer}`, problems));
    return mappings.get(outer)?.[inner];
  };
  for (const setting of CHECK_ORDER) {
    const at = `${path}.${setting.key}`;
    const given = lookUp(setting.key);
    const value =
      given === undefined
        ? setting.default
        : (setting.value.parse(given, at, problems) ?? setting.default);
    const other = setting.greaterThan;
    if (other !== undefined && (value as number) <= (settled.get(other) as number))
      problems.push(
        `${at}: must be greater than ${other.split('.').pop()} (${settled.get(other)})`,
      );
    settled.set(setting.key, value);
  }
  return settingsOf((setting) => settled.get(setting.key));
}

/** A mapping of settings such as `checkpoint`, or undefined when absent or refused. */
function checkedMapping(
  value: unknown,
  at: string,
  problems: string[],
): Record<string, unknown> | undefined {
  if (value === undefined) return undefined;
  if (!isMapping(value)) {
    problems.push(`${at}: must be a mapping, got ${describe(value)}`);
    return undefined;
  }
  const prefix = `${at.slice(at.lastIndexOf('.') + 1)}.`;
  const known = DATABASE_SETTINGS.flatMap((setting) =>
    setting.key.startsWith(prefix) ? [setting.key.slice(prefix.length)] : [],
  );
  unknownKeys(value, known, at, problems);
  return value;
}

function unknownKeys(
  value: Record<string, unknown>,
  known: readonly string[],
  path: string,
  problems: string[],
): void {
  for (const key of Object.keys(value)) {
    if (!known.includes(key))
      problems.push(
        `${path ? `${path}.` : ''}${key}: unknown setting (known: ${known.join(', ')})`,
      );
  }
}

function validatePath(value: unknown, path: string, baseDir: string, problems: string[]): string {
  if (typeof value !== 'string' || value.trim() === '') {
    problems.push(`${path}.path: required, the database file to back up (or "directory")`);
    return '';
  }
  return isAbsolute(value) ? value : resolve(baseDir, value);
}

function validateType(value: unknown, path: string, problems: string[]): SourceKind {
  if (value === undefined || value === 'sqlite' || value === 'framed') return value ?? 'sqlite';
  problems.push(`${path}.type: must be "sqlite" or "framed", got ${describe(value)}`);
  return 'sqlite';
}

/** `url` or `urls`, each parsed; a SQLite database keeps one. */
function validateUrls(
  entry: Record<string, unknown>,
  path: string,
  type: SourceKind,
  problems: string[],
): DatabaseConfig['urls'] {
  const urlTexts: { text: unknown; at: string }[] = [];
  if (entry.url !== undefined && entry.urls !== undefined) {
    problems.push(`${path}: give either "url" or "urls", not both`);
  } else if (entry.url !== undefined) {
    urlTexts.push({ text: entry.url, at: `${path}.url` });
  } else if (Array.isArray(entry.urls) && entry.urls.length > 0) {
    for (const [i, text] of entry.urls.entries()) urlTexts.push({ text, at: `${path}.urls[${i}]` });
  } else if (entry.urls !== undefined) {
    problems.push(`${path}.urls: must be a non-empty list of store URLs`);
  } else {
    problems.push(
      `${path}.url: required, where to back up to (e.g. s3://bucket/prefix or file:///backups/app)`,
    );
  }
  if (type === 'sqlite' && urlTexts.length > 1) {
    // One SQLite database is read by one source per process; several replicas
    // of it would need several, which would release each other's locks.
    problems.push(
      `${path}.urls: a SQLite database has one replica URL (several are not supported yet)`,
    );
    urlTexts.length = 1;
  }
  const urls: { text: string; location: StoreLocation }[] = [];
  for (const { text, at } of urlTexts) {
    if (typeof text !== 'string') {
      problems.push(`${at}: must be a store URL, got ${describe(text)}`);
      continue;
    }
    try {
      urls.push({ text, location: parseStoreUrl(text) });
    } catch (error) {
      if (error instanceof StoreUrlError) problems.push(`${at}: ${error.message}`);
      else throw error;
    }
  }
  return urls;
}
