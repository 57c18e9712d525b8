/**
 * The encryption settings: a database's `encryption` section in a config
 * file, BACKUPD_AGE_RECIPIENTS and BACKUPD_AGE_IDENTITY_FILE in the
 * one-database mode, and restore's and verify's `--age-identity-file`; the
 * keys they resolve to, and every refusal naming its setting. Identity files
 * come from the real `age-keygen` where it is installed (.servers/bin).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { generateIdentity } from '@x/age-envelope';
import { afterAll, describe, expect, it } from 'vitest';
import { AGE_IDENTITY_FILE_OPTIONS } from '../src/cli/age-identity-option.ts';
import {
  listOption,
  optionHelpLines,
  parseOptionValues,
  readArguments,
} from '../src/cli/options.ts';
import { restoreCommand } from '../src/commands/restore-command.ts';
import { verifyCommand } from '../src/commands/verify-command.ts';
import { ConfigError, parseConfig, singleDatabaseConfig } from '../src/config.ts';
import {
  commandLineIdentities,
  type EncryptionKeys,
  loadDatabaseEncryptionKeys,
  loadEncryptionKeys,
  MAX_AGE_RECIPIENTS,
  workerEncryption,
} from '../src/encryption-settings.ts';
import { COMMANDS } from '../src/main.ts';
import { ENCRYPTION_SETTINGS, OTHER_SETTINGS } from '../src/settings/other-settings.ts';

const bin = fileURLToPath(new URL('../../../.servers/bin/', import.meta.url));
const AGE_KEYGEN = join(bin, 'age-keygen');
const hasAgeKeygen = existsSync(AGE_KEYGEN);
if (!hasAgeKeygen && process.env.CI === 'true')
  throw new Error(
    `age-keygen is required under CI=true: run scripts/install-servers.sh (${AGE_KEYGEN})`,
  );

const directory = mkdtempSync(join(tmpdir(), 'backupd-encryption-'));
afterAll(() => rmSync(directory, { recursive: true, force: true }));

const URL_ = 'file:///var/backups/app';

/** An identity file as `age-keygen -o` writes it (comments included), with its recipient. */
function keygen(name: string): { file: string; recipient: string } {
  const file = join(directory, name);
  execFileSync(AGE_KEYGEN, ['-o', file], { stdio: 'pipe' });
  const recipient = execFileSync(AGE_KEYGEN, ['-y', file], { encoding: 'utf8' }).trim();
  return { file, recipient };
}

/** An identity file written here, in age-keygen's layout, for the tests that run without the binary. */
function writtenKey(name: string): { file: string; recipient: string; identity: string } {
  const { identity, recipient } = generateIdentity();
  const file = join(directory, name);
  writeFileSync(
    file,
    `# created: 2026-12-07T00:00:00Z\n# public key: ${recipient}\n${identity}\n`,
    { mode: 0o600 },
  );
  return { file, recipient, identity };
}

function problemsOf(action: () => unknown): readonly string[] {
  try {
    action();
  } catch (error) {
    if (error instanceof ConfigError) return error.problems;
    throw error;
  }
  throw new Error('expected a ConfigError');
}

function fileConfig(encryption: string, env: Record<string, string> = {}) {
  return parseConfig(
    `databases:\n  - path: app.db\n    url: ${URL_}\n    encryption:\n${encryption}`,
    {
      env,
      baseDir: directory,
      source: 'backupd.yml',
    },
  );
}

const fileProblems = (encryption: string, env: Record<string, string> = {}) =>
  problemsOf(() => fileConfig(encryption, env));

function singleConfig(env: Record<string, string>, type?: 'sqlite' | 'framed') {
  return singleDatabaseConfig(
    { path: join(directory, 'app.db'), url: URL_, ...(type ? { type } : {}) },
    { env, baseDir: directory },
  );
}

const recipientTexts = (keys: EncryptionKeys) => keys.recipients.map((r) => r.text);
const identityRecipients = (keys: EncryptionKeys) => keys.identities.map((i) => i.recipient.text);

