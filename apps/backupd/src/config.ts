/**
 * The configuration file (YAML) and the single-database environment.
 *
 * Every problem is reported as `path: problem`, e.g.
 * `databases[1].url: unknown scheme "s4"`, and all problems are reported at
 * once. Strings may use `${VAR}` (or `${VAR:-default}`) to read the
 * environment; `$${` writes a literal `${`. Credentials are never settings:
 * they come from the environment or the SDKs' standard chains.
 */
import { isAbsolute, resolve } from 'node:path';
import {
  compactionLevelsProblem,
  DEFAULT_COMPACTION_LEVELS_MS,
  DEFAULT_MANIFEST_INTERVAL_MS,
  DEFAULT_RETAIN_FOR_MS,
  DEFAULT_SHUTDOWN_GRACE_MS,
  DEFAULT_SNAPSHOT_INTERVAL_MS,
  DEFAULT_SNAPSHOT_LOG_FACTOR,
  DEFAULT_WAL_INTERVAL_MS,
  MAX_COMPACTION_LEVELS,
} from '@x/backup-worker';
import { CPU_PRIORITIES, type CpuPriority, isCpuPriority } from '@x/cpu-priority';
import { DEFAULT_TTL_S, MAX_SANE_TTL_S, MIN_TTL_S } from '@x/lease';
import {
  DEFAULT_PASSIVE_CHECKPOINT_PAGES,
  DEFAULT_TRUNCATE_CHECKPOINT_PAGES,
} from '@x/source-sqlite';
import { parse as parseYaml } from 'yaml';
import {
  bareNumberProblem,
  describe,
  formatDuration,
  isBareNumber,
  parseDuration,
} from './duration.ts';
import { parseStoreUrl, type StoreLocation, StoreUrlError } from './store-url.ts';

export type SourceKind = 'sqlite' | 'framed';

/**
 * Which restore points are kept: a window by time (every one created in the
 * last `windowMs`, and the one before, which holds the window's start) or a
 * count (the newest `count`).
 */
export type Retention = { readonly windowMs: number } | { readonly count: number };

export interface CheckpointSettings {
  /** WAL frames landed since backupd's last copy after which it runs a PASSIVE checkpoint. */
  readonly passivePages: number;
  /** WAL frames after which backupd restarts the WAL under a brief write lock. */
  readonly truncatePages: number;
  /**
   * Hold SQLite's checkpoint lock while commits land on a WAL past SQLite's
   * auto-checkpoint size (1000 frames), so the application's own per-commit checkpoints answer busy at
   * once (see the SQLite README); false lets them run.
   */
  readonly holdLock: boolean;
}

export interface DatabaseConfig {
  /** Absolute path of the database file (sqlite) or store directory (framed). */
  readonly path: string;
  readonly type: SourceKind;
  /** One or more replica locations; each gets its own worker and lease. */
  readonly urls: readonly { readonly text: string; readonly location: StoreLocation }[];
  readonly intervalMs: number;
  /** Least time between two restore points while WAL keeps shipping (and at shutdown, always one). */
  readonly restorePointIntervalMs: number;
  /** Restore points kept: a window by time, or a count (see {@link retentionOptions}). */
  readonly retention: Retention;
  readonly leaseTtlSeconds: number;
  readonly shutdownGraceMs: number;
  /** A new generation on a fresh snapshot once the current one is this old; 0: never by age. */
  readonly snapshotIntervalMs: number;
  /** Also once the stored log the current generation's restore point names exceeds this many times the database; 0: never by size. */
  readonly snapshotLogFactor: number;
  /**
   * Commit-log compaction: each level's window, in ms, ascending, each a
   * whole multiple of the one before; `[]`: no compaction (`compaction: off`).
   */
  readonly compactionLevelsMs: readonly number[];
  readonly checkpoint: CheckpointSettings;
  /** false runs the lease best-effort on services without conditional writes (logged as a warning). */
  readonly conditional: boolean;
}

export interface BackupdConfig {
  readonly listen?: string;
  /** backupd's CPU priority (see cpu-priority.ts); absent: `DEFAULT_CPU_PRIORITY`. */
  readonly cpuPriority?: CpuPriority;
  readonly databases: readonly DatabaseConfig[];
}

