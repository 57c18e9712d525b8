/**
 * The settings without a per-database default, one row each: where a
 * database is and where it goes, and the top level's. Their checks are in
 * validate.ts (a path resolves against the file's directory, `url` and
 * `urls` exclude each other); their rows give the known keys and the README.
 */
import { CPU_PRIORITIES, DEFAULT_CPU_PRIORITY } from '@x/cpu-priority';
import { MAX_OBJECT_RECIPIENTS } from '@x/wal-segment';
import { environmentVariable, type PackageConstants } from './database-settings.ts';

export interface OtherSetting {
  /** Its YAML keys: beside `databases` (`top`) or in each of its entries. */
  readonly keys: readonly string[];
  readonly level: 'top' | 'database';
  /** Its variable, in both modes. */
  readonly variable?: string;
  readonly commandLine?: string;
  readonly field: string;
  readonly help: string;
  /** The README's cells for these three, in Markdown. */
  readonly goesTo: string;
  readonly default: string;
  readonly accepted: string;
  readonly constants?: PackageConstants;
}

/** Sets `cpuPriority` in either mode, over the config file's. */
export const CPU_PRIORITY_VARIABLE = environmentVariable('cpuPriority');

export const OTHER_SETTINGS: readonly OtherSetting[] = [
  {
    keys: ['path'],
    level: 'database',
    commandLine: '<db>',
    field: 'path',
    help: "the database file (sqlite) or store directory (framed); relative to the config file's directory",
    goesTo: "the source's database or directory",
    default: '—',
    accepted: 'a path',
  },
  {
    keys: ['directory'],
    level: 'database',
    commandLine: '--dir',
    field: 'path (with directory)',
    help: 'instead of `path`: every SQLite database of this directory, each under `<url>/<its relative path>`, each woken only while it changes (see [A directory of databases](#a-directory-of-databases))',
    goesTo: '— (a worker per database, while it changes)',
    default: '—',
    accepted: 'a path',
  },
  {
    keys: ['pattern'],
    level: 'database',
    commandLine: '--pattern',
    field: 'directory.pattern',
    help: 'with `directory`: which file names are databases',
    goesTo: '— (the directory scan)',
    default: '`*.db`',
    accepted: 'a glob on the file name: `*`, `?`, `[…]`, `[!…]`',
  },
  {
    keys: ['recursive'],
    level: 'database',
    commandLine: '--recursive',
    field: 'directory.recursive',
    help: 'with `directory`: also the databases of its subdirectories',
    goesTo: '— (the directory scan)',
    default: '`false`',
    accepted: '`true`, `false`',
  },
  {
    keys: ['sleepAfter'],
    level: 'database',
    commandLine: '--sleep-after',
    field: 'directory.quietMs',
    help: 'with `directory`: a database whose files stay unchanged this long sleeps (its worker stops, holding nothing)',
    goesTo: '— (when a worker stops)',
    default: '`30s`',
    accepted: '`1s` … `24h`',
  },
  {
    keys: ['rescan'],
    level: 'database',
    commandLine: '--rescan',
    field: 'directory.rescanMs',
    help: 'with `directory`: how often the directory is read again and sleeping databases looked at, beside the file-system watch',
    goesTo: '— (the directory scan)',
    default: '`10s`',
    accepted: '`1s` … `1h`',
  },
  {
    keys: ['type'],
    level: 'database',
    commandLine: '--type',
    field: 'type',
    help: 'what `path` is',
    goesTo: '`SqliteSource` or `FramedDirSource`',
    default: '`sqlite`',
    accepted: '`sqlite`, `framed`',
  },
  {
    keys: ['url', 'urls'],
    level: 'database',
    commandLine: '<url>',
    field: 'urls',
    help: 'where to back up to: one URL, or several replicas (not yet for a SQLite database)',
    goesTo: 'one worker and lease per URL',
    default: '`<db>-backups/` beside it (command line only)',
    accepted: 'store URLs',
  },
  {
    keys: ['listen'],
    level: 'top',
    commandLine: '--listen',
    field: 'listen',
    help: 'serve /healthz, /livez, /readyz, /metrics and a status page',
    goesTo: '— (the status server)',
    default: 'off',
    accepted: '`host:port`',
  },
  {
    keys: ['cpuPriority'],
    level: 'top',
    variable: CPU_PRIORITY_VARIABLE,
    field: 'cpuPriority',
    help: "backupd's CPU priority once its workers have started (see [CPU priority](#cpu-priority))",
    goesTo: "— (backupd's own process)",
    default: `\`${DEFAULT_CPU_PRIORITY}\``,
    accepted: CPU_PRIORITIES.map((name) => `\`${name}\``).join(', '),
    constants: { package: '@x/cpu-priority', values: { DEFAULT_CPU_PRIORITY, CPU_PRIORITIES } },
  },
];

/**
 * A database's `encryption` section (settings/encryption.ts checks it). Kept
 * apart from OTHER_SETTINGS until the README's table lists them.
 */
export const ENCRYPTION_SETTINGS: readonly OtherSetting[] = [
  {
    keys: ['encryption.ageRecipients'],
    level: 'database',
    variable: environmentVariable('ageRecipients'),
    field: 'encryption.recipients',
    help: "encrypt every object to these age public keys (age-keygen -y prints a key file's); a change starts a new generation",
    goesTo: '`BackupWorker` `encryption.recipients`',
    default: 'none: objects are stored in clear',
    accepted: `1 … ${MAX_OBJECT_RECIPIENTS - 1} \`age1…\` recipients: a list, or one comma-separated string`,
    constants: { package: '@x/wal-segment', values: { MAX_OBJECT_RECIPIENTS } },
  },
  {
    keys: ['encryption.ageIdentityFile'],
    level: 'database',
    variable: environmentVariable('ageIdentityFile'),
    commandLine: '--age-identity-file (restore, verify, ls)',
    field: 'encryption.identityFiles',
    help: "age identity files (as age-keygen writes them) that open encrypted objects: a first boot's restore, a writer's read-back",
    goesTo: '`BackupWorker` `encryption.identities`; restore and verify `identities`',
    default: 'none',
    accepted:
      "paths: a list, or one comma-separated string; relative to the config file's directory",
  },
];

/** The keys of the rows at `level`, in order. */
export function keysAt(level: OtherSetting['level']): string[] {
  return OTHER_SETTINGS.filter((setting) => setting.level === level).flatMap((row) => row.keys);
}
