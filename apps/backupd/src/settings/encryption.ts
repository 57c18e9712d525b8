/**
 * A database's `encryption` section and its two variables: the age
 * recipients new objects are encrypted to, and the identity files that open
 * encrypted objects. Checked here without reading a file: the files are read
 * where their keys are used (encryption-settings.ts), so a parsed
 * configuration holds paths and public keys, never a secret key.
 *
 * A list takes a YAML list, or a string of comma-separated items as its
 * variable does, so `ageRecipients: ${BACKUPD_AGE_RECIPIENTS}` works too.
 * No message shows text that holds a secret key.
 */
import { isAbsolute, resolve } from 'node:path';
import { AgeError, type AgeRecipient, parseRecipient } from '@x/age-envelope';
import { MAX_OBJECT_RECIPIENTS } from '@x/wal-segment';
import { holdsAgeSecretKey } from '../age-secret-key-text.ts';
import { describe } from '../duration.ts';
import { environmentVariable } from './database-settings.ts';
import { isMapping } from './document.ts';
import type { EncryptionSettings, IdentityFile } from './parsed-config.ts';

type Env = Readonly<Record<string, string | undefined>>;

export const AGE_RECIPIENTS_VARIABLE = environmentVariable('ageRecipients');
export const AGE_IDENTITY_FILE_VARIABLE = environmentVariable('ageIdentityFile');

/** replicate's help, under its other variables: the one-database mode's encryption. */
export const ENCRYPTION_ENVIRONMENT_HELP = [
  "Encryption (age; a config file sets each database's encryption: ageRecipients, ageIdentityFile):",
  `  ${`${AGE_RECIPIENTS_VARIABLE}=age1…[,age1…]`.padEnd(43)}encrypt every object to these public keys`,
  `  ${`${AGE_IDENTITY_FILE_VARIABLE}=<file>[,<file>]`.padEnd(43)}identity files (secret keys) to read encrypted objects with`,
].join('\n');

/** An object's header holds MAX_OBJECT_RECIPIENTS keys; a writer without an identity adds its own. */
export const MAX_AGE_RECIPIENTS = MAX_OBJECT_RECIPIENTS - 1;

const RECIPIENTS_KEY = 'ageRecipients';
const IDENTITY_FILE_KEY = 'ageIdentityFile';
const KEYS = [RECIPIENTS_KEY, IDENTITY_FILE_KEY];

/** What to say when a secret key is given as an identity file's path (the flag says it too). */
export const SECRET_KEY_FOR_A_PATH =
  'a secret key (AGE-SECRET-KEY-1…) was given where the path of a file holding it belongs: write the key to a file (age-keygen -o <file> makes one) and name the file';

const SECRET_KEY_FOR_A_RECIPIENT =
  'a secret key (AGE-SECRET-KEY-1…) was given where a public age1… recipient belongs: give its recipient (age-keygen -y <identity file> prints it), and keep the secret key off hosts that only back up';

/** The names of the two settings in one place (a config file's or the environment's), for hints. */
interface Names {
  readonly recipients: string;
  readonly identityFile: string;
}

const FILE_NAMES: Names = { recipients: RECIPIENTS_KEY, identityFile: IDENTITY_FILE_KEY };
const VARIABLE_NAMES: Names = {
  recipients: AGE_RECIPIENTS_VARIABLE,
  identityFile: AGE_IDENTITY_FILE_VARIABLE,
};

/** One item of a list setting, with where it was written. */
interface SettingItem {
  readonly text: string;
  readonly at: string;
}

/** A value for a message: never one that holds a secret key. */
function shown(value: unknown): string {
  if (typeof value === 'string' && holdsAgeSecretKey(value)) return 'a secret key (not shown)';
  return describe(value);
}

/**
 * `databases[i].encryption`, or undefined when absent or refused (the
 * problems are in `problems`). Relative identity file paths resolve against
 * `baseDir` (the config file's directory).
 */