/**
 * What a setting left out becomes. Each field is its YAML key with its unit
 * (`leaseTtl` → `leaseTtlSeconds`). Every value is the owning package's own
 * default, imported: the lease TTL from @x/lease, the intervals, retention,
 * grace and the SQLite tap's checkpoint thresholds from @x/backup-worker.
 */
export const DEFAULTS = {
  intervalMs: DEFAULT_WAL_INTERVAL_MS,
  restorePointIntervalMs: DEFAULT_MANIFEST_INTERVAL_MS,
  // A window by time, as an operator expects of "retention"; a count is
  // still accepted when given.
  retention: { windowMs: DEFAULT_RETAIN_FOR_MS } as Retention,
  leaseTtlSeconds: DEFAULT_TTL_S,
  shutdownGraceMs: DEFAULT_SHUTDOWN_GRACE_MS,
  snapshotIntervalMs: DEFAULT_SNAPSHOT_INTERVAL_MS,
  snapshotLogFactor: DEFAULT_SNAPSHOT_LOG_FACTOR,
  // The worker's own default: the recommended levels, 30 s, 5 min, 1 h.
  compactionLevelsMs: DEFAULT_COMPACTION_LEVELS_MS,
  // The SQLite tap's own defaults: below SQLite's auto-checkpoint (1000
  // pages), so the application's commits do not copy in their own path.
  checkpoint: {
    passivePages: DEFAULT_PASSIVE_CHECKPOINT_PAGES,
    truncatePages: DEFAULT_TRUNCATE_CHECKPOINT_PAGES,
    holdLock: true,
  },
  conditional: true,
} as const;

/**
 * The least (and most) each setting accepts, by the same field names. The
 * lease TTL's are @x/lease's: its shortest TTL, and the longest it trusts
 * a record with (a longer one makes the record suspect to every reader).
 */
export const BOUNDS = {
  intervalMs: { min: 100 },
  restorePointIntervalMs: { min: 100 },
  // A window shorter than a minute would keep little beyond the newest
  // restore point; ten years is beyond any backup's life.
  retention: { minCount: 1, minWindowMs: 60_000, maxWindowMs: 3650 * 86_400_000 },
  leaseTtlSeconds: { min: MIN_TTL_S, max: MAX_SANE_TTL_S },
  shutdownGraceMs: { min: 0 },
  // 0 turns a trigger off; a snapshot more often than every minute would
  // upload the database again and again for little history.
  snapshotIntervalMs: { min: 60_000 },
  // Below 1, every generation would be cut before its WAL reached the
  // database's own size: more snapshot bytes than log bytes.
  snapshotLogFactor: { min: 1, max: 1000 },
  // Each level's window at least a second (the worker's own floor), at most
  // a day (the duration parser's), and at most the levels a key can name.
  compactionLevelsMs: { min: 1000, maxLevels: MAX_COMPACTION_LEVELS },
  checkpointPages: { min: 1 },
} as const;

/**
 * How a database setting is read from its environment variable in the
 * one-database mode: a duration (a bare number refused, naming the
 * variable), durations (comma-separated, each as a duration, or `off`),
 * digits (a number when all digits, else the text, which validation names),
 * a number, or a switch (`off` and `false` turn it off).
 */
type EnvironmentReading = 'duration' | 'durations' | 'digits' | 'number' | 'switch';

export interface DatabaseSetting {
  /** The YAML key under `databases[i]`, dotted when nested. */
  readonly key: string;
  /** Its field in {@link DatabaseConfig} (and in {@link DEFAULTS}): the key with its unit. */
  readonly field:
    | Exclude<keyof DatabaseConfig, 'path' | 'type' | 'urls' | 'checkpoint'>
    | `checkpoint.${keyof CheckpointSettings}`;
  readonly reading: EnvironmentReading;
  /**
   * The option of @x/backup-worker it becomes (daemon.ts and sqlite-source.ts
   * pass it): its owner and name, or names when the value's form chooses.
   */
  readonly workerOption: string;
}