describe('a config file', () => {
  it('takes recipients and several identity files (a list), paths relative to the file', () => {
    const one = writtenKey('one.txt');
    const two = writtenKey('two.txt');
    const other = generateIdentity().recipient;
    const config = fileConfig(
      `      ageRecipients: [${one.recipient}, ${other}]\n      ageIdentityFile: [one.txt, ${two.file}]\n`,
    );
    const settings = config.databases[0]!.encryption!;
    expect(settings.recipients.map((r) => r.text)).toEqual([one.recipient, other]);
    expect(settings.identityFiles).toEqual([
      { path: one.file, setting: 'databases[0].encryption.ageIdentityFile[0]' },
      { path: two.file, setting: 'databases[0].encryption.ageIdentityFile[1]' },
    ]);
    const keys = loadEncryptionKeys(settings, 'backupd.yml');
    expect(recipientTexts(keys)).toEqual([one.recipient, other]);
    expect(identityRecipients(keys)).toEqual([one.recipient, two.recipient]);
    // The source names the file and the line (after age-keygen's two comment lines).
    expect(keys.identities.map((identity) => identity.source)).toEqual([
      `${one.file} line 3`,
      `${two.file} line 3`,
    ]);
  });

  it('takes one identity file as a string, and recipients as one comma-separated string (as a variable gives them)', () => {
    const key = writtenKey('single.txt');
    const other = generateIdentity().recipient;
    const config = fileConfig(
      `      ageRecipients: \${RECIPIENTS}\n      ageIdentityFile: single.txt\n`,
      {
        RECIPIENTS: `${key.recipient}, ${other}`,
      },
    );
    const settings = config.databases[0]!.encryption!;
    expect(settings.recipients.map((r) => r.text)).toEqual([key.recipient, other]);
    expect(settings.identityFiles).toEqual([
      { path: key.file, setting: 'databases[0].encryption.ageIdentityFile' },
    ]);
  });

  it('leaves a database without `encryption` unencrypted, and gives each database its own keys', () => {
    const key = writtenKey('per-database.txt');
    const config = parseConfig(
      `databases:\n  - path: a.db\n    url: file:///b/a\n    encryption:\n      ageRecipients: [${key.recipient}]\n      ageIdentityFile: per-database.txt\n  - path: b.db\n    url: file:///b/b\n`,
      { env: {}, baseDir: directory },
    );
    expect(config.databases[1]!.encryption).toBeUndefined();
    const keys = loadDatabaseEncryptionKeys(config, 'backupd.yml');
    expect(recipientTexts(keys.get(join(directory, 'a.db'))!)).toEqual([key.recipient]);
    expect(keys.get(join(directory, 'b.db'))).toEqual({ recipients: [], identities: [] });
    expect(workerEncryption(keys.get(join(directory, 'b.db'))!)).toBeUndefined();
  });

  it.skipIf(!hasAgeKeygen)('reads identity files age-keygen wrote, comments and all', () => {
    const first = keygen('keygen-1.txt');
    const second = keygen('keygen-2.txt');
    const config = fileConfig(
      `      ageRecipients: [${first.recipient}, ${second.recipient}]\n      ageIdentityFile: [keygen-1.txt, keygen-2.txt]\n`,
    );
    const keys = loadEncryptionKeys(config.databases[0]!.encryption, 'backupd.yml');
    expect(identityRecipients(keys)).toEqual([first.recipient, second.recipient]);
    expect(keys.identities[0]!.source).toMatch(/keygen-1\.txt line \d+$/);
  });
});

