/**
 * The configuration file (YAML) and the single-database environment.
 *
 * Every problem is reported as `path: problem`, e.g.
 * `databases[1].url: unknown scheme "s4"`, and all problems are reported at
 * once. Strings may use `${VAR}` (or `${VAR:-default}`) to read the
 * environment; `$${` writes a literal `${`. Credentials are never settings:
 * they come from the environment or the SDKs' standard chains. Each setting
 * is one row in settings/database-settings.ts or settings/other-settings.ts.
 */
import { parse as parseYaml } from 'yaml';
import { encryptionFromEnvironment, unusedRecipientsVariable } from './settings/encryption.ts';
import {
  cpuPriorityFromEnvironment,
  type Env,
  expandEnvironment,
  settingsFromEnvironment,
} from './settings/environment.ts';
import type { BackupdConfig, Retention, SourceKind } from './settings/parsed-config.ts';
import { validateConfig } from './settings/validate.ts';

export {
  BOUNDS,
  DATABASE_SETTINGS,
  type DatabaseSetting,
  DEFAULTS,
  environmentVariable,
  type WorkerOption,
} from './settings/database-settings.ts';
export type {
  BackupdConfig,
  CheckpointSettings,
  DatabaseConfig,
  DatabaseSettings,
  EncryptionSettings,
  IdentityFile,
  Retention,
  SourceKind,
} from './settings/parsed-config.ts';

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
  if (config && problems.length === 0)
    unusedRecipientsVariable(options.env, config.databases, problems);
  return withPriorityFromEnvironment(config, options.env, problems, source);
}

/**
 * The single-database case from flags and the environment: one variable per
 * DATABASE_SETTINGS row (BACKUPD_INTERVAL, BACKUPD_LEASE_TTL, …),
 * BACKUPD_AGE_RECIPIENTS and BACKUPD_AGE_IDENTITY_FILE, and
 * BACKUPD_CPU_PRIORITY.
 */
export function singleDatabaseConfig(
  database: { path: string; url: string; type?: SourceKind },
  options: { env: Env; baseDir: string; listen?: string },
): BackupdConfig {
  const problems: string[] = [];
  const entry = {
    path: database.path,
    url: database.url,
    ...(database.type ? { type: database.type } : {}),
    ...settingsFromEnvironment(options.env, problems),
  };
  const document = { databases: [entry], ...(options.listen ? { listen: options.listen } : {}) };
  const config = validateConfig(document, options.baseDir, problems);
  const encryption = encryptionFromEnvironment(options.env, options.baseDir, problems);
  // Only this mode's one database takes the variables (a config file writes `${VAR}`).
  const encrypted =
    config && encryption
      ? { ...config, databases: config.databases.map((entry) => ({ ...entry, encryption })) }
      : config;
  return withPriorityFromEnvironment(
    encrypted,
    options.env,
    problems,
    'command line and environment',
  );
}

/** @throws ConfigError with every problem, BACKUPD_CPU_PRIORITY's last. */
function withPriorityFromEnvironment(
  config: BackupdConfig | undefined,
  env: Env,
  problems: string[],
  source: string,
): BackupdConfig {
  const cpuPriority = cpuPriorityFromEnvironment(env, problems);
  if (problems.length > 0 || !config) throw new ConfigError(problems, source);
  return cpuPriority ? { ...config, cpuPriority } : config;
}

/** The worker options a {@link Retention} becomes: `retainFor` for a window, `retain` for a count. */
export function retentionOptions(retention: Retention): { retain?: number; retainFor?: number } {
  return 'count' in retention ? { retain: retention.count } : { retainFor: retention.windowMs };
}