/** Every per-database setting with a default, in the order the help lists their variables. */
export const DATABASE_SETTINGS: readonly DatabaseSetting[] = [
  {
    key: 'interval',
    field: 'intervalMs',
    reading: 'duration',
    workerOption: 'BackupWorker walIntervalMs',
  },
  {
    key: 'restorePointInterval',
    field: 'restorePointIntervalMs',
    reading: 'duration',
    workerOption: 'BackupWorker manifestIntervalMs',
  },
  // A duration becomes `retainFor`, a count `retain`: all digits is a count
  // (as it was before durations were accepted), anything else is read as a duration.
  {
    key: 'retention',
    field: 'retention',
    reading: 'digits',
    workerOption: 'BackupWorker retainFor retain',
  },
  {
    key: 'leaseTtl',
    field: 'leaseTtlSeconds',
    reading: 'duration',
    workerOption: 'BackupWorker leaseTtlSeconds',
  },
  {
    key: 'shutdownGrace',
    field: 'shutdownGraceMs',
    reading: 'duration',
    workerOption: 'BackupWorker shutdownGraceMs',
  },
  {
    key: 'snapshotInterval',
    field: 'snapshotIntervalMs',
    reading: 'duration',
    workerOption: 'BackupWorker snapshotIntervalMs',
  },
  {
    key: 'snapshotLogFactor',
    field: 'snapshotLogFactor',
    reading: 'number',
    workerOption: 'BackupWorker snapshotLogFactor',
  },
  {
    key: 'compaction',
    field: 'compactionLevelsMs',
    reading: 'durations',
    workerOption: 'BackupWorker compactionLevels',
  },
  {
    key: 'checkpoint.passivePages',
    field: 'checkpoint.passivePages',
    reading: 'number',
    workerOption: 'SqliteSource passiveCheckpointPages',
  },
  {
    key: 'checkpoint.truncatePages',
    field: 'checkpoint.truncatePages',
    reading: 'number',
    workerOption: 'SqliteSource truncateCheckpointPages',
  },
  {
    key: 'checkpoint.holdLock',
    field: 'checkpoint.holdLock',
    reading: 'switch',
    workerOption: 'SqliteSource holdCheckpointLock',
  },
  {
    key: 'conditional',
    field: 'conditional',
    reading: 'switch',
    workerOption: 'BackupWorker conditional',
  },
];

/** A setting's environment variable: `BACKUPD_` and its key in capitals (`leaseTtl` → `BACKUPD_LEASE_TTL`). */
export function environmentVariable(key: string): string {
  return `BACKUPD_${key
    .replace(/\./g, '_')
    .replace(/([a-z0-9])([A-Z])/g, '$1_$2')
    .toUpperCase()}`;
}

export class ConfigError extends Error {
  /** Whether the same call, made again later, may succeed with nothing else changed. */
  get retryable(): boolean {
    return false;
  }

  readonly code = 'CONFIG_INVALID';
  readonly problems: readonly string[];
  constructor(problems: readonly string[], source: string) {
    super(`invalid configuration in ${source}:\n  ${problems.join('\n  ')}`);
    this.name = 'ConfigError';
    this.problems = problems;
  }
}

type Env = Readonly<Record<string, string | undefined>>;

const TOP_KEYS = ['listen', 'cpuPriority', 'databases'];

/** Sets `cpuPriority` in either mode, over the config file's. */
const CPU_PRIORITY_ENV = environmentVariable('cpuPriority');
const DATABASE_KEYS = [
  'path',
  'type',
  'url',
  'urls',
  ...new Set(DATABASE_SETTINGS.map((setting) => setting.key.split('.')[0]!)),
];
const CHECKPOINT_KEYS = DATABASE_SETTINGS.flatMap((setting) =>
  setting.key.startsWith('checkpoint.') ? [setting.key.slice('checkpoint.'.length)] : [],
);

/** Parses and validates a config file's text. `baseDir` resolves relative database paths. */
export function parseConfig(
  text: string,
  options: { env: Env; baseDir: string; source?: string },
): BackupdConfig {
  const source = options.source ?? 'config';
  let document: unknown;
  try {
    document = parseYaml(text, { maxAliasCount: 100 });
  } catch (error) {
    throw new ConfigError([`not valid YAML: ${(error as Error).message.split('\n')[0]}`], source);
  }
  const problems: string[] = [];
  const expanded = expandEnvironment(document, '', options.env, problems);
  const config = validateConfig(expanded, options.baseDir, problems);
  const cpuPriority = cpuPriorityFromEnv(options.env, problems);
  if (problems.length > 0 || !config) throw new ConfigError(problems, source);
  return cpuPriority ? { ...config, cpuPriority } : config;
}