describe('the one-database environment', () => {
  it('reads BACKUPD_AGE_RECIPIENTS and BACKUPD_AGE_IDENTITY_FILE, both comma-separated', () => {
    const one = writtenKey('env-1.txt');
    const two = writtenKey('env-2.txt');
    const config = singleConfig({
      BACKUPD_AGE_RECIPIENTS: `${one.recipient},${two.recipient}`,
      BACKUPD_AGE_IDENTITY_FILE: `env-1.txt, ${two.file}`,
    });
    const settings = config.databases[0]!.encryption!;
    expect(settings.identityFiles).toEqual([
      { path: one.file, setting: 'BACKUPD_AGE_IDENTITY_FILE' },
      { path: two.file, setting: 'BACKUPD_AGE_IDENTITY_FILE' },
    ]);
    const keys = loadEncryptionKeys(settings, 'command line and environment');
    expect(recipientTexts(keys)).toEqual([one.recipient, two.recipient]);
    expect(identityRecipients(keys)).toEqual([one.recipient, two.recipient]);
    expect(workerEncryption(keys)).toEqual({
      recipients: keys.recipients,
      identities: keys.identities,
    });
  });

  it('encrypts nothing when both are unset or empty; recipients alone give the worker no identity', () => {
    expect(singleConfig({}).databases[0]!.encryption).toBeUndefined();
    expect(
      singleConfig({ BACKUPD_AGE_RECIPIENTS: '', BACKUPD_AGE_IDENTITY_FILE: ' ' }).databases[0]!
        .encryption,
    ).toBeUndefined();
    const recipient = generateIdentity().recipient;
    const keys = loadEncryptionKeys(
      singleConfig({ BACKUPD_AGE_RECIPIENTS: recipient }).databases[0]!.encryption,
      'environment',
    );
    expect(workerEncryption(keys)).toEqual({ recipients: keys.recipients });
  });

  it('names the variable in each problem', () => {
    expect(problemsOf(() => singleConfig({ BACKUPD_AGE_RECIPIENTS: 'age1nope' }))).toEqual([
      'BACKUPD_AGE_RECIPIENTS: not an age X25519 recipient (expected age1… as age-keygen prints it): "age1nope"',
    ]);
    const missing = join(directory, 'missing.txt');
    const settings = singleConfig({ BACKUPD_AGE_IDENTITY_FILE: missing }).databases[0]!.encryption;
    expect(problemsOf(() => loadEncryptionKeys(settings, 'environment'))).toEqual([
      `BACKUPD_AGE_IDENTITY_FILE: cannot read ${missing} (ENOENT: no such file or directory)`,
    ]);
  });

  it('takes recipients for a framed store directory, as for SQLite', () => {
    const recipient = generateIdentity().recipient;
    const config = singleConfig({ BACKUPD_AGE_RECIPIENTS: recipient }, 'framed');
    expect(config.databases[0]!.type).toBe('framed');
    expect(config.databases[0]!.encryption?.recipients.map((r) => r.text)).toEqual([recipient]);
  });

  it('refuses BACKUPD_AGE_RECIPIENTS beside a config file that encrypts nothing, and takes it where the file reads it', () => {
    const recipient = generateIdentity().recipient;
    const plain = `databases:\n  - path: a.db\n    url: ${URL_}\n`;
    expect(
      problemsOf(() =>
        parseConfig(plain, { env: { BACKUPD_AGE_RECIPIENTS: recipient }, baseDir: directory }),
      ),
    ).toEqual([
      `BACKUPD_AGE_RECIPIENTS: set, but a config file's databases take their recipients from encryption.ageRecipients (e.g. ageRecipients: \${BACKUPD_AGE_RECIPIENTS}) and none of this file's has any: nothing would be encrypted`,
    ]);
    const reading = `${plain}    encryption:\n      ageRecipients: \${BACKUPD_AGE_RECIPIENTS}\n`;
    const config = parseConfig(reading, {
      env: { BACKUPD_AGE_RECIPIENTS: recipient },
      baseDir: directory,
    });
    expect(config.databases[0]!.encryption!.recipients.map((r) => r.text)).toEqual([recipient]);
  });
});

