/**
 * What the environment gives: `${VAR}` in a config file's strings, one
 * variable per DATABASE_SETTINGS row in the one-database mode, and
 * BACKUPD_CPU_PRIORITY, which applies in both modes over the file's.
 */
import type { CpuPriority } from '@x/cpu-priority';
import { DATABASE_SETTINGS } from './database-settings.ts';
import { setKey } from './document.ts';
import { CPU_PRIORITY_VARIABLE } from './other-settings.ts';
import { cpuPriority } from './values.ts';

export type Env = Readonly<Record<string, string | undefined>>;

/** `${VAR}` and `${VAR:-default}` in every string of a document; `$${` is a literal `${`. */
export function expandEnvironment(
  value: unknown,
  path: string,
  env: Env,
  problems: string[],
): unknown {
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

/** The settings the variables set, as a config file's database entry would give them. */
export function settingsFromEnvironment(env: Env, problems: string[]): Record<string, unknown> {
  const entry: Record<string, unknown> = {};
  for (const setting of DATABASE_SETTINGS) {
    const text = env[setting.variable];
    if (text === undefined) continue;
    const value = setting.value.reading.read(text, setting.variable, problems);
    if (value !== undefined) setKey(entry, setting.key, value);
  }
  return entry;
}

export function cpuPriorityFromEnvironment(env: Env, problems: string[]): CpuPriority | undefined {
  const value = env[CPU_PRIORITY_VARIABLE];
  if (value === undefined || value === '') return undefined;
  return cpuPriority(value, CPU_PRIORITY_VARIABLE, problems);
}