function cpuPriorityFromEnv(env: Env, problems: string[]): CpuPriority | undefined {
  const value = env[CPU_PRIORITY_ENV];
  if (value === undefined || value === '') return undefined;
  if (isCpuPriority(value)) return value;
  problems.push(`${CPU_PRIORITY_ENV}: ${cpuPriorityProblem(value)}`);
  return undefined;
}

function cpuPriorityProblem(value: unknown): string {
  return `must be ${CPU_PRIORITIES.map((name) => `"${name}"`).join(', ')}, got ${describe(value)}`;
}

/**
 * The single-database case from flags and the environment: one variable per
 * {@link DATABASE_SETTINGS} entry, named by {@link environmentVariable}
 * (BACKUPD_INTERVAL, BACKUPD_LEASE_TTL, …), and BACKUPD_CPU_PRIORITY (which
 * a config file's setting also yields to).
 */
export function singleDatabaseConfig(
  database: { path: string; url: string; type?: SourceKind },
  options: { env: Env; baseDir: string; listen?: string },
): BackupdConfig {
  const env = options.env;
  const raw: Record<string, unknown> = { path: database.path, url: database.url };
  if (database.type) raw.type = database.type;
  const problems: string[] = [];
  for (const setting of DATABASE_SETTINGS) {
    const name = environmentVariable(setting.key);
    const value = readEnvironment(setting.reading, name, env[name], problems);
    if (value !== undefined) setKey(raw, setting.key, value);
  }
  const document = { databases: [raw], ...(options.listen ? { listen: options.listen } : {}) };
  const config = validateConfig(document, options.baseDir, problems);
  const cpuPriority = cpuPriorityFromEnv(env, problems);
  if (problems.length > 0 || !config)
    throw new ConfigError(problems, 'command line and environment');
  return cpuPriority ? { ...config, cpuPriority } : config;
}

/** One variable's value as a config value, or undefined when it is unset (or refused: see `problems`). */
function readEnvironment(
  reading: EnvironmentReading,
  name: string,
  value: string | undefined,
  problems: string[],
): unknown {
  if (value === undefined) return undefined;
  switch (reading) {
    case 'switch':
      return value !== 'off' && value !== 'false';
    case 'number':
      return value === '' ? undefined : Number(value);
    case 'digits':
      return value === '' ? undefined : /^\d+$/.test(value) ? Number(value) : value;
    case 'duration':
      // A bare number is named by its variable: the operator set
      // BACKUPD_LEASE_TTL, not databases[0].leaseTtl.
      if (isBareNumber(value)) problems.push(`${name}: ${bareNumberProblem(value.trim())}`);
      return value === '' || isBareNumber(value) ? undefined : value;
    case 'durations': {
      // `off`, or the list as the YAML would give it: `30s,5m,1h`.
      if (value.trim() === '') return undefined;
      if (value.trim() === 'off') return 'off';
      const items = value.split(',').map((item) => item.trim());
      const bare = items.filter((item) => isBareNumber(item));
      for (const item of bare) problems.push(`${name}: ${bareNumberProblem(item)}`);
      return bare.length > 0 ? undefined : items;
    }
  }
}

/** Sets a dotted key (`checkpoint.passivePages`) in a document. */
function setKey(document: Record<string, unknown>, key: string, value: unknown): void {
  const [head, ...rest] = key.split('.');
  if (head === undefined) return;
  if (rest.length === 0) {
    document[head] = value;
    return;
  }
  const inner = document[head];
  const mapping: Record<string, unknown> = isMapping(inner) ? inner : {};
  document[head] = mapping;
  setKey(mapping, rest.join('.'), value);
}