describe('--age-identity-file (restore, verify, ls)', () => {
  it('is repeatable; each flag one path, relative to the working directory; over BACKUPD_AGE_IDENTITY_FILE', () => {
    const one = writtenKey('flag-1.txt');
    const two = writtenKey('flag,2.txt');
    const ignored = writtenKey('flag-env.txt');
    const { raw } = readArguments(AGE_IDENTITY_FILE_OPTIONS, [
      '--age-identity-file',
      'flag-1.txt',
      `--age-identity-file=${two.file}`,
    ]);
    const values = parseOptionValues(AGE_IDENTITY_FILE_OPTIONS, raw);
    expect(values['age-identity-file']).toEqual(['flag-1.txt', two.file]);
    const identities = commandLineIdentities({
      files: values['age-identity-file'],
      env: { BACKUPD_AGE_IDENTITY_FILE: ignored.file },
      cwd: directory,
    });
    expect(identities.map((identity) => identity.recipient.text)).toEqual([
      one.recipient,
      two.recipient,
    ]);
    expect(identities[1]!.source).toBe(`${two.file} line 3`);
  });

  it('falls back to BACKUPD_AGE_IDENTITY_FILE, and is none without either', () => {
    const key = writtenKey('flag-fallback.txt');
    const fromEnv = commandLineIdentities({
      files: undefined,
      env: { BACKUPD_AGE_IDENTITY_FILE: 'flag-fallback.txt' },
      cwd: directory,
    });
    expect(fromEnv.map((identity) => identity.recipient.text)).toEqual([key.recipient]);
    expect(commandLineIdentities({ files: [], env: {}, cwd: directory })).toEqual([]);
  });

  it('names the flag in each problem', () => {
    const empty = join(directory, 'flag-empty.txt');
    writeFileSync(empty, '# nothing here\n\n');
    const missing = join(directory, 'flag-missing.txt');
    expect(
      problemsOf(() => commandLineIdentities({ files: [empty, missing], env: {}, cwd: directory })),
    ).toEqual([
      `--age-identity-file: ${empty} holds no age identity`,
      `--age-identity-file: cannot read ${missing} (ENOENT: no such file or directory)`,
    ]);
  });

  it('is in the help of restore, verify and ls', () => {
    const lsCommand = COMMANDS.find((command) => command.name === 'ls')!;
    for (const command of [restoreCommand, verifyCommand, lsCommand]) {
      expect(command.help).toMatch(
        /^ {2}--age-identity-file <file> {2}an age identity file .*repeat for several \(default: BACKUPD_AGE_IDENTITY_FILE, comma-separated\)$/m,
      );
      expect(command.usageLine).toContain('[--age-identity-file <file>]...');
    }
  });
});

describe("replicate's help", () => {
  it('lists the two variables under the others', () => {
    const help = COMMANDS.find((command) => command.name === 'replicate')!.help;
    expect(help).toContain(
      "Encryption (age; a config file sets each database's encryption: ageRecipients, ageIdentityFile):\n  BACKUPD_AGE_RECIPIENTS=age1…[,age1…]       encrypt every object to these public keys\n  BACKUPD_AGE_IDENTITY_FILE=<file>[,<file>]  identity files (secret keys) to read encrypted objects with\n",
    );
  });
});

