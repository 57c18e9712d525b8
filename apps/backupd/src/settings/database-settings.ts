/**
 * Every per-database setting with a default, one row each, in the order
 * `replicate --help` and the README list them. Validation, the one-database
 * environment, the help and the README's table (scripts/settings-table.ts)
 * all read these rows.
 */
import {
  type BackupWorkerOptions,
  DEFAULT_COMPACTION_LEVELS_MS,
  DEFAULT_EXACT_WINDOW_MS,
  DEFAULT_MANIFEST_INTERVAL_MS,
  DEFAULT_RETAIN_FOR_MS,
  DEFAULT_SHUTDOWN_GRACE_MS,
  DEFAULT_SNAPSHOT_INTERVAL_MS,
  DEFAULT_SNAPSHOT_LOG_FACTOR,
  DEFAULT_WAL_INTERVAL_MS,
  MAX_COMPACTION_LEVELS,
  RECOMMENDED_COMPACTION_LEVELS_MS,
} from '@x/backup-worker';
import { DEFAULT_TTL_S, MAX_SANE_TTL_S, MIN_TTL_S } from '@x/lease';
import {
  DEFAULT_PASSIVE_CHECKPOINT_PAGES,
  DEFAULT_TRUNCATE_CHECKPOINT_PAGES,
  type SqliteSourceOptions,
} from '@x/source-sqlite';
import { setKey } from './document.ts';
import type { DatabaseSettings, FieldValue, SettingField } from './parsed-config.ts';
import {
  compactionLevels,
  duration,
  durationOrZero,
  numberOrZero,
  retention,
  seconds,
  trueOrFalse,
  type Value,
  wholeNumber,
} from './values.ts';

/** The options a value becomes (daemon.ts and open-sqlite.ts pass them); several: its form chooses. */
export type WorkerOption =
  | { readonly owner: 'BackupWorker'; readonly options: readonly (keyof BackupWorkerOptions)[] }
  | { readonly owner: 'SqliteSource'; readonly options: readonly (keyof SqliteSourceOptions)[] };

/** The constants of the package that owns a default or bound, by name (a test checks them). */
export interface PackageConstants {
  readonly package: string;
  readonly values: Readonly<Record<string, unknown>>;
}

export interface DatabaseSetting<F extends SettingField = SettingField, T = unknown, B = unknown> {
  /** The YAML key under `databases[i]`, dotted when nested. */
  readonly key: string;
  /** The one-database mode's variable: see {@link environmentVariable}. */
  readonly variable: string;
  /** Its field in DatabaseConfig: the key with its unit. */
  readonly field: F;
  /** One line, for the README. */
  readonly help: string;
  readonly value: Value<T, B>;
  readonly default: T;
  readonly constants?: PackageConstants;
  /** The key of the same mapping it must exceed (checked with both values settled). */
  readonly greaterThan?: string;
  readonly workerOption: WorkerOption;
}

/** A setting's variable: `BACKUPD_` and its key in capitals (`leaseTtl` → `BACKUPD_LEASE_TTL`). */
export function environmentVariable(key: string): string {
  return `BACKUPD_${key
    .replace(/\./g, '_')
    .replace(/([a-z0-9])([A-Z])/g, '$1_$2')
    .toUpperCase()}`;
}

/** A row whose value and default have its field's type. */
function setting<F extends SettingField, B>(
  row: Omit<DatabaseSetting<F, FieldValue<F>, B>, 'variable'>,
): DatabaseSetting<F, FieldValue<F>, B> {
  return { ...row, variable: environmentVariable(row.key) };
}