export function validateEncryption(
  value: unknown,
  at: string,
  baseDir: string,
  problems: string[],
): EncryptionSettings | undefined {
  if (value === undefined) return undefined;
  if (!isMapping(value)) {
    problems.push(
      `${at}: must be a mapping with ${RECIPIENTS_KEY} and/or ${IDENTITY_FILE_KEY}, got ${shown(value)}`,
    );
    return undefined;
  }
  const before = problems.length;
  for (const key of Object.keys(value))
    if (!KEYS.includes(key))
      problems.push(
        `${at}.${holdsAgeSecretKey(key) ? '(a secret key, not shown)' : key}: unknown setting (known: ${KEYS.join(', ')})`,
      );
  const recipientsValue = value[RECIPIENTS_KEY];
  const filesValue = value[IDENTITY_FILE_KEY];
  if (recipientsValue === undefined && filesValue === undefined) {
    problems.push(
      `${at}: give ${RECIPIENTS_KEY} (to encrypt what is backed up), ${IDENTITY_FILE_KEY} (to open encrypted objects), or both; or leave ${at.split('.').pop()} out`,
    );
    return undefined;
  }
  const recipientsAt = `${at}.${RECIPIENTS_KEY}`;
  const filesAt = `${at}.${IDENTITY_FILE_KEY}`;
  const recipients =
    recipientsValue === undefined
      ? []
      : recipientsOf(
          listItems(recipientsValue, recipientsAt, 'age1… recipients', problems),
          recipientsAt,
          FILE_NAMES,
          problems,
        );
  const identityFiles =
    filesValue === undefined
      ? []
      : identityFilesOf(
          listItems(filesValue, filesAt, 'paths of age identity files', problems),
          baseDir,
          FILE_NAMES,
          problems,
        );
  return problems.length > before ? undefined : { recipients, identityFiles };
}

/**
 * The one-database mode's encryption: BACKUPD_AGE_RECIPIENTS and
 * BACKUPD_AGE_IDENTITY_FILE, each comma-separated; undefined when neither is
 * set (or both are empty). Relative paths resolve against `baseDir`.
 */
export function encryptionFromEnvironment(
  env: Env,
  baseDir: string,
  problems: string[],
): EncryptionSettings | undefined {
  const recipientsText = nonEmpty(env[AGE_RECIPIENTS_VARIABLE]);
  const filesText = nonEmpty(env[AGE_IDENTITY_FILE_VARIABLE]);
  if (recipientsText === undefined && filesText === undefined) return undefined;
  const recipients =
    recipientsText === undefined
      ? []
      : recipientsOf(
          splitItems(recipientsText, AGE_RECIPIENTS_VARIABLE),
          AGE_RECIPIENTS_VARIABLE,
          VARIABLE_NAMES,
          problems,
        );
  return {
    recipients,
    identityFiles: identityFilesFromEnvironment(env, baseDir, problems),
  };
}

/** BACKUPD_AGE_IDENTITY_FILE's files (comma-separated); none when it is unset or empty. */
export function identityFilesFromEnvironment(
  env: Env,
  baseDir: string,
  problems: string[],
): IdentityFile[] {
  const text = nonEmpty(env[AGE_IDENTITY_FILE_VARIABLE]);
  if (text === undefined) return [];
  return identityFilesOf(
    splitItems(text, AGE_IDENTITY_FILE_VARIABLE),
    baseDir,
    VARIABLE_NAMES,
    problems,
  );
}

/** Files named on the command line, one a flag (a path may hold a comma). */
export function identityFilesFromArguments(
  paths: readonly string[],
  flag: string,
  cwd: string,
  problems: string[],
): IdentityFile[] {
  return identityFilesOf(
    paths.map((text) => ({ text, at: flag })),
    cwd,
    { recipients: AGE_RECIPIENTS_VARIABLE, identityFile: flag },
    problems,
  );
}

/**
 * In a config file, BACKUPD_AGE_RECIPIENTS is read only where the file
 * writes `${BACKUPD_AGE_RECIPIENTS}`. Set while no database of the file
 * encrypts, it would protect nothing an operator believes it protects:
 * refused, naming the way to use it.
 */