describe('the refusals, each naming its setting', () => {
  const at = 'databases[0].encryption';

  it('an invalid recipient, shown (it is public)', () => {
    expect(fileProblems('      ageRecipients: [age1qqqq]\n')).toEqual([
      `${at}.ageRecipients[0]: not an age X25519 recipient (expected age1… as age-keygen prints it): "age1qqqq"`,
    ]);
  });

  it('an identity file given where recipients belong', () => {
    expect(fileProblems('      ageRecipients: [/etc/backupd/key.txt]\n')).toEqual([
      `${at}.ageRecipients[0]: "/etc/backupd/key.txt" looks like a file, but recipients are age1… public keys (age-keygen -y <file> prints an identity file's); an identity file belongs in ageIdentityFile, on hosts that restore`,
    ]);
    expect(problemsOf(() => singleConfig({ BACKUPD_AGE_RECIPIENTS: 'keys/age.key' }))).toEqual([
      'BACKUPD_AGE_RECIPIENTS: "keys/age.key" looks like a file, but recipients are age1… public keys (age-keygen -y <file> prints an identity file\'s); an identity file belongs in BACKUPD_AGE_IDENTITY_FILE, on hosts that restore',
    ]);
  });

  it('a recipient given where an identity file belongs', () => {
    const recipient = generateIdentity().recipient;
    expect(fileProblems(`      ageIdentityFile: ${recipient}\n`)).toEqual([
      `${at}.ageIdentityFile: ${recipient} is a public recipient, not a file: recipients belong in ageRecipients`,
    ]);
  });

  it('an unreadable identity file: its path and errno', () => {
    const missing = join(directory, 'nope', 'key.txt');
    const settings = fileConfig('      ageIdentityFile: nope/key.txt\n').databases[0]!.encryption;
    expect(problemsOf(() => loadEncryptionKeys(settings, 'backupd.yml'))).toEqual([
      `${at}.ageIdentityFile: cannot read ${missing} (ENOENT: no such file or directory)`,
    ]);
    const folder = join(directory, 'a-directory');
    mkdirSync(folder, { recursive: true });
    const onDirectory = fileConfig('      ageIdentityFile: a-directory\n').databases[0]!.encryption;
    expect(problemsOf(() => loadEncryptionKeys(onDirectory, 'backupd.yml'))).toEqual([
      `${at}.ageIdentityFile: ${folder} is not a file`,
    ]);
    const key = writtenKey('a-file.txt');
    const underFile = fileConfig('      ageIdentityFile: a-file.txt/key.txt\n').databases[0]!
      .encryption;
    expect(problemsOf(() => loadEncryptionKeys(underFile, 'backupd.yml'))).toEqual([
      `${at}.ageIdentityFile: cannot read ${key.file}/key.txt (ENOTDIR: not a directory)`,
    ]);
  });

  it('a file with no key, a file of public keys, a line that is not a key, a file far too large', () => {
    const write = (name: string, content: string) => {
      writeFileSync(join(directory, name), content);
      return join(directory, name);
    };
    const empty = write('no-key.txt', '# created: 2026-12-07\n\n');
    const recipient = generateIdentity().recipient;
    const publicKeys = write('public.txt', `# recipients\n${recipient}\n`);
    const garbled = write('garbled.txt', '# key\nnot a key at all\n');
    const large = write('large.txt', 'x'.repeat(64 * 1024 + 1));
    const settings = fileConfig(
      '      ageIdentityFile: [no-key.txt, public.txt, garbled.txt, large.txt]\n',
    ).databases[0]!.encryption;
    expect(problemsOf(() => loadEncryptionKeys(settings, 'backupd.yml'))).toEqual([
      `${at}.ageIdentityFile[0]: ${empty} holds no age identity`,
      `${at}.ageIdentityFile[1]: ${publicKeys} line 2 is not an age X25519 identity (expected AGE-SECRET-KEY-1… as age-keygen writes it); it holds age1… public keys (recipients): an identity file holds the secret keys (AGE-SECRET-KEY-1…) they belong to`,
      `${at}.ageIdentityFile[2]: ${garbled} line 2 is not an age X25519 identity (expected AGE-SECRET-KEY-1… as age-keygen writes it)`,
      `${at}.ageIdentityFile[3]: ${large} holds 65537 bytes, more than an identity file (at most 65536)`,
    ]);
  });

  it('duplicates: a recipient, a file, a key in two files', () => {
    const key = writtenKey('dup-1.txt');
    const copy = join(directory, 'dup-2.txt');
    writeFileSync(copy, `${key.identity}\n`);
    expect(
      fileProblems(
        `      ageRecipients: [${key.recipient}, ${key.recipient}]\n      ageIdentityFile: [dup-1.txt, ${key.file}]\n`,
      ),
    ).toEqual([
      `${at}.ageRecipients[1]: ${key.recipient} is listed twice`,
      `${at}.ageIdentityFile[1]: ${key.file} is named twice`,
    ]);
    const settings = fileConfig('      ageIdentityFile: [dup-1.txt, dup-2.txt]\n').databases[0]!
      .encryption;
    expect(problemsOf(() => loadEncryptionKeys(settings, 'backupd.yml'))).toEqual([
      `${at}.ageIdentityFile[1]: ${copy} line 1 is the same key as ${key.file} line 3 (recipient ${key.recipient})`,
    ]);
  });

  it('shapes: not a mapping, empty, an unknown key, empty lists, a non-string item, too many recipients', () => {
    expect(fileProblems('      - age1x\n')).toEqual([
      `${at}: must be a mapping with ageRecipients and/or ageIdentityFile, got a list`,
    ]);
    expect(fileProblems('      {}\n')).toEqual([
      `${at}: give ageRecipients (to encrypt what is backed up), ageIdentityFile (to open encrypted objects), or both; or leave encryption out`,
    ]);
    const recipient = generateIdentity().recipient;
    expect(fileProblems(`      ageRecipient: ${recipient}\n      ageIdentityFile: []\n`)).toEqual([
      `${at}.ageRecipient: unknown setting (known: ageRecipients, ageIdentityFile)`,
      `${at}.ageIdentityFile: must list at least one; leave it out for none`,
    ]);
    expect(fileProblems(`      ageRecipients: [${recipient}, 7]\n`)).toEqual([
      `${at}.ageRecipients[1]: must be one of the age1… recipients, got number 7`,
    ]);
    expect(fileProblems('      ageRecipients: 7\n')).toEqual([
      `${at}.ageRecipients: must be a list of age1… recipients, or one string of them comma-separated, got number 7`,
    ]);
    const many = Array.from({ length: MAX_AGE_RECIPIENTS + 1 }, () => generateIdentity().recipient);
    expect(fileProblems(`      ageRecipients: [${many.join(', ')}]\n`)).toEqual([
      `${at}.ageRecipients: at most 31 recipients (an object's header holds 32, and a writer without an identity adds a key of its own), got 32`,
    ]);
  });

  it('recipients and identity files for a framed store directory, as for SQLite', () => {
    const recipient = generateIdentity().recipient;
    const framed = (encryption: string) =>
      `databases:\n  - path: store\n    type: framed\n    url: ${URL_}\n    encryption:\n${encryption}`;
    expect(
      parseConfig(framed(`      ageRecipients: [${recipient}]\n`), {
        env: {},
        baseDir: directory,
      }).databases[0]!.encryption?.recipients.map((r) => r.text),
    ).toEqual([recipient]);
    writtenKey('framed.txt');
    expect(
      parseConfig(framed('      ageIdentityFile: framed.txt\n'), { env: {}, baseDir: directory })
        .databases[0]!.encryption?.identityFiles,
    ).toHaveLength(1);
  });

  it('every problem at once, each with the file it was in', () => {
    const settings = fileConfig('      ageIdentityFile: [gone-1.txt, gone-2.txt]\n').databases[0]!
      .encryption;
    let error: unknown;
    try {
      loadEncryptionKeys(settings, 'backupd.yml');
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).message).toBe(
      `invalid configuration in backupd.yml:\n  ${at}.ageIdentityFile[0]: cannot read ${join(directory, 'gone-1.txt')} (ENOENT: no such file or directory)\n  ${at}.ageIdentityFile[1]: cannot read ${join(directory, 'gone-2.txt')} (ENOENT: no such file or directory)`,
    );
  });
});

