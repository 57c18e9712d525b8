/** What a parsed configuration holds. Each field's meaning, default and bounds: its row (database-settings.ts, other-settings.ts). */
import type { AgeRecipient } from '@x/age-envelope';
import type { CpuPriority } from '@x/cpu-priority';
import type { StoreLocation } from '../store-url.ts';

export type SourceKind = 'sqlite' | 'framed';

/**
 * Which restore points are kept: a window by time (every one created in the
 * last `windowMs`, and the one before, which holds the window's start) or a
 * count (the newest `count`).
 */
export type Retention = { readonly windowMs: number } | { readonly count: number };

export interface CheckpointSettings {
  readonly passivePages: number;
  readonly truncatePages: number;
  readonly holdLock: boolean;
}

/** The settings every database has a default for: one field per row of DATABASE_SETTINGS. */
export interface DatabaseSettings {
  readonly intervalMs: number;
  readonly restorePointIntervalMs: number;
  readonly retention: Retention;
  readonly leaseTtlSeconds: number;
  readonly shutdownGraceMs: number;
  readonly snapshotIntervalMs: number;
  readonly snapshotLogFactor: number;
  /** Ascending, each a whole multiple of the one before; `[]`: no compaction. */
  readonly compactionLevelsMs: readonly number[];
  /** 0: compacted objects restore at their ends only. */
  readonly exactWindowMs: number;
  readonly checkpoint: CheckpointSettings;
  readonly conditional: boolean;
}

/** An identity file, with the setting that named it (for messages). */
export interface IdentityFile {
  /** Absolute. */
  readonly path: string;
  /** `databases[0].encryption.ageIdentityFile[1]`, `BACKUPD_AGE_IDENTITY_FILE`, `--age-identity-file`. */
  readonly setting: string;
}

export interface EncryptionSettings {
  /** The public keys new objects are encrypted to; empty: objects are stored in clear. */
  readonly recipients: readonly AgeRecipient[];
  /** Files of secret keys that open encrypted objects (a restore's, a writer's read-back). */
  readonly identityFiles: readonly IdentityFile[];
}

/** How a directory's databases are found and put to sleep (`replicate --dir`, a `directory` entry). */
export interface DirectoryOptions {
  /** A glob on the file name. */
  readonly pattern: string;
  readonly recursive: boolean;
  /** A database whose files stay unchanged this long sleeps. */
  readonly quietMs: number;
  /** How often the directory is read again and sleeping databases looked at. */
  readonly rescanMs: number;
}

export interface DatabaseConfig extends DatabaseSettings {
  /** Absolute: the database, or with `directory` the directory of databases. */
  readonly path: string;
  /** Present: `path` is a directory, each database of it backed up under `<url>/<its relative path>`. */
  readonly directory?: DirectoryOptions;
  readonly type: SourceKind;
  readonly urls: readonly { readonly text: string; readonly location: StoreLocation }[];
  /** Absent: nothing encrypted, no identity to read with. */
  readonly encryption?: EncryptionSettings;
}

export interface BackupdConfig {
  readonly listen?: string;
  /** Absent: `DEFAULT_CPU_PRIORITY`. */
  readonly cpuPriority?: CpuPriority;
  readonly databases: readonly DatabaseConfig[];
}

/** A field of {@link DatabaseSettings}, dotted when nested: a row's `field`. */
export type SettingField =
  | Exclude<keyof DatabaseSettings, 'checkpoint'>
  | `checkpoint.${keyof CheckpointSettings}`;

/** The type of a {@link SettingField}'s value. */
export type FieldValue<F extends SettingField> =
  F extends `checkpoint.${infer K extends keyof CheckpointSettings}`
    ? CheckpointSettings[K]
    : F extends keyof DatabaseSettings
      ? DatabaseSettings[F]
      : never;