export function unusedRecipientsVariable(
  env: Env,
  databases: readonly { readonly encryption?: EncryptionSettings }[],
  problems: string[],
): void {
  if (nonEmpty(env[AGE_RECIPIENTS_VARIABLE]) === undefined) return;
  if (databases.some((database) => (database.encryption?.recipients.length ?? 0) > 0)) return;
  problems.push(
    `${AGE_RECIPIENTS_VARIABLE}: set, but a config file's databases take their recipients from encryption.${RECIPIENTS_KEY} (e.g. ${RECIPIENTS_KEY}: \${${AGE_RECIPIENTS_VARIABLE}}) and none of this file's has any: nothing would be encrypted`,
  );
}

function nonEmpty(text: string | undefined): string | undefined {
  return text === undefined || text.trim() === '' ? undefined : text;
}

function splitItems(text: string, at: string): SettingItem[] {
  return text
    .split(',')
    .map((item) => item.trim())
    .filter((item) => item !== '')
    .map((item) => ({ text: item, at }));
}

/** A YAML list's items by index, or a string's comma-separated items; at least one. */
function listItems(value: unknown, at: string, what: string, problems: string[]): SettingItem[] {
  let items: SettingItem[];
  if (typeof value === 'string') items = splitItems(value, at);
  else if (Array.isArray(value)) {
    items = [];
    value.forEach((item, index) => {
      if (typeof item === 'string' && item.trim() !== '')
        items.push({ text: item.trim(), at: `${at}[${index}]` });
      else problems.push(`${at}[${index}]: must be one of the ${what}, got ${shown(item)}`);
    });
    if (items.length < value.length) return [];
  } else {
    problems.push(
      `${at}: must be a list of ${what}, or one string of them comma-separated, got ${shown(value)}`,
    );
    return [];
  }
  if (items.length === 0) problems.push(`${at}: must list at least one; leave it out for none`);
  return items;
}

function recipientsOf(
  items: readonly SettingItem[],
  at: string,
  names: Names,
  problems: string[],
): AgeRecipient[] {
  const recipients: AgeRecipient[] = [];
  for (const item of items) {
    const recipient = recipientOf(item, names, problems);
    if (recipient === undefined) continue;
    if (recipients.some((earlier) => earlier.text === recipient.text))
      problems.push(`${item.at}: ${recipient.text} is listed twice`);
    else recipients.push(recipient);
  }
  if (recipients.length > MAX_AGE_RECIPIENTS)
    problems.push(
      `${at}: at most ${MAX_AGE_RECIPIENTS} recipients (an object's header holds ${MAX_OBJECT_RECIPIENTS}, and a writer without an identity adds a key of its own), got ${recipients.length}`,
    );
  return recipients;
}

function recipientOf(
  item: SettingItem,
  names: Names,
  problems: string[],
): AgeRecipient | undefined {
  if (holdsAgeSecretKey(item.text)) {
    problems.push(`${item.at}: ${SECRET_KEY_FOR_A_RECIPIENT}`);
    return undefined;
  }
  if (/[/\\~]|\.(txt|key|age)$/i.test(item.text)) {
    problems.push(
      `${item.at}: ${JSON.stringify(item.text)} looks like a file, but recipients are age1… public keys (age-keygen -y <file> prints an identity file's); an identity file belongs in ${names.identityFile}, on hosts that restore`,
    );
    return undefined;
  }
  try {
    return parseRecipient(item.text);
  } catch (error) {
    if (!AgeError.isInstance(error)) throw error;
    problems.push(`${item.at}: ${error.message}`);
    return undefined;
  }
}

function identityFilesOf(
  items: readonly SettingItem[],
  baseDir: string,
  names: Names,
  problems: string[],
): IdentityFile[] {
  const files: IdentityFile[] = [];
  for (const item of items) {
    if (holdsAgeSecretKey(item.text)) {
      problems.push(`${item.at}: ${SECRET_KEY_FOR_A_PATH}`);
      continue;
    }
    if (/^age1[a-z0-9]+$/.test(item.text)) {
      problems.push(
        `${item.at}: ${item.text} is a public recipient, not a file: recipients belong in ${names.recipients}`,
      );
      continue;
    }
    const path = isAbsolute(item.text) ? item.text : resolve(baseDir, item.text);
    if (files.some((earlier) => earlier.path === path))
      problems.push(`${item.at}: ${path} is named twice`);
    else files.push({ path, setting: item.at });
  }
  return files;
}