describe('the rows of the encryption settings', () => {
  it('name the keys the section takes, their variables and the flag, apart from the other rows', () => {
    expect(ENCRYPTION_SETTINGS.map((row) => [row.keys, row.variable, row.commandLine])).toEqual([
      [['encryption.ageRecipients'], 'BACKUPD_AGE_RECIPIENTS', undefined],
      [
        ['encryption.ageIdentityFile'],
        'BACKUPD_AGE_IDENTITY_FILE',
        '--age-identity-file (restore, verify, ls)',
      ],
    ]);
    const keys = [...OTHER_SETTINGS, ...ENCRYPTION_SETTINGS].flatMap((row) => row.keys);
    expect(new Set(keys).size).toBe(keys.length);
    for (const row of ENCRYPTION_SETTINGS) expect(row.help).not.toMatch(/\n/);
  });
});

describe('list options (meta: the repeatable flag rests on them)', () => {
  it('gives every value in order, each through parse; a single one is a list of one', () => {
    const options = {
      tag: listOption({
        argument: '<t>',
        description: 'a tag',
        parse: (text) => text.toUpperCase(),
      }),
    };
    const many = readArguments(options, ['--tag', 'a', '--tag', 'b']);
    expect(parseOptionValues(options, many.raw)).toEqual({ tag: ['A', 'B'] });
    expect(parseOptionValues(options, readArguments(options, ['--tag', 'c']).raw)).toEqual({
      tag: ['C'],
    });
    expect(parseOptionValues(options, readArguments(options, []).raw)).toEqual({});
    expect(optionHelpLines(options)).toEqual(['  --tag <t>  a tag']);
  });
});
