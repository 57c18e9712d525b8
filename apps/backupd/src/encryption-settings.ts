/**
 * The age keys a command works with, from its settings: the recipients as
 * the configuration parsed them, and the identities read from their files
 * (read here, at the point of use, so the configuration itself never holds
 * a secret key). An identity's `source` names its file and line; nothing
 * here puts a key in a message.
 */
import type { AgeIdentity, AgeRecipient } from '@x/age-envelope';
import {
  type BackupdConfig,
  ConfigError,
  type EncryptionSettings,
  type IdentityFile,
} from './config.ts';
import { readIdentityFile } from './identity-files.ts';
import {
  AGE_IDENTITY_FILE_VARIABLE,
  AGE_RECIPIENTS_VARIABLE,
  identityFilesFromArguments,
  identityFilesFromEnvironment,
  MAX_AGE_RECIPIENTS,
} from './settings/encryption.ts';

export type { AgeIdentity, AgeRecipient };
export {
  AGE_IDENTITY_FILE_VARIABLE,
  AGE_RECIPIENTS_VARIABLE,
  type EncryptionSettings,
  type IdentityFile,
  MAX_AGE_RECIPIENTS,
};

export interface EncryptionKeys {
  /** What new objects are encrypted to; empty: stored in clear. */
  readonly recipients: AgeRecipient[];
  /** What opens encrypted objects. */
  readonly identities: AgeIdentity[];
}

/** The command-line flag of restore and verify (cli/age-identity-option.ts declares it). */
export const AGE_IDENTITY_FILE_FLAG = '--age-identity-file';

/**
 * A database's keys: its recipients, and the identities of its identity
 * files. None for a database without `encryption`.
 * @param source the configuration's name in the error (its file, or "command line and environment").
 * @throws ConfigError naming each file that cannot be read, holds no key, or repeats a key.
 */
export function loadEncryptionKeys(
  settings: EncryptionSettings | undefined,
  source: string,
): EncryptionKeys {
  const problems: string[] = [];
  const keys = keysOf(settings, problems);
  if (problems.length > 0) throw new ConfigError(problems, source);
  return keys;
}

/**
 * Every database's keys, by its path; every problem of every database at
 * once, as the configuration reports its own.
 * @throws ConfigError
 */
export function loadDatabaseEncryptionKeys(
  config: BackupdConfig,
  source: string,
): ReadonlyMap<string, EncryptionKeys> {
  const problems: string[] = [];
  const keys = new Map(
    config.databases.map((database) => [database.path, keysOf(database.encryption, problems)]),
  );
  if (problems.length > 0) throw new ConfigError(problems, source);
  return keys;
}

/**
 * The identities restore and verify open encrypted objects with: the files
 * of `--age-identity-file` (each flag one path), else those of
 * BACKUPD_AGE_IDENTITY_FILE (comma-separated); none when neither is given.
 * Relative paths resolve against `cwd`.
 * @throws ConfigError naming the flag or the variable.
 */
export function commandLineIdentities(args: {
  readonly files: readonly string[] | undefined;
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly cwd: string;
}): AgeIdentity[] {
  const problems: string[] = [];
  const files =
    args.files !== undefined && args.files.length > 0
      ? identityFilesFromArguments(args.files, AGE_IDENTITY_FILE_FLAG, args.cwd, problems)
      : identityFilesFromEnvironment(args.env, args.cwd, problems);
  const identities = identitiesOf(files, problems);
  if (problems.length > 0) throw new ConfigError(problems, 'command line and environment');
  return identities;
}

/**
 * The worker's `encryption` option: undefined when nothing is encrypted.
 * Identities go with it when the writer has any, so it reads back what it
 * wrote with them instead of a key of its own.
 */
export function workerEncryption(
  keys: EncryptionKeys,
): { recipients: AgeRecipient[]; identities?: AgeIdentity[] } | undefined {
  if (keys.recipients.length === 0) return undefined;
  return keys.identities.length > 0
    ? { recipients: keys.recipients, identities: keys.identities }
    : { recipients: keys.recipients };
}

function keysOf(settings: EncryptionSettings | undefined, problems: string[]): EncryptionKeys {
  if (settings === undefined) return { recipients: [], identities: [] };
  return {
    recipients: [...settings.recipients],
    identities: identitiesOf(settings.identityFiles, problems),
  };
}

/** Every file's identities; a key found twice is named by both places, never shown. */
function identitiesOf(files: readonly IdentityFile[], problems: string[]): AgeIdentity[] {
  const identities: AgeIdentity[] = [];
  for (const file of files)
    for (const identity of readIdentityFile(file, problems)) {
      const earlier = identities.find((other) => other.recipient.text === identity.recipient.text);
      if (earlier === undefined) identities.push(identity);
      else
        problems.push(
          `${file.setting}: ${identity.source} is the same key as ${earlier.source} (recipient ${identity.recipient.text})`,
        );
    }
  return identities;
}