const ROWS = [
  setting({
    key: 'interval',
    field: 'intervalMs',
    help: 'how often new WAL is shipped',
    value: duration({ min: 100 }),
    default: DEFAULT_WAL_INTERVAL_MS,
    constants: { package: '@x/backup-worker', values: { DEFAULT_WAL_INTERVAL_MS } },
    workerOption: { owner: 'BackupWorker', options: ['walIntervalMs'] },
  }),
  setting({
    key: 'restorePointInterval',
    field: 'restorePointIntervalMs',
    help: 'least time between two restore points while WAL keeps shipping (and at shutdown, always one)',
    value: duration({ min: 100 }),
    default: DEFAULT_MANIFEST_INTERVAL_MS,
    constants: { package: '@x/backup-worker', values: { DEFAULT_MANIFEST_INTERVAL_MS } },
    workerOption: { owner: 'BackupWorker', options: ['manifestIntervalMs'] },
  }),
  setting({
    key: 'retention',
    field: 'retention',
    help: 'which restore points are kept: those of a window by time, or the newest few',
    // Under a minute would keep little beyond the newest restore point; ten years outlives any backup.
    value: retention({ minCount: 1, minWindowMs: 60_000, maxWindowMs: 3650 * 86_400_000 }),
    // A window by time, as an operator expects of "retention".
    default: { windowMs: DEFAULT_RETAIN_FOR_MS },
    constants: { package: '@x/backup-worker', values: { DEFAULT_RETAIN_FOR_MS } },
    workerOption: { owner: 'BackupWorker', options: ['retainFor', 'retain'] },
  }),
  setting({
    key: 'leaseTtl',
    field: 'leaseTtlSeconds',
    help: 'how long the bucket lease holds without renewal; a restart after a crash waits it out',
    // The lease's shortest TTL, and the longest it trusts (a longer one makes the record suspect).
    value: seconds({ min: MIN_TTL_S, max: MAX_SANE_TTL_S }),
    default: DEFAULT_TTL_S,
    constants: { package: '@x/lease', values: { DEFAULT_TTL_S, MIN_TTL_S, MAX_SANE_TTL_S } },
    workerOption: { owner: 'BackupWorker', options: ['leaseTtlSeconds'] },
  }),
  setting({
    key: 'shutdownGrace',
    field: 'shutdownGraceMs',
    help: 'how long a graceful stop may take to ship what is durable and write a final restore point',
    value: duration({ min: 0 }),
    default: DEFAULT_SHUTDOWN_GRACE_MS,
    constants: { package: '@x/backup-worker', values: { DEFAULT_SHUTDOWN_GRACE_MS } },
    workerOption: { owner: 'BackupWorker', options: ['shutdownGraceMs'] },
  }),
  setting({
    key: 'snapshotInterval',
    field: 'snapshotIntervalMs',
    help: 'a new generation on a fresh snapshot once the current one is this old',
    // More often than every minute would upload the database again and again for little history.
    value: durationOrZero({ min: 60_000 }, 'snapshot only by size'),
    default: DEFAULT_SNAPSHOT_INTERVAL_MS,
    constants: { package: '@x/backup-worker', values: { DEFAULT_SNAPSHOT_INTERVAL_MS } },
    workerOption: { owner: 'BackupWorker', options: ['snapshotIntervalMs'] },
  }),
  setting({
    key: 'snapshotLogFactor',
    field: 'snapshotLogFactor',
    help: 'also once the stored log of the current generation exceeds this many times the database',
    // Below 1, a generation would be cut before its WAL reached the database's size.
    value: numberOrZero({ min: 1, max: 1000 }, 'snapshot only by age'),
    default: DEFAULT_SNAPSHOT_LOG_FACTOR,
    constants: { package: '@x/backup-worker', values: { DEFAULT_SNAPSHOT_LOG_FACTOR } },
    workerOption: { owner: 'BackupWorker', options: ['snapshotLogFactor'] },
  }),
  setting({
    key: 'compaction',
    field: 'compactionLevelsMs',
    help: "the commit-log compaction levels' windows: how exactly an older moment can be restored",
    // At least a second each (the worker's floor), a day at most (the duration parser's).
    value: compactionLevels({ min: 1000, maxLevels: MAX_COMPACTION_LEVELS }),
    default: DEFAULT_COMPACTION_LEVELS_MS,
    constants: {
      package: '@x/backup-worker',
      values: {
        DEFAULT_COMPACTION_LEVELS_MS,
        RECOMMENDED_COMPACTION_LEVELS_MS,
        MAX_COMPACTION_LEVELS,
      },
    },
    workerOption: { owner: 'BackupWorker', options: ['compactionLevels'] },
  }),
  setting({
    key: 'exactWindow',
    field: 'exactWindowMs',
    help: 'how far back every commit restores exactly, by commit and by time, inside compacted objects',
    value: durationOrZero({ min: 60_000 }, 'restore inside compacted objects at their ends only'),
    default: DEFAULT_EXACT_WINDOW_MS,
    constants: { package: '@x/backup-worker', values: { DEFAULT_EXACT_WINDOW_MS } },
    workerOption: { owner: 'BackupWorker', options: ['exactWindowMs'] },
  }),
  setting({
    key: 'checkpoint.passivePages',
    field: 'checkpoint.passivePages',
    help: "WAL frames landed since backupd's last copy after which it runs a PASSIVE checkpoint",
    value: wholeNumber({ min: 1 }),
    // Below SQLite's auto-checkpoint (1000 pages), so the application's commits do not copy.
    default: DEFAULT_PASSIVE_CHECKPOINT_PAGES,
    constants: { package: '@x/source-sqlite', values: { DEFAULT_PASSIVE_CHECKPOINT_PAGES } },
    workerOption: { owner: 'SqliteSource', options: ['passiveCheckpointPages'] },
  }),
  setting({
    key: 'checkpoint.truncatePages',
    field: 'checkpoint.truncatePages',
    help: 'WAL frames after which backupd restarts the WAL under a brief write lock',
    value: wholeNumber({ min: 1 }),
    default: DEFAULT_TRUNCATE_CHECKPOINT_PAGES,
    constants: { package: '@x/source-sqlite', values: { DEFAULT_TRUNCATE_CHECKPOINT_PAGES } },
    greaterThan: 'checkpoint.passivePages',
    workerOption: { owner: 'SqliteSource', options: ['truncateCheckpointPages'] },
  }),
  setting({
    key: 'checkpoint.holdLock',
    field: 'checkpoint.holdLock',
    help: "hold SQLite's checkpoint lock while the WAL is past 1000 frames, so the application's own checkpoints answer busy at once (64-bit Linux only; elsewhere never held)",
    value: trueOrFalse,
    default: true,
    workerOption: { owner: 'SqliteSource', options: ['holdCheckpointLock'] },
  }),
  setting({
    key: 'conditional',
    field: 'conditional',
    help: 'false runs the lease best-effort on services without conditional writes (logged as a warning)',
    value: trueOrFalse,
    default: true,
    workerOption: { owner: 'BackupWorker', options: ['conditional'] },
  }),
] as const;

type Row = (typeof ROWS)[number];

export const DATABASE_SETTINGS: readonly DatabaseSetting[] = ROWS;

/** Settings from a value per row, nested by field (`checkpoint.passivePages`). */
export function settingsOf(valueFor: (setting: DatabaseSetting) => unknown): DatabaseSettings {
  const settings: Record<string, unknown> = {};
  for (const setting of DATABASE_SETTINGS) setKey(settings, setting.field, valueFor(setting));
  return settings as unknown as DatabaseSettings;
}

/** What a setting left out becomes. */
export const DEFAULTS: DatabaseSettings = settingsOf((setting) => setting.default);

/** The least (and most) each setting accepts, by field; a field without a row fails to compile here. */
export const BOUNDS = Object.fromEntries(ROWS.map((row) => [row.field, row.value.bounds])) as {
  readonly [R in Row as R['field']]: R['value']['bounds'];
} satisfies Record<SettingField, unknown>;