function expandEnvironment(value: unknown, path: string, env: Env, problems: string[]): unknown {
  if (typeof value === 'string') {
    return value.replace(
      /\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g,
      (whole, name?: string, fallback?: string) => {
        if (whole === '$${') return '${';
        const found = env[name!];
        if (found !== undefined && found !== '') return found;
        if (fallback !== undefined) return fallback;
        problems.push(`${path || '(root)'}: environment variable "${name}" is not set`);
        return '';
      },
    );
  }
  if (Array.isArray(value))
    return value.map((item, index) => expandEnvironment(item, `${path}[${index}]`, env, problems));
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [key, item] of Object.entries(value)) {
      out[key] = expandEnvironment(item, path ? `${path}.${key}` : key, env, problems);
    }
    return out;
  }
  return value;
}

function isMapping(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
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

function validateConfig(
  document: unknown,
  baseDir: string,
  problems: string[],
): BackupdConfig | undefined {
  if (!isMapping(document)) {
    problems.push(`(root): must be a mapping with a "databases" list, got ${describe(document)}`);
    return undefined;
  }
  unknownKeys(document, TOP_KEYS, '', problems);
  let listen: string | undefined;
  if (document.listen !== undefined) {
    if (typeof document.listen !== 'string' || !/^[^\s:]*:\d{1,5}$/.test(document.listen)) {
      problems.push(
        `listen: must be "host:port" such as "127.0.0.1:9090", got ${describe(document.listen)}`,
      );
    } else listen = document.listen;
  }
  let cpuPriority: CpuPriority | undefined;
  if (document.cpuPriority !== undefined) {
    if (isCpuPriority(document.cpuPriority)) cpuPriority = document.cpuPriority;
    else problems.push(`cpuPriority: ${cpuPriorityProblem(document.cpuPriority)}`);
  }
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
  return { ...(listen ? { listen } : {}), ...(cpuPriority ? { cpuPriority } : {}), databases };
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
  // In this order, so problems are reported in the order of the README.
  const databasePath = validatePath(entry.path, path, baseDir, problems);
  const type = validateType(entry.type, path, problems);
  const urls = validateUrls(entry, path, type, problems);
  const timings = validateTimings(entry, path, problems);
  const retention = validateRetention(entry.retention, `${path}.retention`, problems);
  const snapshots = validateSnapshots(entry, path, problems);
  const compactionLevelsMs = validateCompaction(entry.compaction, `${path}.compaction`, problems);
  const checkpoint = validateCheckpoint(entry.checkpoint, `${path}.checkpoint`, problems);
  const conditional = trueOrFalse(
    entry.conditional,
    `${path}.conditional`,
    DEFAULTS.conditional,
    problems,
  );
  if (problems.length > before) return undefined;
  return {
    path: databasePath,
    type,
    urls,
    ...timings,
    retention,
    ...snapshots,
    compactionLevelsMs,
    checkpoint,
    conditional,
  };
}

function validatePath(value: unknown, path: string, baseDir: string, problems: string[]): string {
  if (typeof value !== 'string' || value.trim() === '') {
    problems.push(`${path}.path: required, the database file to back up`);
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

/** The duration settings, each bounded by {@link BOUNDS}; a refused one is its default (and a problem). */
function validateTimings(
  entry: Record<string, unknown>,
  path: string,
  problems: string[],
): Pick<
  DatabaseConfig,
  'intervalMs' | 'restorePointIntervalMs' | 'leaseTtlSeconds' | 'shutdownGraceMs'
> {
  const duration = (key: string, fallback: number, min: number): number => {
    const value = entry[key];
    if (value === undefined) return fallback;
    const parsed = parseDuration(value);
    if (typeof parsed === 'string') {
      problems.push(`${path}.${key}: ${parsed}`);
      return fallback;
    }
    if (parsed < min) {
      problems.push(`${path}.${key}: must be at least ${min}ms`);
      return fallback;
    }
    return parsed;
  };
  const intervalMs = duration('interval', DEFAULTS.intervalMs, BOUNDS.intervalMs.min);
  const restorePointIntervalMs = duration(
    'restorePointInterval',
    DEFAULTS.restorePointIntervalMs,
    BOUNDS.restorePointIntervalMs.min,
  );
  const shutdownGraceMs = duration(
    'shutdownGrace',
    DEFAULTS.shutdownGraceMs,
    BOUNDS.shutdownGraceMs.min,
  );
  // The lease counts whole seconds; the duration is read in milliseconds.
  const leaseTtlSeconds =
    duration('leaseTtl', DEFAULTS.leaseTtlSeconds * 1000, BOUNDS.leaseTtlSeconds.min * 1000) / 1000;
  if (leaseTtlSeconds > BOUNDS.leaseTtlSeconds.max)
    problems.push(
      `${path}.leaseTtl: must be at most ${formatDuration(BOUNDS.leaseTtlSeconds.max * 1000)}`,
    );
  return {
    intervalMs,
    restorePointIntervalMs,
    leaseTtlSeconds: Math.round(leaseTtlSeconds),
    shutdownGraceMs,
  };
}

const DAY_MS = 86_400_000;

/** What `retention` accepts, for its refusals. */
function retentionForms(): string {
  const { minCount, minWindowMs, maxWindowMs } = BOUNDS.retention;
  return `a window such as "24h", "7d" or "90m" (${formatDuration(minWindowMs)} to ${maxWindowMs / DAY_MS}d) or a count of restore points (a whole number, at least ${minCount})`;
}

/**
 * `retention`: a duration (a window; units up to days) or a count (a whole
 * number, or text of digits, as the environment gives it: a bare integer was
 * a count before durations were accepted, and still is). A refused one is
 * the default (and a problem).
 */
function validateRetention(value: unknown, at: string, problems: string[]): Retention {
  if (value === undefined) return DEFAULTS.retention;
  const { minCount, minWindowMs, maxWindowMs } = BOUNDS.retention;
  const digits = typeof value === 'string' && /^\d+$/.test(value.trim());
  if (typeof value === 'number' || digits) {
    const count = Number(value);
    if (Number.isSafeInteger(count) && count >= minCount) return { count };
  } else if (typeof value === 'string' && !isBareNumber(value)) {
    // Days allowed; the window's own bounds are checked here.
    const windowMs = parseDuration(value, { days: true });
    if (typeof windowMs === 'number') {
      if (windowMs >= minWindowMs && windowMs <= maxWindowMs) return { windowMs };
      problems.push(
        `${at}: a window must be from ${formatDuration(minWindowMs)} to ${maxWindowMs / DAY_MS}d, got ${describe(value)}`,
      );
      return DEFAULTS.retention;
    }
  }
  problems.push(`${at}: must be ${retentionForms()}, got ${describe(value)}`);
  return DEFAULTS.retention;
}

/** The worker options a {@link Retention} becomes: `retainFor` for a window, `retain` for a count. */
export function retentionOptions(retention: Retention): { retain?: number; retainFor?: number } {
  return 'count' in retention ? { retain: retention.count } : { retainFor: retention.windowMs };
}

function wholeNumber(
  value: unknown,
  at: string,
  fallback: number,
  min: number,
  problems: string[],
): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min) {
    problems.push(`${at}: must be a whole number of at least ${min}, got ${describe(value)}`);
    return fallback;
  }
  return value;
}

/**
 * `snapshotInterval` (a duration of at least a minute, units up to days, or
 * `0s` to turn the age
 * trigger off) and `snapshotLogFactor` (a number from 1 to 1000, or 0 to turn
 * the size trigger off). A refused one is its default (and a problem).
 */
function validateSnapshots(
  entry: Record<string, unknown>,
  path: string,
  problems: string[],
): Pick<DatabaseConfig, 'snapshotIntervalMs' | 'snapshotLogFactor'> {
  let snapshotIntervalMs: number = DEFAULTS.snapshotIntervalMs;
  if (entry.snapshotInterval !== undefined) {
    const parsed = parseDuration(entry.snapshotInterval, { days: true });
    const { min } = BOUNDS.snapshotIntervalMs;
    if (typeof parsed === 'string') problems.push(`${path}.snapshotInterval: ${parsed}`);
    else if (parsed !== 0 && parsed < min)
      problems.push(
        `${path}.snapshotInterval: must be at least ${formatDuration(min)}, or 0s to snapshot only by size`,
      );
    else snapshotIntervalMs = parsed;
  }
  let snapshotLogFactor: number = DEFAULTS.snapshotLogFactor;
  const factor = entry.snapshotLogFactor;
  if (factor !== undefined) {
    const { min, max } = BOUNDS.snapshotLogFactor;
    if (
      typeof factor !== 'number' ||
      !Number.isFinite(factor) ||
      (factor !== 0 && (factor < min || factor > max))
    )
      problems.push(
        `${path}.snapshotLogFactor: must be a number from ${min} to ${max}, or 0 to snapshot only by age, got ${describe(factor)}`,
      );
    else snapshotLogFactor = factor;
  }
  return { snapshotIntervalMs, snapshotLogFactor };
}

/** What `compaction` accepts, for its refusals. */
const COMPACTION_FORMS =
  'a list of durations such as [30s, 5m, 1h] (ascending, each a whole multiple of the one before), or off';

/**
 * `compaction`: the levels' windows, a list of durations (each 1s … 24h),
 * each a whole multiple of the one before (so a window of one level holds
 * whole windows of the level below), checked by the worker's own
 * `compactionLevelsProblem` (ascending, at most {@link MAX_COMPACTION_LEVELS})
 * after the item-by-item refusals here. `off` (or `[]`): no compaction. A refused one
 * is the default (and a problem).
 */
function validateCompaction(value: unknown, at: string, problems: string[]): readonly number[] {
  if (value === undefined) return DEFAULTS.compactionLevelsMs;
  if (value === 'off') return [];
  if (!Array.isArray(value)) {
    problems.push(`${at}: must be ${COMPACTION_FORMS}, got ${describe(value)}`);
    return DEFAULTS.compactionLevelsMs;
  }
  const { min } = BOUNDS.compactionLevelsMs;
  const levelsMs: number[] = [];
  const before = problems.length;
  value.forEach((item, index) => {
    const parsed = parseDuration(item);
    if (typeof parsed === 'string') problems.push(`${at}[${index}]: ${parsed}`);
    else if (parsed < min)
      problems.push(
        `${at}[${index}]: must be at least ${formatDuration(min)}, got ${describe(item)}`,
      );
    else levelsMs.push(parsed);
  });
  if (problems.length > before) return DEFAULTS.compactionLevelsMs;
  // Named here with the item's path and durations; the worker's check
  // below refuses the same lists for its own callers.
  for (let index = 1; index < levelsMs.length; index++) {
    const [previous, current] = [levelsMs[index - 1]!, levelsMs[index]!];
    if (current > previous && current % previous !== 0)
      problems.push(
        `${at}[${index}]: ${formatDuration(current)} is not a whole multiple of the level before it (${formatDuration(previous)})`,
      );
  }
  if (problems.length > before) return DEFAULTS.compactionLevelsMs;
  const problem = compactionLevelsProblem(levelsMs);
  if (problem !== undefined) {
    problems.push(`${at}: ${problem}`);
    return DEFAULTS.compactionLevelsMs;
  }
  return levelsMs;
}

function validateCheckpoint(value: unknown, at: string, problems: string[]): CheckpointSettings {
  if (value === undefined) return DEFAULTS.checkpoint;
  if (!isMapping(value)) {
    problems.push(`${at}: must be a mapping, got ${describe(value)}`);
    return DEFAULTS.checkpoint;
  }
  unknownKeys(value, CHECKPOINT_KEYS, at, problems);
  const { min } = BOUNDS.checkpointPages;
  const passivePages = wholeNumber(
    value.passivePages,
    `${at}.passivePages`,
    DEFAULTS.checkpoint.passivePages,
    min,
    problems,
  );
  const truncatePages = wholeNumber(
    value.truncatePages,
    `${at}.truncatePages`,
    DEFAULTS.checkpoint.truncatePages,
    min,
    problems,
  );
  if (truncatePages <= passivePages)
    problems.push(`${at}.truncatePages: must be greater than passivePages (${passivePages})`);
  const holdLock = trueOrFalse(
    value.holdLock,
    `${at}.holdLock`,
    DEFAULTS.checkpoint.holdLock,
    problems,
  );
  return { passivePages, truncatePages, holdLock };
}

/** A switch: `fallback` when absent; anything but true or false is a problem named by `at`. */
function trueOrFalse(value: unknown, at: string, fallback: boolean, problems: string[]): boolean {
  if (value === undefined) return fallback;
  if (typeof value === 'boolean') return value;
  problems.push(`${at}: must be true or false, got ${describe(value)}`);
  return fallback;
}
